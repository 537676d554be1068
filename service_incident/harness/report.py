"""What an evaluation scored: per-agent means with 95% confidence intervals, per task and per difficulty.

Works from `EpisodeRecord`s alone, so a saved run can be reported again without the server.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Iterable, Sequence
from statistics import NormalDist
from urllib.parse import urlencode

from msgspec import Struct

from ..tasks import TASKS
from .evaluation import EpisodeRecord

# Student's t 97.5% quantile: exact for 1 and 2 degrees of freedom, where the expansion below is
# poor; from 3 on, the Cornish-Fisher expansion around the normal quantile is within 0.004.
_T975_SMALL = {1: 12.706, 2: 4.303}
_Z975 = NormalDist().inv_cdf(0.975)


def t975(df: int) -> float:
    if df in _T975_SMALL:
        return _T975_SMALL[df]
    z, n = _Z975, float(df)
    return (
        z
        + (z**3 + z) / (4 * n)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * n**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * n**4)
    )


class Summary(Struct, frozen=True):
    """Scores of a group of episodes. `ci` is the half-width of the 95% interval of the mean (0 for n < 2)."""

    n: int
    mean: float
    ci: float
    success: float
    steps: float
    tokens: int
    failed: int

    @property
    def cell(self) -> str:
        return f"{self.mean:.3f} ± {self.ci:.3f}" if self.n > 1 else f"{self.mean:.3f}"


def summarize(records: Sequence[EpisodeRecord]) -> Summary:
    scores = [r.score for r in records]
    n = len(scores)
    mean = statistics.fmean(scores) if scores else 0.0
    ci = t975(n - 1) * statistics.stdev(scores) / n**0.5 if n > 1 else 0.0
    return Summary(
        n=n,
        mean=mean,
        ci=ci,
        success=sum(r.success for r in records) / n if n else 0.0,
        steps=statistics.fmean(r.steps for r in records) if records else 0.0,
        tokens=sum(r.tokens for r in records),
        failed=sum(r.error is not None for r in records),
    )


def group(records: Iterable[EpisodeRecord], key: Callable[[EpisodeRecord], str]) -> dict[str, list[EpisodeRecord]]:
    """Records by key, keys in order of first appearance."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def of_task(attribute: str) -> Callable[[EpisodeRecord], str]:
    """A record's task's `suite`, `difficulty`...; "?" for a task this version does not know."""

    def key(record: EpisodeRecord) -> str:
        task = TASKS.get(record.task)
        return getattr(task, attribute) if task else "?"

    return key


class Gap(Struct, frozen=True):
    lower: str
    upper: str
    gap: float
    margin: float  # the two half-widths added: the gap must exceed it for the intervals not to overlap

    @property
    def clear(self) -> bool:
        return self.gap > self.margin


def gaps(by_agent: dict[str, Summary]) -> list[Gap]:
    """Between consecutive agents in the order given (weakest first for the reference ladder)."""
    names = list(by_agent)
    return [
        Gap(low, high, by_agent[high].mean - by_agent[low].mean, by_agent[low].ci + by_agent[high].ci)
        for low, high in itertools.pairwise(names)
    ]


def markdown(records: Sequence[EpisodeRecord], header: Sequence[str] = ()) -> str:
    """The report: agents (with the ladder's gaps when there are several), then per task, suite and difficulty.

    Rows follow the task registry, whatever order the episodes finished in.
    """
    order = {task_id: index for index, task_id in enumerate(TASKS)}
    records = sorted(records, key=lambda r: order.get(r.task, len(order)))
    overall = {name: summarize(rs) for name, rs in group(records, lambda r: r.agent).items()}
    out = ["# Service Incident evaluation", "", *header, "", "## Agents", "", *agents_table(overall)]
    if len(overall) > 1:
        out += ["", "Gaps between consecutive agents (clear when larger than the two half-widths added):", ""]
        out += [
            f"- {g.lower} → {g.upper}: {g.gap:+.3f} vs {g.margin:.3f}: {'clear' if g.clear else 'NOT clear'}"
            for g in gaps(overall)
        ]
    keys = {"task": lambda r: r.task, "suite": of_task("suite"), "difficulty": of_task("difficulty")}
    for column, key in keys.items():
        out += ["", f"## Per {column}", "", *breakdown(records, column, key, list(overall))]
    out += ["", *replay_section(records)]
    return "\n".join(out) + "\n"


REPLAY_BASE = "http://127.0.0.1:8000"
REPLAYED_WORST = 10


def replay_link(record: EpisodeRecord, episodes_url: str = "/results/episodes.jsonl") -> str:
    """Where the web page replays an episode, once the results folder is served at /results/."""
    return f"{REPLAY_BASE}/web/?{urlencode({'replay': episodes_url, 'episode': record.name})}"


def replay_section(records: Sequence[EpisodeRecord]) -> list[str]:
    """Links to the page's replay of the lowest-scoring episodes: where an agent is worth watching."""
    worst = sorted(records, key=lambda r: (r.score, r.name))[:REPLAYED_WORST]
    return [
        "## Replay",
        "",
        "Serve this folder with the environment server (`RESULTS_DIR=<this folder> server`), then open any",
        "episode in the web page; the lowest-scoring ones:",
        "",
        *(f"- [{r.agent} · {r.name}]({replay_link(r)}): score {r.score:.2f}" for r in worst),
    ]


def agents_table(overall: dict[str, Summary]) -> list[str]:
    return [
        "| agent | episodes | mean score ± 95% CI | success | mean steps | tokens | failed |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {name} | {s.n} | {s.cell} | {s.success:.0%} | {s.steps:.1f} | {s.tokens} | {s.failed} |"
            for name, s in overall.items()
        ),
    ]


def breakdown(
    records: Sequence[EpisodeRecord], column: str, key: Callable[[EpisodeRecord], str], agents: list[str]
) -> list[str]:
    """One row per value of `key`, one mean ± CI cell per agent."""
    rows = [f"| {column} | episodes | {' | '.join(agents)} |", f"|---|---:|{'---:|' * len(agents)}"]
    for value, rs in group(records, key).items():
        by_agent = group(rs, lambda r: r.agent)
        cells = [summarize(by_agent[a]).cell if a in by_agent else "-" for a in agents]
        rows.append(f"| {value} | {max(map(len, by_agent.values()))} | {' | '.join(cells)} |")
    return rows


def summary_text(records: Sequence[EpisodeRecord]) -> str:
    """A few lines for the terminal: each agent's mean with its interval."""
    lines = []
    for name, rs in group(records, lambda r: r.agent).items():
        s = summarize(rs)
        lines.append(
            f"{name}: mean score {s.mean:.3f} ± {s.ci:.3f} (95% CI) over {s.n} episodes, "
            f"success {s.success:.0%}, {s.tokens} tokens, {s.failed} failed"
        )
    return "\n".join(lines)
