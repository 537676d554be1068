"""Rewards, the final score and the postmortem. Every number that grades an agent is defined here, once.

Two reward modes. "final" (evaluation): every step before the last pays exactly 0 and the last
carries the episode's whole return. "dense" (training): the same return spread over the steps, with
shaping that uses privileged information (whether an inspection looked at a root cause while its
fault showed, whether a remedy healed one) and is documented as such. Information rewards are
potential-based: paid when a root's evidence is first seen and settled (subtracted) at the end, so
the return is the outcome minus the waste in both modes. The final score is separate, in
[SCORE_FLOOR, SCORE_CEIL], and grades the answer, the evidence behind it, the state the world was
left in and the steps taken.

A remedy is judged by what it did in the world model: against the same world without it, over the
steps it acts in, did it remove a root cause's fault, ease a root's impact (a relief that buys time,
a scale-up or load shedding that lowers its error rate or latency), or change nothing for the
incident or make users' impact worse? Only the last two are waste.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .models import Postmortem, RootCause, Severity
from .world import P0_ERROR_RATE, P0_LATENCY_MS, P1_ERROR_RATE, P1_LATENCY_MS, World

# Per-step rewards (the triage table).
INFO_REWARD = 0.1  # dense only: a new look at a root cause while its fault shows (privileged)
NO_INFO_REWARD = 0.0  # any other new look
WASTE_PENALTY = -0.05  # a redundant inspection, an unknown target, an action the task does not allow
DECLARE_EXACT = 1.0  # root cause and severity right
DECLARE_ROOT_ONLY = 0.6  # root cause right, severity wrong
DECLARE_PARTIAL = 0.3  # some but not all root causes of a multi-fault incident
DECLARE_WRONG = -0.3  # root cause wrong
BUDGET_EXHAUSTED = -0.2  # the step budget ran out without ending the episode
# Information rewards paid in one episode stop here, which bounds the settlement.
INFO_REWARD_CAP = 0.5
# Remediation (response and root-cause tasks).
REMEDY_HEALS = 0.2  # the remedy removes a root cause
REMEDY_EASES = 0.0  # it eases a root's impact without removing the fault: no waste, and nothing to farm
REMEDY_WRONG = -0.1  # it changes nothing for the incident, or makes users' impact worse
RESOLVE_RESTORED = 0.5  # resolved with service restored
RESOLVE_PREMATURE = -0.5  # resolved while a fault is live or users still fail

# Dense mode's per-step rewards, each with the event as the documentation names it (docs/scoring.md's
# table is rendered from this).
REWARD_TABLE: tuple[tuple[str, float], ...] = (
    ("dense: first look at a root cause while its fault shows (privileged)", INFO_REWARD),
    ("any other new look", NO_INFO_REWARD),
    ("redundant inspection, unknown target or action the task does not allow", WASTE_PENALTY),
    ("declare: service and severity right", DECLARE_EXACT),
    ("declare: service right, severity wrong", DECLARE_ROOT_ONLY),
    ("declare: some but not all root causes", DECLARE_PARTIAL),
    ("declare: wrong service", DECLARE_WRONG),
    ("remedy that removes a root cause's fault", REMEDY_HEALS),
    ("remedy that eases a root cause's impact without removing its fault (buys time)", REMEDY_EASES),
    ("remedy that changes nothing for the incident or makes users' impact worse", REMEDY_WRONG),
    ("resolve with service restored", RESOLVE_RESTORED),
    ("resolve while a fault is live or users still fail", RESOLVE_PREMATURE),
    ("step budget spent before the episode ended", BUDGET_EXHAUSTED),
)

# A remedy eases a root cause when, at some step it acts in (its own and the next ones: a relief lasts
# two), the root's error rate is lower by this much, or its p99 by this share, than in the same world
# without it; it hurts when users' graded impact is worse by as much. Over 240 training incidents, 96%
# of the listed reliefs clear these margins on their root, and 26 in 13,000 remedies on a bystander do.
EASED_ERROR = 0.01
EASED_P99 = 0.1
EFFECT_STEPS = 3

# The bounds of any single step's reward (settlement included).
REWARD_MAX = DECLARE_EXACT
REWARD_MIN = min(DECLARE_WRONG, RESOLVE_PREMATURE, BUDGET_EXHAUSTED + WASTE_PENALTY) - INFO_REWARD_CAP

# Final score: the weight of each part per kind of grading. `root_cause`, `evidence` and `remediation`
# are earned root by root (named, seen while named, fixed); every other part counts in proportion to
# the root causes named right (the `root_cause` share: found over declared-or-true), so a wrong answer
# earns none of them and half the roots earns about half; efficiency counts in full once service is
# restored.
WEIGHTS: Mapping[str, Mapping[str, float]] = {
    "triage": {"root_cause": 0.5, "severity": 0.2, "evidence": 0.2, "efficiency": 0.1},
    "response": {
        "root_cause": 0.3,
        "remediation": 0.3,
        "severity": 0.1,
        "evidence": 0.1,
        "efficiency": 0.1,
        "rationale": 0.1,
    },
    "rca": {"root_cause": 0.4, "remediation": 0.2, "evidence": 0.2, "efficiency": 0.2},
    "generated": {"root_cause": 0.35, "remediation": 0.2, "severity": 0.15, "evidence": 0.15, "efficiency": 0.15},
}
SCORE_WASTE = 0.05  # taken off per wasted action (redundant, invalid, disallowed, or a remedy that did no good)
SCORE_FLOOR = 0.01
SCORE_CEIL = 0.99
# A rationale earns full credit by citing this many distinct facts the agent saw in the telemetry of
# a root cause it named right: facts from the page or from bystanders, which anyone can quote, do not
# count.
RATIONALE_CITES = 3

# A fact as an engineer cites it, one kind per alternative, the most specific first: a timestamp (as
# the clock time it prints), a clock time, a date, key=value, a file path, an IP address, a release
# version, a dotted name (Order.amount, java.lang.X), a hex identifier (pod, request and trace ids), a
# name (CrashLoopBackOff, OOMKilled, NoneType, SIGSEGV, ECONNREFUSED), a number. Words are no facts.
_FACT = re.compile(
    r"(?P<stamp>\b\d{4}-\d{2}-\d{2}[T ](?P<clock>\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?Z?)"
    r"|(?P<time>(?<![\d:])\d{1,2}:\d{2})"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
    r"|(?P<pair>\b\w+=[\w.%/:-]+)"
    r"|(?P<path>(?<![\w./-])(?:[\w.-]+/)+[\w-]+\.[A-Za-z]\w*)"
    r"|(?P<address>\b\d{1,3}(?:\.\d{1,3}){3}\b)"
    r"|(?P<version>\bv?\d+(?:\.\d+){2,}(?:-\w+)?|\bv\d+\.\d+\b)"
    r"|(?P<dotted>\b[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+\b)"
    r"|(?P<hex>\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{5,}\b)"
    r"|(?P<name>\b[A-Z](?=\w*[a-z])(?=\w*[A-Z])\w+|\b[A-Z][A-Z_]{3,}\w*)"
    r"|(?P<number>\b\d+(?:\.\d+)?%?)"
)
# What every log prints whatever the fault (levels, HTTP and SQL verbs, a request served, a health
# check passed): no facts.
_GENERIC = frozenset(
    {
        "CRIT",
        "CRITICAL",
        "DEBUG",
        "ERROR",
        "FATAL",
        "INFO",
        "NOTICE",
        "TRACE",
        "WARN",
        "WARNING",
        "HTTP",
        "HTTPS",
        "POST",
        "HEAD",
        "PATCH",
        "DELETE",
        "OPTIONS",
        "SELECT",
        "INSERT",
        "UPDATE",
        "FROM",
        "WHERE",
        "200",
        "status=200",
        "status=ok",
    }
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?%?")


def _significant(token: str) -> tuple[float, int] | None:
    """A number as cited, and its significant digits: "2800" is 2.8e3 to two digits, "99%" is 99."""
    if not _NUMBER.fullmatch(token):
        return None
    digits = token.rstrip("%")
    figures = len(digits.replace(".", "").lstrip("0")) if "." in digits else len(digits.strip("0") or "0")
    return float(digits), max(1, figures)


def _spelled(match: re.Match[str]) -> str | None:
    """One spelling of a fact (hours padded, versions with one "v", key=value as its value when that
    is a fact itself), or None for what is no fact: a generic word, a number of one significant digit
    shorter than three ("0", "4", "20", "0.5": a list of them quotes nothing; "500" is a fact)."""
    token, kind = match.group(), match.lastgroup
    if token in _GENERIC:
        return None
    if kind == "stamp":
        return match.group("clock")
    if kind == "time":
        hours, minutes = token.split(":")
        return f"{int(hours):02d}:{minutes}"
    if kind == "pair":
        value = _FACT.fullmatch(token.split("=", 1)[1])
        return (_spelled(value) if value is not None and value.lastgroup != "pair" else None) or token
    if kind == "version":
        return "v" + token.lower().lstrip("v")
    if kind == "number":
        number = _significant(token)
        return token if number is not None and (number[1] >= 2 or (token.isdigit() and len(token) >= 3)) else None
    return token


def _facts(text: str, *, values: bool) -> set[str]:
    """The facts a text states; with `values`, a key=value also states its value (a view showing
    build=v5.8.5 shows v5.8.5 and build=v5.8.5)."""
    found = {fact for match in _FACT.finditer(text) if (fact := _spelled(match))}
    if values:
        found |= {match.group() for match in _FACT.finditer(text) if match.lastgroup == "pair"} - _GENERIC
    return found


def _numbers(facts: set[str]) -> list[tuple[float, bool]]:
    """The numbers among facts, each with whether it is a percentage; a ratio shown (0.0015) is also
    the percentage an engineer cites (0.15%), and a percentage shown also its ratio."""
    found: list[tuple[float, bool]] = []
    for fact in facts:
        if not _NUMBER.fullmatch(fact):
            continue
        value, percent = float(fact.rstrip("%")), fact.endswith("%")
        found.append((value, percent))
        if percent:
            found.append((value / 100, False))
        elif fact.startswith("0."):
            found.append((value * 100, True))
    return found


def _quotes(cited: str, observed: set[str], numbers: list[tuple[float, bool]]) -> bool:
    """Whether a cited fact is one observed: the same fact, or a number rounded as engineers round
    (2812.2 cited as 2800, 99.2% as 99%, a ratio 0.889 as 88.9%), and a percentage only as a percentage."""
    if cited in observed:
        return True
    number = _significant(cited)
    if number is None or number[1] < 2:
        return False
    value, figures = number
    percent = cited.endswith("%")
    return any(shown == percent and float(f"{x:.{figures}g}") == value for x, shown in numbers)


# The rubric's thresholds are stated with the task: citing them invents nothing (they earn nothing).
_RUBRIC = _facts(f"{P0_ERROR_RATE:.0%} {P1_ERROR_RATE:.0%} {P0_LATENCY_MS:.0f} ms {P1_LATENCY_MS:.0f} ms", values=False)
_RUBRIC_NUMBERS = _numbers(_RUBRIC)


@dataclass(frozen=True, slots=True)
class RemedyVerdict:
    """What one remedy did, against the same world without it."""

    step: int
    remedy: str
    service: str
    heals: bool  # it removed a root cause's fault
    eased: tuple[str, ...]  # the root causes whose error rate or latency it measurably lowered
    hurts: bool  # users' graded impact got measurably worse

    @property
    def wasted(self) -> bool:
        return not self.heals and (self.hurts or not self.eased)

    def __str__(self) -> str:
        if self.heals:
            effect = f"removed the fault of {self.service}"
        elif self.wasted:
            effect = "made users' impact worse" if self.hurts else "changed nothing for the incident"
            effect += " (wasted)"
        else:
            effect = f"eased {', '.join(self.eased)} without removing the fault (not wasted)"
        return f"step {self.step}: {self.remedy} {self.service}: {effect}"


@dataclass(slots=True)
class Ledger:
    """What an episode has done so far, as far as grading is concerned."""

    info_paid: float = 0.0
    waste: int = 0
    evidence: set[str] = field(default_factory=set)
    observed: list[tuple[frozenset[str], str]] = field(default_factory=list)
    rationales: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    declared: frozenset[str] | None = None
    severity_right: bool = False
    remedies: list[RemedyVerdict] = field(default_factory=list)

    def inspection_reward(self, revealing: bool) -> float:
        if not revealing:
            return NO_INFO_REWARD
        paid = min(INFO_REWARD, INFO_REWARD_CAP - self.info_paid)
        self.info_paid = round(self.info_paid + paid, 6)
        return paid

    def wasted(self) -> float:
        self.waste += 1
        return WASTE_PENALTY

    def observe(self, text: str, services: frozenset[str]) -> None:
        """A view's text and the services it showed. Tokenized only if a rationale is ever graded."""
        self.observed.append((services, text))


