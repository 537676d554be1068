"""The facts a rationale cites, and its credit: what an engineer quotes from the views of a root cause.

A fact is a value, an identifier, a name or a key=value (never a word), spelled one way, so a
rationale is matched against what the agent was shown, with numbers as engineers round them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Set
from functools import lru_cache

from ..world import P0_ERROR_RATE, P0_LATENCY_MS, P1_ERROR_RATE, P1_LATENCY_MS

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


def _numbers(facts: Set[str]) -> list[tuple[float, bool]]:
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


def _quotes(cited: str, observed: Set[str], numbers: Iterable[tuple[float, bool]]) -> bool:
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


@lru_cache(maxsize=512)
def _shown(text: str) -> tuple[frozenset[str], tuple[tuple[float, bool], ...]]:
    """The facts a view's text shows and the numbers among them. Computed once per text: dense mode
    grades the rationales at every step, over every view seen so far."""
    facts = _facts(text, values=True)
    return frozenset(facts), tuple(_numbers(facts))


# The rubric's thresholds are stated with the task: citing them invents nothing (they earn nothing).
_RUBRIC = _facts(f"{P0_ERROR_RATE:.0%} {P1_ERROR_RATE:.0%} {P0_LATENCY_MS:.0f} ms {P1_LATENCY_MS:.0f} ms", values=False)
_RUBRIC_NUMBERS = _numbers(_RUBRIC)


def rationale_facts(
    rationales: Iterable[str], observed: Iterable[tuple[frozenset[str], str]], roots: frozenset[str]
) -> tuple[set[str], set[str], set[str]]:
    """The distinct facts the rationales cite, those of them seen anywhere (a view, or the rubric),
    and those seen in a view of one of `roots`."""
    cited = {fact for text in rationales for fact in _facts(text, values=False)}
    seen = {fact for fact in cited if _quotes(fact, _RUBRIC, _RUBRIC_NUMBERS)}
    of_roots: set[str] = set()
    for shown, text in observed:
        facts, numbers = _shown(text)
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
