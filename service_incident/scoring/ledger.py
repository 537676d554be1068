"""The ledger: what an episode has done so far, as far as grading is concerned.

It changes only through its own methods, each named for what the episode did; everything else reads it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .remedies import RemedyVerdict
from .rewards import (
    INFO_REWARD,
    INFO_REWARD_CAP,
    NO_INFO_REWARD,
    REMEDY_EASES,
    REMEDY_HEALS,
    REMEDY_WRONG,
    WASTE_PENALTY,
)


class Ledger:
    """One episode's record for grading: evidence seen, waste, the answer, the remedies, the rewards."""

    __slots__ = (
        "_declared",
        "_evidence",
        "_info_paid",
        "_observed",
        "_rationales",
        "_remedies",
        "_rewards",
        "_severity_right",
        "_waste",
    )

    def __init__(self) -> None:
        self._info_paid = 0.0
        self._waste = 0
        self._evidence: frozenset[str] = frozenset()
        self._observed: list[tuple[frozenset[str], str]] = []
        self._rationales: list[str] = []
        self._rewards: list[float] = []
        self._declared: frozenset[str] | None = None
        self._severity_right = False
        self._remedies: list[RemedyVerdict] = []

    @property
    def info_paid(self) -> float:
        """The information rewards paid so far (dense shaping, settled at the end)."""
        return self._info_paid

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
        return tuple(self._observed)

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

    def observe(self, text: str, services: frozenset[str]) -> None:
        """A view's text and the services it showed. Tokenized only if a rationale is ever graded."""
        self._observed.append((services, text))

    def looked(self, revealing: Iterable[str]) -> float:
        """A new look the agent chose, with the root causes it showed while their fault did: recorded as
        evidence, and its dense reward (an information reward for a root not seen before, up to the cap)."""
        new = frozenset(revealing) - self._evidence
        if not new:
            return NO_INFO_REWARD
        self._evidence |= new
        paid = min(INFO_REWARD, INFO_REWARD_CAP - self._info_paid)
        self._info_paid = round(self._info_paid + paid, 6)
        return paid

    def wasted(self) -> float:
        """A redundant look or a refused action: counted, and its dense reward."""
        self._waste += 1
        return WASTE_PENALTY

    def declare(self, roots: frozenset[str], severity_right: bool = False) -> None:
        """The answer: the root causes named, and whether the severity declared with them is right."""
        self._declared = roots
        self._severity_right = severity_right

    def remedied(self, verdict: RemedyVerdict) -> float:
        """A remedy as judged: recorded, counted as waste if it did no good, and its dense reward."""
        self._remedies.append(verdict)
        if verdict.heals:
            return REMEDY_HEALS
        if verdict.wasted:
            self._waste += 1
            return REMEDY_WRONG
        return REMEDY_EASES

    def settle(self, reward: float) -> float:
        """The terminal step's reward: its own reward less the shaping paid along the way."""
        return round(reward - self._info_paid, 6)

    def pay(self, dense: float, mode: str, done: bool) -> float:
        """Record a step's dense reward; what it pays in a reward mode (final: the whole return at the end)."""
        self._rewards.append(dense)
        if mode == "dense":
            return dense
        return round(sum(self._rewards), 6) if done else 0.0