def declare_reward(declared: frozenset[str], roots: frozenset[str], severity_right: bool | None) -> float:
    """`severity_right` is None where the task does not grade severity."""
    if declared == roots:
        return DECLARE_ROOT_ONLY if severity_right is False else DECLARE_EXACT
    return DECLARE_PARTIAL if declared & roots else DECLARE_WRONG


def _without_last_remedy(world: World) -> World:
    """The same world with every remedy but the last: what the last one is measured against."""
    other = World(world.incident)
    for earlier in world.history[:-1]:
        other.step = earlier.step
        other.remediate(earlier.remedy, earlier.service)
    other.step = world.step
    return other


def judge_remedy(world: World) -> RemedyVerdict:
    """The world's last remedy, judged by its effect in the world model (privileged: for grading)."""
    last = world.history[-1]
    if last.outcome == "heals":  # a fix is no waste whatever else it did: nothing to measure
        return RemedyVerdict(last.step, last.remedy, last.service, True, (), False)
    without = _without_last_remedy(world)
    eased: set[str] = set()
    hurts = False
    for step in range(last.step, last.step + EFFECT_STEPS):
        now, then = world.states_at(step), without.states_at(step)
        eased |= {
            root
            for root in world.root_causes
            if then[root].request_error - now[root].request_error >= EASED_ERROR
            or then[root].p99_ms - now[root].p99_ms >= EASED_P99 * then[root].p99_ms
        }
        (error, p99), (error_then, p99_then) = world.graded_impact(step), without.graded_impact(step)
        hurts |= error - error_then >= EASED_ERROR or p99 - p99_then >= EASED_P99 * p99_then
    return RemedyVerdict(last.step, last.remedy, last.service, False, tuple(sorted(eased)), hurts)


