"""What an evaluation scored: per-agent means with 95% confidence intervals, per task, suite and
difficulty, the mean of each score part, and links to replay the worst episodes.

A pure function of `EpisodeRecord`s (no I/O), so a saved run is reported again without the server.
Episodes the agent did not fail (the environment or the model endpoint did, or the run was
interrupted) are left out of every mean and counted apart.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from statistics import NormalDist
from urllib.parse import urlencode

from msgspec import Struct

from ..tasks import catalogue, find_task
from .records import NOT_THE_AGENTS, EpisodeRecord, Failure

# Student's t 97.5% quantile: exact for 1 and 2 degrees of freedom, where the expansion below is
# poor; from 3 on, the Cornish-Fisher expansion around the normal quantile is within 0.004.
_T975_SMALL = {1: 12.706, 2: 4.303}
_Z975 = NormalDist().inv_cdf(0.975)
# Below this many episodes a t interval on a score bounded by 0 and 1 is mostly wider than the
# range itself (n = 2 gives ±3.7 for scores 0.01 and 0.95), and skewed scores make it miss: none is shown.
MIN_INTERVAL_N = 10
INTERVAL_NOTE = (
    f"± is the half-width of the 95% confidence interval of the mean (Student's t), "
    f"shown only for {MIN_INTERVAL_N} episodes or more."
)
HELD_OUT_MARK = " (held out)"
HELD_OUT_NOTE = (
    f"Tasks marked{HELD_OUT_MARK} played held-out incidents, which only the key of the server that "
    "served them generates: the generator and knobs of the open tier of the same difficulty, at "
    "seeds nobody else can derive."
)


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


class Summary(Struct, frozen=True, kw_only=True):
    """Scores of a group of episodes, over those that measure the agent (`n`).

    `ci` is the half-width of the 95% interval of the mean, None when the sample is too small for
    one. `failed` counts the agent's own failures (in the mean, at the floor score); `apart` the
    episodes left out of it, by failure.
    """

    n: int
    mean: float
    ci: float | None
    success: float
    steps: float
    prompt_tokens: float  # per episode
    tokens: int
    failed: int
    apart: dict[str, int]

    @property
    def cell(self) -> str:
        if self.n == 0:
            return "-"
        return f"{self.mean:.3f} ± {self.ci:.3f}" if self.ci is not None else f"{self.mean:.3f}"


def summarize(records: Sequence[EpisodeRecord]) -> Summary:
    counted = [r for r in records if r.counted]
    scores = [r.score for r in counted]
    n = len(scores)
    apart: dict[str, int] = {}
    for record in records:
        if not record.counted:
            assert record.failure is not None
            apart[record.failure] = apart.get(record.failure, 0) + 1
    return Summary(
        n=n,
        mean=statistics.fmean(scores) if scores else 0.0,
        ci=t975(n - 1) * statistics.stdev(scores) / n**0.5 if n >= MIN_INTERVAL_N else None,
        success=sum(r.success for r in counted) / n if n else 0.0,
        steps=statistics.fmean(r.steps for r in counted) if counted else 0.0,
        prompt_tokens=statistics.fmean(r.prompt_tokens for r in counted) if counted else 0.0,
        tokens=sum(r.tokens for r in records),
        failed=sum(r.failure == "agent" for r in counted),
        apart=apart,
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
        task = find_task(record.task, held_out=True)
        return getattr(task, attribute) if task else "?"

    return key


def _agent(record: EpisodeRecord) -> str:
    return record.agent


def held_out(record: EpisodeRecord) -> bool:
    task = find_task(record.task, held_out=True)
    return task is not None and task.held_out


def _task(record: EpisodeRecord) -> str:
    return record.task + (HELD_OUT_MARK if held_out(record) else "")


class Gap(Struct, frozen=True):
    lower: str
    upper: str
    gap: float
    margin: float | None  # the two half-widths added, None when either agent has no interval

    @property
    def clear(self) -> bool:
        """The intervals do not overlap."""
        return self.margin is not None and self.gap > self.margin

    @property
    def verdict(self) -> str:
        if self.margin is None:
            return f"{self.lower} → {self.upper}: {self.gap:+.3f}: too few episodes to tell"
        return (
            f"{self.lower} → {self.upper}: {self.gap:+.3f} vs {self.margin:.3f}: "
            f"{'clear' if self.clear else 'NOT clear'}"
        )


def gaps(by_agent: dict[str, Summary]) -> list[Gap]:
    """Between consecutive agents in the order given (weakest first for the reference ladder)."""

    def margin(low: Summary, high: Summary) -> float | None:
        return low.ci + high.ci if low.ci is not None and high.ci is not None else None

    return [
        Gap(low, high, by_agent[high].mean - by_agent[low].mean, margin(by_agent[low], by_agent[high]))
        for low, high in itertools.pairwise(by_agent)
    ]


def markdown(
    records: Sequence[EpisodeRecord], header: Sequence[str] = (), episodes_file: str = "episodes.jsonl"
) -> str:
    """The report of `records`, given in the order of their results file (`episodes_file`, which the
    replay links open): agents (with the gaps between them when there are several), then per task,
    suite and difficulty, score parts, what was not counted, and replay links.

    Rows follow the task registry, whatever order the episodes finished in.
    """
    order = {task.id: index for index, task in enumerate(catalogue(held_out=True))}
    by_task = sorted(records, key=lambda r: order.get(r.task, len(order)))
    overall = {name: summarize(rs) for name, rs in group(by_task, _agent).items()}
    out = ["# Service Incident evaluation", "", *header, "", "## Agents", "", *agents_table(overall), "", INTERVAL_NOTE]
    if any(held_out(r) for r in records):
        out += ["", HELD_OUT_NOTE]
    if len(overall) > 1:
        out += ["", "Gaps between consecutive agents (clear when larger than the two half-widths added):", ""]
        out += [f"- {g.verdict}" for g in gaps(overall)]
    keys = {"task": _task, "suite": of_task("suite"), "difficulty": of_task("difficulty")}
    for column, key in keys.items():
        out += ["", f"## Per {column}", "", *breakdown(by_task, column, key, list(overall))]
    out += ["", "## Score parts", "", *parts_table(by_task)]
    if any(not r.counted for r in records):
        out += ["", "## Not counted", "", *not_counted(records)]
    if any(r.resumes for r in records):
        out += ["", "## Resumed", "", *resumed(records)]
    out += ["", *replay_section(records, episodes_file)]
    return "\n".join(out) + "\n"


def agents_table(overall: dict[str, Summary]) -> list[str]:
    return [
        "| agent | episodes | mean score ± 95% CI | success | mean steps | prompt tokens / episode | tokens "
        "| failed | not counted |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {name} | {s.n} | {s.cell} | {s.success:.0%} | {s.steps:.1f} | {s.prompt_tokens:.0f} | {s.tokens} "
            f"| {s.failed} | {_apart(s.apart)} |"
            for name, s in overall.items()
        ),
    ]


def _apart(apart: dict[str, int]) -> str:
    return ", ".join(f"{count} {failure}" for failure, count in apart.items()) or "0"


def breakdown(
    records: Sequence[EpisodeRecord], column: str, key: Callable[[EpisodeRecord], str], agents: list[str]
) -> list[str]:
    """One row per value of `key`, one mean (± CI where the sample allows) cell per agent."""
    rows = [f"| {column} | episodes | {' | '.join(agents)} |", f"|---|---:|{'---:|' * len(agents)}"]
    for value, rs in group(records, key).items():
        by_agent = {name: summarize(of_agent) for name, of_agent in group(rs, _agent).items()}
        cells = [by_agent[a].cell if a in by_agent else "-" for a in agents]
        rows.append(f"| {value} | {max(s.n for s in by_agent.values())} | {' | '.join(cells)} |")
    return rows


def parts_table(records: Sequence[EpisodeRecord]) -> list[str]:
    """The mean of each part of the score's breakdown, per agent and suite, over graded episodes;
    "-" where a suite does not grade that part."""
    graded = [r for r in records if r.breakdown]
    parts = list(dict.fromkeys(part for r in graded for part in r.breakdown or {}))
    if not parts:
        return ["No episode was graded."]
    rows = [f"| agent | suite | graded | {' | '.join(parts)} |", f"|---|---|---:|{'---:|' * len(parts)}"]
    for name, of_agent in group(graded, _agent).items():
        for suite, rs in group(of_agent, of_task("suite")).items():
            cells = []
            for part in parts:
                values = [r.breakdown[part] for r in rs if r.breakdown and part in r.breakdown]
                cells.append(f"{statistics.fmean(values):.3f}" if values else "-")
            rows.append(f"| {name} | {suite} | {len(rs)} | {' | '.join(cells)} |")
    return rows


def not_counted(records: Sequence[EpisodeRecord]) -> list[str]:
    """Each reason episodes were left out of the means, with how many and which agent."""
    reasons: dict[tuple[str, Failure, str], int] = {}
    for r in records:
        if r.failure in NOT_THE_AGENTS:
            key = (r.agent, r.failure, r.error or "")
            reasons[key] = reasons.get(key, 0) + 1
    return [
        "Episodes the agent did not fail, left out of its mean:",
        "",
        *(f"- {agent}, {failure}: {count} episode(s): {error}" for (agent, failure, error), count in reasons.items()),
    ]


RESUMED_LISTED = 10


def resumed(records: Sequence[EpisodeRecord]) -> list[str]:
    """Per agent, the episodes whose session was lost and carried on from the server's log, and how
    often: each is counted as it ended, like any other."""
    lines = [
        "Episodes whose session was lost (a connection cut, a server going away, a reply too late) and "
        "carried on from the server's episode log, counted as they ended:",
        "",
    ]
    for name, rs in group(records, _agent).items():
        again = [r for r in rs if r.resumes]
        if again:
            listed = ", ".join(f"{r.name} ({r.resumes})" for r in again[:RESUMED_LISTED])
            more = f" and {len(again) - RESUMED_LISTED} more" if len(again) > RESUMED_LISTED else ""
            lines.append(f"- {name}: {_resumes(again)}: {listed}{more}")
    return lines


def _resumes(records: Sequence[EpisodeRecord]) -> str:
    return f"{len(records)} episode(s) resumed, {sum(r.resumes for r in records)} resume(s) in all"


REPLAYED_WORST = 5


def replay_link(episode: str | int, episodes_file: str) -> str:
    """The page's replay of an episode of the results file (by name, or by its number among the
    replayable ones), relative to the server that serves the results folder at /results/."""
    return f"/web/?{urlencode({'replay': f'/results/{episodes_file}', 'episode': episode})}"


def replay_section(records: Sequence[EpisodeRecord], episodes_file: str = "episodes.jsonl") -> list[str]:
    """Links to the page's replay of each agent's lowest-scoring episodes: where it is worth watching.

    The page opens the first episode of a name, or the n-th it can replay (those with an
    observation): agents that played the same incidents share names, so their episodes are linked
    by number, and each link opens its own agent's episode.
    """
    replayable = [r for r in records if r.reset is not None]
    names = Counter(r.name for r in replayable)
    key = {id(r): r.name if names[r.name] == 1 else index for index, r in enumerate(replayable)}
    lines = [
        "## Replay",
        "",
        "Serve this folder with the environment server (`RESULTS_DIR=<this folder> server`), then open an",
        f"episode of `{episodes_file}` on its page (the links are relative to that server); the lowest-scoring:",
        "",
    ]
    for name, rs in group(replayable, _agent).items():
        worst = sorted((r for r in rs if r.counted), key=lambda r: (r.score, r.name))[:REPLAYED_WORST]
        lines += [
            f"- [{name} · {r.name}]({replay_link(key[id(r)], episodes_file)}): score {r.score:.2f}" for r in worst
        ]
    return lines


def summary_text(records: Sequence[EpisodeRecord]) -> str:
    """A few lines for the terminal: each agent's mean with its interval, and what was not counted."""
    lines = []
    for name, rs in group(records, _agent).items():
        s = summarize(rs)
        if s.n == 0:
            lines.append(f"{name}: no episode measured the agent; not counted: {_apart(s.apart)}")
            continue
        interval = f"± {s.ci:.3f} (95% CI)" if s.ci is not None else f"(no interval: n < {MIN_INTERVAL_N})"
        line = (
            f"{name}: mean score {s.mean:.3f} {interval} over {s.n} episodes, success {s.success:.0%}, "
            f"{s.prompt_tokens:.0f} prompt tokens per episode, {s.tokens} tokens, {s.failed} failed"
        )
        if s.apart:
            line += f"; not counted: {_apart(s.apart)}"
        if again := [r for r in rs if r.resumes]:
            line += f"; {_resumes(again)}"
        lines.append(line)
    return "\n".join(lines)
