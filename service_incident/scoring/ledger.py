"""The ledger: what an episode has done so far, as far as grading is concerned.

It changes only through its own methods, each named for what the episode did; everything else reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .remedies import RemedyVerdict
from .rewards import INFO_REWARD, INFO_REWARD_CAP, REWARD_DIGITS, rounded

# A text shown, or what writes it: only a task that grades rationales ever reads what was shown.
Shown = str | Callable[[], str]


class Ledger:
    """One episode's record for grading: evidence seen, waste, the answer, the remedies, the potential paid."""

    __slots__ = (
        "_bonus",
        "_declared",
        "_evidence",
        "_observed",
        "_potential",
        "_rationales",
        "_remedies",
        "_severity_right",
        "_waste",
    )

    def __init__(self) -> None:
        self._bonus = 0.0
        self._waste = 0
        self._evidence: frozenset[str] = frozenset()
        self._observed: list[tuple[frozenset[str], Shown]] = []
        self._rationales: list[str] = []
        self._declared: frozenset[str] | None = None
        self._severity_right = False
        self._remedies: list[RemedyVerdict] = []
        self._potential = 0.0

    @property
    def bonus(self) -> float:
        """The information bonus held in dense mode's potential (privileged shaping, taken back at the end)."""
        return self._bonus

    @property
    def waste(self) -> int:
        """Wasted actions: redundant looks, refused actions, remedies that did no good."""
        return self._waste

    @property
    def evidence(self) -> frozenset[str]:
        """The root causes a view the agent opened showed while their fault did."""
        return self._evidence

    @property
    def observed(self) -> tuple[tuple[frozenset[str], str], ...]:
        """Every text shown, with the services it showed (none for the page and the dashboard)."""
        written = [(services, shown if isinstance(shown, str) else shown()) for services, shown in self._observed]
        self._observed[:] = written  # each text written once
        return tuple(written)

    @property
    def rationales(self) -> tuple[str, ...]:
        return tuple(self._rationales)

    @property
    def declared(self) -> frozenset[str] | None:
        """The root causes named, or None before an answer."""
        return self._declared

    @property
    def severity_right(self) -> bool:
        return self._severity_right

    @property
    def remedies(self) -> tuple[RemedyVerdict, ...]:
        return tuple(self._remedies)

    def cite(self, rationale: str) -> None:
        """An action's rationale, graded at the end for the facts it cites."""
        self._rationales.append(rationale)

    def observe(self, text: Shown, services: frozenset[str]) -> None:
        """A view's text (or what writes it) and the services it showed. Written and tokenized only if a
        rationale is ever graded."""
        self._observed.append((services, text))

    def looked(self, revealing: Iterable[str]) -> None:
        """A new look the agent chose, with the root causes it showed while their fault did: evidence, and
        the information bonus for each root not seen before (up to the cap)."""
        new = frozenset(revealing) - self._evidence
        self._evidence |= new
        self._bonus = rounded(min(INFO_REWARD_CAP, self._bonus + INFO_REWARD * len(new)), REWARD_DIGITS)

    def wasted(self) -> None:
        """A redundant look or a refused action."""
        self._waste += 1

    def declare(self, roots: frozenset[str], severity_right: bool = False) -> None:
        """The answer: the root causes named, and whether the severity declared with them is right."""
        self._declared = roots
        self._severity_right = severity_right

    def remedied(self, verdict: RemedyVerdict) -> None:
        """A remedy as judged: recorded, and counted as waste if it did no good."""
        self._remedies.append(verdict)
        self._waste += verdict.wasted

    def pay(self, potential: float) -> float:
        """Dense mode's reward for reaching `potential`: its change since the last step (0 at reset)."""
        before, self._potential = self._potential, potential
        return rounded(potential - before, REWARD_DIGITS)