def remedy_reward(ledger: Ledger, world: World) -> float:
    """The dense reward of the remedy just applied to `world`; recorded, and counted as waste if it did no good."""
    verdict = judge_remedy(world)
    ledger.remedies.append(verdict)
    if verdict.heals:
        return REMEDY_HEALS
    if verdict.wasted:
        ledger.waste += 1
        return REMEDY_WRONG
    return REMEDY_EASES


def fixed_roots(world: World) -> frozenset[str]:
    """The root causes every fault of which has its fix in effect now."""
    healed = [(fault.service, world.healed_at(index)) for index, fault in enumerate(world.incident.faults)]
    return frozenset(root for root, _ in healed) - {root for root, at in healed if at is None or at > world.step}


def settle(reward: float, ledger: Ledger) -> float:
    """The terminal step's reward: its own reward less the shaping paid along the way."""
    return round(reward - ledger.info_paid, 6)


def paid(dense: float, mode: str, done: bool, ledger: Ledger) -> float:
    """What a step pays in a reward mode, given its dense reward (already recorded in the ledger)."""
    if mode == "dense":
        return dense
    return round(sum(ledger.rewards), 6) if done else 0.0


def rationale_facts(
    rationales: Iterable[str], observed: Iterable[tuple[frozenset[str], str]], roots: frozenset[str]
) -> tuple[set[str], set[str], set[str]]:
    """The distinct facts the rationales cite, those of them seen anywhere (a view, or the rubric),
    and those seen in a view of one of `roots`."""
    cited = {fact for text in rationales for fact in _facts(text, values=False)}
    seen = {fact for fact in cited if _quotes(fact, _RUBRIC, _RUBRIC_NUMBERS)}
    of_roots: set[str] = set()
    for shown, text in observed:
        facts = _facts(text, values=True)
        numbers = _numbers(facts)
        quoted = {fact for fact in cited - (of_roots if shown & roots else seen) if _quotes(fact, facts, numbers)}
        seen |= quoted
        if shown & roots:
            of_roots |= quoted
    return cited, seen, of_roots


