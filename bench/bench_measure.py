"""What the benchmark measures, measured: pager-only tells, identifiability, the oracle audit, tell
rates and the reference ladder.

    python bench/bench_measure.py [--train N] [--identify N] [--audit N] [--only SECTION ...]

- tells: rules that read only the first observation (the pages, the topology, the one visible log)
  and a logistic ranker fitted on training seeds over first-observation features; root and
  severity accuracy per tier on the frozen evaluation set.
- identify: the share of training incidents per tier whose every alternative hypothesis is
  contradicted by their full telemetry, and the kinds of hypotheses that survived.
- audit: episodes of random and reference play in final-reward mode; observation texts (every field
  but the postmortem) that match the judgment words, and intermediate rewards that are not 0.
- rates: incidents where two services show an identical error rate at reset; incidents where the
  visible service is a root, against the share of roots among the services.
- ladder: mean score with a 95% interval per reference agent (the fitted one on top), per suite and
  generated tier.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import PRESETS
from service_incident.harness.agents import AGENTS, Agent
from service_incident.harness.audit import audit
from service_incident.harness.fitted.features import depths
from service_incident.harness.identifiability import survey
from service_incident.models import Observation
from service_incident.tasks import TASKS
from service_incident.telemetry import Telemetry, parse_time
from service_incident.world import World, rubric

_BLAME_KEYS = ("upstream=", "host=")


# -- pager-only tells -----------------------------------------------------------------------------


def first_observation(task_id: str, seed: int, incident_id: str | None = None) -> Observation:
    """What an agent sees at reset: an evaluation incident by id, or a training incident by seed."""
    return ServiceIncidentEnvironment().reset(task_id=task_id, seed=seed, incident_id=incident_id)


def _paged(obs: Observation) -> list[str]:
    return list(dict.fromkeys(a.service for a in obs.alerts if a.signal != "disk_pct"))


def _blamed(obs: Observation) -> list[str]:
    found = []
    for text in obs.visible_logs.values():
        for line in text.splitlines():
            for key in _BLAME_KEYS:
                if key in line:
                    name = line.split(key, 1)[1].split()[0].split(".svc")[0].strip('"')
                    if name in obs.services:
                        found.append(name)
    return found


def _leaves(obs: Observation) -> list[str]:
    """Paged services none of whose dependencies is paged."""
    paged = set(_paged(obs))
    depends = {c.name: c.depends_on for c in obs.topology}
    return [s for s in _paged(obs) if not paged & set(depends[s])]


def _value(obs: Observation, service: str) -> float:
    return max((a.peak for a in obs.alerts if a.service == service and a.signal.endswith("ratio")), default=0.0)


RULES: dict[str, Callable[[Observation], list[str]]] = {
    "first page": lambda o: _paged(o)[:1] or o.services[:1],
    "deepest paged": lambda o: sorted(_paged(o) or o.services, key=lambda s: -depths(o).get(s, 0))[:1],
    "paged internal, worst ratio": lambda o: sorted(
        [s for s in _paged(o) if not next(c for c in o.topology if c.name == s).user_facing]
        or _paged(o)[:1]
        or o.services[:1],
        key=lambda s: -_value(o, s),
    )[:1],
    "visible service": lambda o: list(o.visible_logs)[:1],
    "blamed in visible logs": lambda o: _blamed(o)[:1] or _paged(o)[:1] or o.services[:1],
    "lowest paged (all of them)": lambda o: _leaves(o) or o.services[:1],
    "earliest page": lambda o: [min(o.alerts, key=lambda a: a.since).service] if o.alerts else o.services[:1],
}


def pager_severity(obs: Observation) -> str:
    error_rate = max((a.peak for a in obs.alerts if a.signal == "http_5xx_ratio"), default=0.0)
    latency = max((a.peak for a in obs.alerts if a.signal == "p99_latency_ms"), default=0.0)
    return rubric(error_rate, latency, False)


_KINDS = ("gateway", "database", "cache", "queue", "external")
_SIGNALS = ("http_5xx_ratio", "p99_latency_ms", "cpu_pct", "memory_pct", "disk_pct")


def features(obs: Observation, service: str) -> list[float]:
    card = next(c for c in obs.topology if c.name == service)
    depth = depths(obs)
    alerts = [a for a in obs.alerts if a.service == service]
    now = parse_time(obs.clock)
    since = min(((now - parse_time(a.since)).total_seconds() / 60 for a in alerts), default=0.0)
    paged = set(_paged(obs))
    callers = [c for c in obs.topology if service in c.depends_on]
    blamed = _blamed(obs)
    row = [
        1.0,
        float(card.user_facing),
        depth.get(service, 0) / 4,
        len(card.depends_on) / 4,
        len(callers) / 4,
        float(service in obs.visible_logs),
        blamed.count(service) / 4,
        float(service in _leaves(obs)),
        min(since, 60) / 60,
        _value(obs, service),
        float(bool(paged & {c.name for c in callers})),
        float(bool(paged & set(card.depends_on))),
    ]
    row += [float(card.kind == kind) for kind in _KINDS]
    row += [float(any(a.signal == signal for a in alerts)) for signal in _SIGNALS]
    return row


class Ranker:
    """Logistic regression over first-observation features of each service: is it a root?"""

    def __init__(self) -> None:
        self.weights: list[float] = []

    def fit(self, rows: list[tuple[list[float], bool]], epochs: int = 60, rate: float = 0.3) -> None:
        self.weights = [0.0] * len(rows[0][0])
        shuffled = list(rows)
        for epoch in range(epochs):
            random.Random(epoch).shuffle(shuffled)
            for x, y in shuffled:
                error = self.p(x) - float(y)
                step = rate * error / math.sqrt(1 + epoch)
                self.weights = [w - step * xi for w, xi in zip(self.weights, x, strict=True)]

    def p(self, x: list[float]) -> float:
        z = sum(w * xi for w, xi in zip(self.weights, x, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def predict(self, obs: Observation) -> list[str]:
        scored = sorted(((self.p(features(obs, s)), s) for s in obs.services), reverse=True)
        chosen = [s for p, s in scored if p >= 0.5]
        return chosen or [scored[0][1]]


def tells(train: int) -> None:
    print(f"\n## Pager-only tells (evaluation set; ranker fitted on {train} training seeds per tier)\n")
    roots_head = " | ".join(f"gen_{d} root" for d in PRESETS)
    print(f"| rule | {roots_head} | {' | '.join(f'gen_{d} severity' for d in PRESETS)} |")
    print("|---" * (1 + 2 * len(PRESETS)) + "|")
    frozen = dataset.decode(_eval_bytes())
    observations = {
        d: [(first_observation(f"gen_{d}", 0, r.id), r) for r in frozen if r.difficulty == d] for d in PRESETS
    }
    ranker = Ranker()
    rows = []
    for difficulty in PRESETS:
        for seed in range(train):
            obs = first_observation(f"gen_{difficulty}", seed)
            roots = {f.service for f in dataset.training_incident(difficulty, seed).faults}
            rows += [(features(obs, s), s in roots) for s in obs.services]
    ranker.fit(rows)
    predictors = {**RULES, "logistic ranker": ranker.predict}
    for name, rule in predictors.items():
        roots, severities = [], []
        for difficulty in PRESETS:
            pairs = observations[difficulty]
            roots.append(sum(set(rule(o)) == set(r.labels.root_causes) for o, r in pairs) / len(pairs))
            severities.append(sum(pager_severity(o) == r.labels.severity_at_page for o, r in pairs) / len(pairs))
        shown = " | ".join(f"{v:.0%}" for v in roots)
        sev = " | ".join(f"{v:.0%}" for v in severities) if name == "first page" else " | ".join("-" for _ in PRESETS)
        print(f"| {name} | {shown} | {sev} |")
    print("\nseverity columns: the rubric applied to the pages' peaks (the same for every root rule).")


def _eval_bytes() -> bytes:
    from importlib import resources

    return resources.files("service_incident").joinpath("incidents", dataset.EVAL_FILE).read_bytes()


# -- identifiability, audit, tell rates, ladder ----------------------------------------------------


def identify(count: int) -> None:
    print(f"\n## Identifiability ({count} training incidents per tier)\n")
    print("| tier | identifiable | (same-fix types allowed) | surviving hypotheses (incidents) |\n|---|---|---|---|")
    for difficulty in PRESETS:
        strict, loose, failures = survey([dataset.training_incident(difficulty, seed) for seed in range(count)])
        kinds = ", ".join(f"{kind}: {n}" for kind, n in failures.most_common()) or "none"
        print(f"| gen_{difficulty} | {strict:.1%} | {loose:.1%} | {kinds} |")


def oracle_audit(count: int) -> None:
    tasks = list(TASKS)
    episodes = [(tasks[i % len(tasks)], i) for i in range(count)]
    names = list(AGENTS)
    total_steps, found, paid = 0, [], 0
    for index, name in enumerate(names):
        share = episodes[index :: len(names)]
        steps, judged, nonzero = audit(share, AGENTS[name])
        total_steps += steps
        found += judged
        paid += nonzero
    print(f"\n## Oracle audit ({count} episodes, {total_steps} steps, agents {', '.join(names)} in turn)\n")
    print(f"- observation texts (every field but the postmortem) matching the judgment words: {len(found)}")
    print(f"- intermediate rewards other than 0 in final mode: {paid}")
    for text in found[:5]:
        print(f"  - {text!r}")


def rates(count: int) -> None:
    print(f"\n## Tell rates ({count} training incidents per tier)\n")
    print(
        "| tier | identical error rate on two services at reset (pages) | (all services' metrics) "
        "| visible service is a root | roots among services |\n|---|---|---|---|---|"
    )
    for difficulty in PRESETS:
        same_pages = same_metrics = visible_root = 0
        share = 0.0
        for seed in range(count):
            incident = dataset.training_incident(difficulty, seed)
            telemetry = Telemetry(World(incident), seed)
            values = [a.value for a in telemetry.alerts(0) if a.signal.endswith("ratio") and a.value > 0]
            same_pages += len(values) != len(set(values))
            shown = [telemetry.metrics(s.name, 0).error_rate for s in incident.services]
            same_metrics += len(shown) != len(set(shown))
            roots = {f.service for f in incident.faults}
            visible_root += incident.initial_visible in roots
            share += len(roots) / len(incident.services)
        print(
            f"| gen_{difficulty} | {same_pages / count:.1%} | {same_metrics / count:.1%} "
            f"| {visible_root / count:.1%} | {share / count:.1%} |"
        )


def ladder() -> None:
    print("\n## Reference ladder (every evaluation incident of every task; mean score, 95% interval)\n")
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for task in TASKS.values():
        key = task.id if task.generated else task.suite
        groups[key] += [(task.id, incident) for incident in task.incidents]
    names = list(AGENTS)
    print(f"| group | episodes | {' | '.join(names)} |")
    print("|---" * (2 + len(names)) + "|")
    overall: dict[str, list[float]] = defaultdict(list)
    for group, episodes in groups.items():
        cells = []
        for name in names:
            scores = [_play(name, task_id, incident) for task_id, incident in episodes]
            overall[name] += scores
            cells.append(_interval(scores))
        print(f"| {group} | {len(episodes)} | {' | '.join(cells)} |")
    print(f"| all | {len(overall[names[0]])} | {' | '.join(_interval(overall[n]) for n in names)} |")


def _play(name: str, task_id: str, incident_id: str, seed: int = 0) -> float:
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id=task_id, seed=seed, incident_id=incident_id)
    return play(AGENTS[name](seed), env, obs).score or 0.0


def play(agent: Agent, env: ServiceIncidentEnvironment, obs: Observation) -> Observation:
    """An episode from `obs` to its end; its last observation."""
    while not obs.done:
        obs = env.step(agent.act(obs))
    return obs


def _interval(scores: list[float]) -> str:
    mean = statistics.mean(scores)
    half = 1.96 * statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else float("nan")
    return f"{mean:.3f} ± {half:.3f}"


SECTIONS = ("tells", "identify", "audit", "rates", "ladder")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=300, help="training seeds per tier for the ranker")
    parser.add_argument("--identify", type=int, default=1000, help="training incidents per tier to check")
    parser.add_argument("--audit", type=int, default=1000, help="episodes to audit")
    parser.add_argument("--rates", type=int, default=1000, help="training incidents per tier for tell rates")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    args = parser.parse_args()
    counts = Counter(args.only)
    if counts["tells"]:
        tells(args.train)
    if counts["identify"]:
        identify(args.identify)
    if counts["audit"]:
        oracle_audit(args.audit)
    if counts["rates"]:
        rates(args.rates)
    if counts["ladder"]:
        ladder()


if __name__ == "__main__":
    main()