def rationale_credit(
    rationales: Iterable[str], observed: Iterable[tuple[frozenset[str], str]], roots: frozenset[str]
) -> float:
    """Credit for rationales that cite facts the agent saw in a view of one of `roots`; facts never
    seen anywhere (invented) dilute it, true facts from elsewhere do not.

    Words alone earn nothing: only values, identifiers, names and key=value facts count, so stuffing
    a rationale with keywords cannot pay.
    """
    cited, seen, of_roots = rationale_facts(rationales, observed, roots)
    return min(1.0, len(of_roots) / RATIONALE_CITES) * len(seen) / len(cited) if cited else 0.0


def root_credit(
    *, grading: str, roots: frozenset[str], ledger: Ledger, fixed: frozenset[str]
) -> dict[str, dict[str, float]]:
    """What each root cause earned of the parts earned root by root: named (`root_cause`, diluted by
    services named that are not roots), seen while named (`evidence`, out of the `root_cause` share),
    and fixed (`remediation`, an equal share per root)."""
    weights = WEIGHTS[grading]
    declared = ledger.declared or frozenset()
    found = declared & roots
    root_share = len(found) / len(declared | roots)
    earned = {
        root: {
            "root_cause": 1.0 / len(declared | roots) if root in found else 0.0,
            # Seeing a root and not naming it earns nothing.
            "evidence": root_share / len(found) if root in found and root in ledger.evidence else 0.0,
            "remediation": 1.0 / len(roots) if root in fixed else 0.0,
        }
        for root in sorted(roots)
    }
    return {
        root: {part: weights[part] * value for part, value in parts.items() if part in weights}
        for root, parts in earned.items()
    }


def final_score(
    *,
    grading: str,
    roots: frozenset[str],
    steps: int,
    max_steps: int,
    ledger: Ledger,
    fixed: frozenset[str] = frozenset(),
    restored: bool = False,
) -> tuple[float, dict[str, float]]:
    """The episode's score and its breakdown."""
    weights = WEIGHTS[grading]
    declared = ledger.declared
    root_share = len(declared & roots) / len(declared | roots) if declared else 0.0
    found = declared & roots if declared else frozenset()
    earned = {
        "severity": root_share if ledger.severity_right else 0.0,
        "efficiency": (1.0 if restored else root_share) * (1.0 - (steps - 1) / max_steps),
        "rationale": (
            root_share * rationale_credit(ledger.rationales, ledger.observed, found) if "rationale" in weights else 0.0
        ),
    }
    parts = {name: weight * earned[name] for name, weight in weights.items() if name in earned}
    for credit in root_credit(grading=grading, roots=roots, ledger=ledger, fixed=fixed).values():
        for name, value in credit.items():
            parts[name] = parts.get(name, 0.0) + value
    parts = {name: parts.get(name, 0.0) for name in weights}
    parts["waste"] = -SCORE_WASTE * ledger.waste
    raw = max(0.0, min(1.0, sum(parts.values())))
    score = SCORE_FLOOR + (SCORE_CEIL - SCORE_FLOOR) * raw
    return round(score, 4), {name: round(value, 4) for name, value in parts.items()}


def postmortem(
    *,
    faults: list[tuple[str, str, list[str]]],
    seen: set[str],
    ledger: Ledger,
    severity: Severity | None,
    severity_basis: str,
    declared_severity: Severity | None,
    breakdown: Mapping[str, float],
    weights: Mapping[str, float],
    credit: Mapping[str, Mapping[str, float]],
    fixed: frozenset[str],
    restored: bool,
    live: list[str],
    red_herrings: list[str],
    steps: int,
    max_steps: int,
) -> Postmortem:
    """The truth of an ended episode, what each root cause earned, and for each part of the score
    that fell short, why."""
    roots = {service for service, _, _ in faults}
    declared = sorted(ledger.declared or ())
    missed: dict[str, str] = {}
    for part, weight in weights.items():
        if breakdown.get(part, 0.0) >= weight - 1e-9:
            continue
        if part == "root_cause":
            absent, extra = sorted(roots - set(declared)), sorted(set(declared) - roots)
            said = [f"not named: {', '.join(absent)}"] if absent else []
            said += [f"named but not a root cause: {', '.join(extra)}"] if extra else []
            missed[part] = "; ".join(said) or "no root cause was declared"
        elif part == "severity":
            missed[part] = f"declared {declared_severity or 'nothing'}, graded {severity}" + (
                "" if set(declared) == roots else "; counts in proportion to the root causes named right"
            )
        elif part == "evidence":
            unseen = sorted(roots & set(declared) - seen)
            said = [f"no view showed the fault of: {', '.join(unseen)}"] if unseen else []
            said += [] if set(declared) == roots else ["counts in proportion to the root causes named right"]
            missed[part] = "; ".join(said)
        elif part == "remediation":
            unfixed = sorted(roots - fixed)
            missed[part] = f"not fixed: {', '.join(unfixed)} (each root cause is an equal share)" + (
                f"; faults still live on: {', '.join(live)}" if live else ""
            )
        elif part == "efficiency":
            missed[part] = f"{steps} of {max_steps} steps used" + (
                "" if set(declared) == roots or restored else "; counts in proportion to the root causes named right"
            )
        elif part == "rationale":
            cited, seen, of_roots = rationale_facts(ledger.rationales, ledger.observed, roots & set(declared))
            said = [
                f"rationales cite {len(of_roots)} distinct fact(s) seen in a view of a root cause named right "
                f"({RATIONALE_CITES} earn the full credit)"
            ]
            said += (
                [f"cited but seen in no view (they dilute the credit): {', '.join(sorted(cited - seen))}"]
                if (cited - seen)
                else []
            )
            said += [] if set(declared) == roots else ["counts in proportion to the root causes named right"]
            missed[part] = "; ".join(said)
    if ledger.waste:
        missed["waste"] = (
            f"{ledger.waste} wasted action(s): repeated looks, refused actions, remedies that changed nothing "
            "for the incident or made users' impact worse"
        )
    return Postmortem(
        root_causes=[
            RootCause(
                service=service,
                fault=fault,
                fixes=fixes,
                seen=service in seen,
                named=service in declared,
                fixed=service in fixed,
                credited={part: round(value, 4) for part, value in credit[service].items()},
            )
            for service, fault, fixes in faults
        ],
        declared=declared,
        severity=severity,
        severity_basis=severity_basis,
        declared_severity=declared_severity,
        remedies=[str(verdict) for verdict in ledger.remedies],
        red_herrings=red_herrings,
        missed=missed,
    )
