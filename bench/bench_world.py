"""Instruments that judge the world's fairness: whether its labels are ones an engineer would sign and
whether the reference agents are a ceiling.

    python bench/bench_world.py [--train N] [--incidents N] [--holdout N] [--only SECTION ...]

- outsider: an outsider's fitted script (bench/outsider.py) against the reference `expert`: mean score
  with a 95% interval and the exact-root-set rate per generated tier of the frozen evaluation set, and
  on `--holdout` held-out incidents per held-out tier under the bench's own key.
- pager: the gradient-boosted ranker over first-observation features only (alert onsets against the
  page included), declaring every service above a tuned threshold; exact root sets per tier, beside
  bench_measure's logistic ranker.
- harm: the world of each training incident with every fault removed and the red herrings kept: the
  share of incidents whose herrings alone reach graded user impact (the rubric above P2 on a
  user-facing service), raise a critical page, or a warning that is not chronic, beyond what the same
  world without its herrings shows (that baseline has a column of its own); the draws the
  generator redrew because their herrings broke that label principle; and per herring kind, alone in
  the world, the share that pages critically on its own service.
- ratios: for every fact the outsider's script relies on, its rate on root services over its rate on
  the others (each service surveyed with the outsider's views), flagged above 3 or below 1/3.
- weak: per root, how far its own error-rate and p99 excursion (z-score over the early history) clears
  the largest everyday excursion of the other services, measured in the same incident without faults.
- oracle: an agent that reads the incident's answers and takes the fewest steps to the best score,
  against `expert`, per tier of the evaluation set.
- ladder: every reference agent (random < symptom_chaser < structured < expert < fitted), the
  outsider's fitted script and the oracle ceiling, mean score with a 95% interval per generated tier
  of the evaluation set and per held-out tier.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import outsider
from bench_measure import Ranker, _interval, features, first_observation, play
from msgspec import structs

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import PRESETS, generation
from service_incident.harness.agents import AGENTS, STALE_ALERT_S, ExpertAgent
from service_incident.holdout import TIERS as HELD_OUT_TIERS
from service_incident.holdout import HoldoutKey
from service_incident.incidents import Incident
from service_incident.models import Action, Declare, InspectMetrics, InspectTraces, MetricPoint, Observation
from service_incident.tasks import GENERATED_BUDGETS
from service_incident.telemetry import Telemetry, parse_time
from service_incident.world import World, rubric

# The bench's own held-out key: a fixed one, so its figures are reproducible; no host uses it.
BENCH_KEY = "the world instruments' own held-out key"
RATIO_FLAG = 3.0
# A fact shown on fewer services than this has no ratio worth reading.
MIN_SUPPORT = 5
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class Case:
    """One incident to play: how to reset it, and its answers."""

    tier: str
    task_id: str
    incident_id: str | None
    seed: int
    holdout_key: str | None
    incident: Incident

    def reset(self) -> tuple[ServiceIncidentEnvironment, Observation]:
        env = ServiceIncidentEnvironment(holdout_key=self.holdout_key)
        return env, env.reset(task_id=self.task_id, seed=self.seed, incident_id=self.incident_id)

    @property
    def roots(self) -> frozenset[str]:
        return frozenset(f.service for f in self.incident.faults)


def evaluation_cases(tier: str, count: int = dataset.EVAL_INCIDENTS) -> list[Case]:
    """The tier's first `count` incidents of the frozen evaluation set."""
    frozen = dataset.frozen()
    return [Case(tier, f"gen_{tier}", i, 0, None, frozen[i]) for i in dataset.eval_ids(tier)[:count]]


def held_out_cases(tier: str, count: int) -> list[Case]:
    key = HoldoutKey(BENCH_KEY)
    return [Case(tier, f"holdout_{tier}", None, i, BENCH_KEY, key.incident(tier, i)) for i in range(count)]


def groups(holdout: int, evaluation: int) -> dict[str, list[Case]]:
    """`evaluation` incidents of the evaluation set per generated tier, then `holdout` held-out
    incidents per held-out tier."""
    found = {f"gen_{tier}": evaluation_cases(tier, evaluation) for tier in PRESETS}
    found |= {f"holdout_{tier}": held_out_cases(tier, holdout) for tier in HELD_OUT_TIERS if holdout}
    return found


def declared(obs: Observation) -> frozenset[str]:
    """The services the episode's answer named."""
    for record in reversed(obs.action_history):
        if record.action in ("declare", "declare_rca"):
            return frozenset([*([record.target] if record.target else []), *record.targets])
    return frozenset()


def _rate(hits: Sequence[float]) -> str:
    return f"{sum(hits) / len(hits):.0%}" if hits else "-"


# -- outsider --------------------------------------------------------------------------------------


def outsider_section(
    train: int, holdout: int, evaluation: int = dataset.EVAL_INCIDENTS
) -> dict[str, dict[str, list[float]]]:
    print(f"\n## Outsider's fitted script against expert ({train} training seeds per tier)\n")
    model = outsider.fit(train)
    print("| group | episodes | outsider score | outsider exact roots | expert score | expert exact roots |")
    print("|---|---|---|---|---|---|")
    results: dict[str, dict[str, list[float]]] = {}
    for group, cases in groups(holdout, evaluation).items():
        mine: dict[str, list[float]] = defaultdict(list)
        for case in cases:
            env, obs = case.reset()
            last, roots = outsider.play(model, env, obs, case.tier)
            mine["outsider"].append(last.score or 0.0)
            mine["outsider exact"].append(float(roots == case.roots))
            env, obs = case.reset()
            last = play(ExpertAgent(), env, obs)
            mine["expert"].append(last.score or 0.0)
            mine["expert exact"].append(float(declared(last) == case.roots))
        results[group] = mine
        print(
            f"| {group} | {len(cases)} | {_interval(mine['outsider'])} | {_rate(mine['outsider exact'])} "
            f"| {_interval(mine['expert'])} | {_rate(mine['expert exact'])} |"
        )
    return results


# -- pager-only ------------------------------------------------------------------------------------


def _pager_example(obs: Observation, tier: str, roots: frozenset[str]) -> outsider.Example:
    return outsider.Example(tier, {s: outsider.pager_row(obs, s, tier) for s in obs.services}, roots, {}, "", [])


def pager_section(
    train: int, holdout: int, evaluation: int = dataset.EVAL_INCIDENTS
) -> dict[str, tuple[float, float, float]]:
    print(f"\n## Pager-only rankers (first observation; fitted on {train} training seeds per tier)\n")
    examples, logistic_rows = [], []
    for seed in range(train):
        for tier in PRESETS:
            obs = first_observation(f"gen_{tier}", seed)
            roots = frozenset(f.service for f in dataset.training_incident(tier, seed).faults)
            examples.append(_pager_example(obs, tier, roots))
            logistic_rows += [(features(obs, s), s in roots) for s in obs.services]
    boosted = outsider.SetRanker().fit(examples)
    logistic = Ranker()
    logistic.fit(logistic_rows)
    thresholds = ", ".join(f"gen_{t} {boosted.thresholds.get(t, 0.5):.2f}" for t in PRESETS)
    print(f"thresholds tuned on the last quarter of the training seeds: {thresholds}\n")
    print(
        "| group | episodes | gradient-boosted exact roots | logistic (bench_measure) exact roots "
        "| rule: first paged on their paths |"
    )
    print("|---|---|---|---|---|")
    results = {}
    for group, cases in groups(holdout, evaluation).items():
        hits, plain, rule = [], [], []
        for case in cases:
            _, obs = case.reset()
            hits.append(boosted.choose(_pager_example(obs, case.tier, case.roots)) == case.roots)
            plain.append(frozenset(logistic.predict(obs)) == case.roots)
            rule.append(outsider.first_on_their_paths(obs) == case.roots)
        results[group] = (sum(hits) / len(hits), sum(plain) / len(plain), sum(rule) / len(rule))
        print(f"| {group} | {len(cases)} | {_rate(hits)} | {_rate(plain)} | {_rate(rule)} |")
    return results


# -- herring harm ----------------------------------------------------------------------------------


def without_faults(incident: Incident, kept: Sequence[int] | None = None) -> Incident:
    """The incident as data with every fault removed and its red herrings (or only those at `kept`)
    left in place."""
    herrings = incident.distractions if kept is None else [incident.distractions[i] for i in kept]
    return structs.replace(incident, faults=[], distractions=list(herrings))


@dataclass(frozen=True)
class Harm:
    """What a world shows from the page to the end of the budget."""

    graded_impact: bool
    critical_on: frozenset[str]
    # (service, signal) of warnings that began less than an hour before the page.
    acute_on: frozenset[tuple[str, str]]

    @property
    def any(self) -> bool:
        return self.graded_impact or bool(self.critical_on) or bool(self.acute_on)


def harm(incident: Incident, seed: int, steps: int, baseline: Incident | None = None) -> Harm:
    """The rubric above P2 on the user-facing services, critical pages, and warnings that are not
    chronic, from the page through `steps`; with a `baseline` world (the same without its herrings),
    only what differs from it: what the herrings cause, its per-minute noise being the same."""
    world = World(incident, shared=False)
    telemetry = Telemetry(world, seed)
    calm = (World(baseline, shared=False), Telemetry(World(baseline, shared=False), seed)) if baseline else None
    page = parse_time(incident.started_at)
    impact = False
    critical: set[str] = set()
    acute: set[tuple[str, str]] = set()
    for step in range(steps + 1):
        graded = rubric(*world.user_facing_impact(step), False)
        impact |= graded != "P2" and (calm is None or graded != rubric(*calm[0].user_facing_impact(step), False))
        already = {(a.service, a.signal, a.level) for a in calm[1].alerts(step)} if calm else set()
        for alert in telemetry.alerts(step):
            if (alert.service, alert.signal, alert.level) in already:
                continue
            if alert.level == "critical":
                critical.add(alert.service)
            elif (page - parse_time(alert.since)).total_seconds() < STALE_ALERT_S:
                acute.add((alert.service, alert.signal))
    return Harm(impact, frozenset(critical), frozenset(acute))


def harm_section(count: int) -> dict[str, dict[str, float]]:
    print(f"\n## Herring harm ({count} training incidents per tier, every fault removed, herrings kept)\n")
    print(
        "| tier | graded user impact | critical page | warning not chronic | any of them "
        "| any, with no herring either | warnings not chronic, by signal (incidents) "
        "| herring redraws (incidents with any) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    results: dict[str, dict[str, float]] = {}
    alone_rows = []
    for tier in PRESETS:
        steps = GENERATED_BUDGETS[tier]
        found: list[Harm] = []
        calm = 0
        alone: dict[str, list[Harm]] = defaultdict(list)
        own: dict[str, list[str]] = defaultdict(list)
        redraws: list[int] = []
        for seed in range(count):
            # The generator redraws a draw whose herrings break the label principle: counted here.
            drawn = generation(tier, dataset.TRAIN_SEED_BASE + seed, dataset.training_id(tier, seed))
            incident = drawn.incident
            redraws.append(drawn.herring_redraws)
            # What the herrings cause: against the same world without them (its own noise pages too).
            baseline = without_faults(incident, [])
            found.append(harm(without_faults(incident), seed, steps, baseline))
            # The world's own baseline: what neither a fault nor a herring causes.
            calm += harm(baseline, seed, steps).any
            for index, herring in enumerate(incident.distractions):
                alone[herring.kind].append(harm(without_faults(incident, [index]), seed, steps, baseline))
                own[herring.kind].append(herring.service)
        shares = {
            "graded impact": sum(h.graded_impact for h in found) / count,
            "critical page": sum(bool(h.critical_on) for h in found) / count,
            "warning not chronic": sum(bool(h.acute_on) for h in found) / count,
            "any": sum(h.any for h in found) / count,
            "any, no herring": calm / count,
        }
        results[tier] = {**shares, "herring redraws": float(sum(redraws))}
        signals = Counter(signal for h in found for signal in {signal for _, signal in h.acute_on})
        by_signal = ", ".join(f"{signal} {n}" for signal, n in signals.most_common()) or "none"
        redrawn = f"{sum(redraws)} ({sum(1 for r in redraws if r)})"
        print(f"| gen_{tier} | {' | '.join(f'{v:.1%}' for v in shares.values())} | {by_signal} | {redrawn} |")
        for kind in sorted(alone):
            harms, services = alone[kind], own[kind]
            critical = sum(s in h.critical_on for h, s in zip(harms, services, strict=True)) / len(harms)
            acute = sum(any(s == a for a, _ in h.acute_on) for h, s in zip(harms, services, strict=True)) / len(harms)
            impact = sum(h.graded_impact for h in harms) / len(harms)
            results[tier][f"{kind} alone critical on its service"] = critical
            alone_rows.append(f"| gen_{tier} | {kind} | {len(harms)} | {impact:.1%} | {critical:.1%} | {acute:.1%} |")
    print("\nEach red herring alone in the world (no fault, no other herring):\n")
    print("| tier | kind | herrings | graded user impact | critical page on its service | warning not chronic on it |")
    print("|---|---|---|---|---|---|")
    print("\n".join(alone_rows))
    return results


# -- feature ratios --------------------------------------------------------------------------------


def survey(tier: str, seed: int) -> list[tuple[str, bool, dict[str, bool]]]:
    """Every service of a training incident seen as the outsider sees a suspect (entry traces, then its
    logs, metrics and deploys), with the facts its script relies on: (service, is a root, facts)."""
    roots = {f.service for f in dataset.training_incident(tier, seed).faults}
    found = []
    for service in first_observation(f"gen_{tier}", seed).services:
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id=f"gen_{tier}", seed=seed)
        page = obs.clock
        for entry in outsider.entries(obs):
            obs = env.step(InspectTraces(target=entry))
        for action in outsider.LOOKS:
            obs = env.step(action(target=service))
        seen = outsider.facts(obs, service, page)
        flags = {name: seen.flags.get(name, False) for name in outsider.FLAG_NAMES}
        flags |= {f"log: {t}": True for t in outsider.templates(obs, service)}
        found.append((service, service in roots, flags))
    return found


@dataclass
class Tally:
    """How many root services and other services showed each fact, out of how many of each."""

    roots: int = 0
    others: int = 0
    shown: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    # Incidents each log template appeared in, on any service.
    incidents: Counter[str] = field(default_factory=Counter)

    def ratio(self, name: str) -> float:
        on_roots, on_others = self.shown.get(name, (0, 0))
        if not on_others:
            return float("inf") if on_roots else 0.0
        return (on_roots / self.roots) / (on_others / self.others)

    def flagged(self, name: str) -> bool:
        """Whether the fact tells roots from the others, either way (a fact of the others tells as well)."""
        ratio = self.ratio(name)
        return sum(self.shown.get(name, (0, 0))) >= MIN_SUPPORT and (ratio > RATIO_FLAG or ratio < 1 / RATIO_FLAG)


def tally(tier: str, count: int) -> Tally:
    found = Tally()
    for seed in range(count):
        seen: set[str] = set()
        for _, is_root, flags in survey(tier, seed):
            found.roots += is_root
            found.others += not is_root
            for name, on in flags.items():
                if on:
                    found.shown[name][0 if is_root else 1] += 1
                    seen.add(name)
        found.incidents.update(n for n in seen if n.startswith("log: "))
    return found


def ratios_section(count: int, templates_shown: int = 10) -> dict[str, Tally]:
    print(f"\n## Feature ratios ({count} training incidents per tier; root rate over non-root rate)")
    results = {}
    for tier in PRESETS:
        found = results[tier] = tally(tier, count)
        print(f"\n### gen_{tier}: {found.roots} root services, {found.others} others\n")
        print(
            f"| fact | roots | others | ratio | above {RATIO_FLAG:.0f} or below 1/{RATIO_FLAG:.0f} |\n"
            "|---|---|---|---|---|"
        )
        templates = [n for n in found.shown if n.startswith("log: ") and sum(found.shown[n]) >= MIN_SUPPORT]
        templates.sort(key=lambda n: (-found.ratio(n), -sum(found.shown[n]), n))
        # The lines most peculiar to roots, then those most peculiar to the other services.
        others_most = [n for n in reversed(templates) if found.ratio(n) < 1 / RATIO_FLAG][: templates_shown // 2]
        for name in [*outsider.FLAG_NAMES, *templates[:templates_shown], *others_most]:
            on_roots, on_others = found.shown.get(name, (0, 0))
            mark = "yes" if found.flagged(name) else ""
            print(f"| {name} | {on_roots} | {on_others} | {found.ratio(name):.1f} | {mark} |")
        flagged = sum(found.flagged(n) for n in templates)
        everywhere = sum(n >= count / 2 for n in found.incidents.values())
        print(
            f"\nlog templates shown on {MIN_SUPPORT} services or more: {len(templates)}; flagged: "
            f"{flagged}; seen in half the incidents or more: {everywhere}"
        )
    return results


# -- weak roots ------------------------------------------------------------------------------------

# The early history, before any fault or herring began, that an excursion is measured against.
BASELINE_POINTS = 4
# The series a root's own signal shows in, and the floor under each baseline's spread (a flat line's
# excursion is measured in these units; the p99's is a share of its baseline).
SERIES: dict[str, tuple[Callable[[MetricPoint], float], float]] = {
    "error rate": (lambda p: p.error_rate, 0.002),
    "p99": (lambda p: p.p99_ms, 0.02),
    "cpu": (lambda p: p.cpu_pct, 0.5),
    "memory": (lambda p: p.memory_pct, 0.5),
}
RELATIVE_FLOOR = frozenset({"p99"})
# A margin of this many standard deviations is one an engineer would not put down to noise.
CLEAR_MARGIN = 3.0


def excursion(values: Sequence[float], floor: float) -> float:
    """The largest rise after the baseline, in baseline standard deviations (at least `floor`)."""
    base, rest = values[:BASELINE_POINTS], values[BASELINE_POINTS:]
    spread = max(statistics.pstdev(base), floor)
    return (max(rest) - statistics.mean(base)) / spread


def excursions(telemetry: Telemetry, service: str, step: int) -> dict[str, float]:
    """A service's excursion in each series of its metrics' history."""
    history = telemetry.metrics(service, step).history
    found = {}
    for name, (value, floor) in SERIES.items():
        values = [value(p) for p in history]
        scale = statistics.mean(values[:BASELINE_POINTS]) if name in RELATIVE_FLOOR else 1.0
        found[name] = excursion(values, floor * scale)
    return found


def margins(incident: Incident, seed: int, step: int = 1) -> list[dict[str, float]]:
    """Per root, per series: its own excursion less the largest of the other services' in the same
    incident without faults (their everyday excursions, red herrings included)."""
    sick = Telemetry(World(incident, shared=False), seed)
    calm = Telemetry(World(without_faults(incident), shared=False), seed)
    roots = {f.service for f in incident.faults}
    others = [excursions(calm, s.name, step) for s in incident.services if s.name not in roots]
    worst = {name: max((o[name] for o in others), default=0.0) for name in SERIES}
    return [{name: own - worst[name] for name, own in excursions(sick, root, step).items()} for root in sorted(roots)]


def _quantiles(values: Sequence[float]) -> list[float]:
    ordered = sorted(values)
    return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in QUANTILES]


def weak_section(count: int) -> dict[str, list[float]]:
    print(f"\n## Weak roots ({count} training incidents per tier; excursions in baseline standard deviations)\n")
    print(
        "margin: the root's best series (error rate, p99, CPU, memory) less the other services' largest "
        "everyday excursion in that series\n"
    )
    heads = " | ".join(f"q{int(q * 100)}" for q in QUANTILES)
    medians = " | ".join(f"{name} margin q50" for name in SERIES)
    print(f"| tier | roots | margin {heads} | at or below 0 | below {CLEAR_MARGIN:.0f} | {medians} |")
    print("|---|---|" + "---|" * (len(QUANTILES) + 2 + len(SERIES)))
    results = {}
    for tier in PRESETS:
        found = [m for seed in range(count) for m in margins(dataset.training_incident(tier, seed), seed)]
        best = [max(m.values()) for m in found]
        results[tier] = best
        shown = " | ".join(f"{v:.1f}" for v in _quantiles(best))
        below = sum(v <= 0 for v in best) / len(best)
        unclear = sum(v < CLEAR_MARGIN for v in best) / len(best)
        each = " | ".join(f"{statistics.median(m[name] for m in found):.1f}" for name in SERIES)
        print(f"| gen_{tier} | {len(best)} | {shown} | {below:.1%} | {unclear:.1%} | {each} |")
    return results


# -- oracle ceiling --------------------------------------------------------------------------------


def _run(case: Case, actions: Sequence[Action]) -> Observation:
    env, obs = case.reset()
    for action in actions:
        if obs.done:
            break
        obs = env.step(action)
    return obs


def oracle(case: Case) -> Observation:
    """The best-scoring of the shortest plans that use the answers: a look that shows each root's fault
    (its metrics, or one trace view from a user-facing service), each root's fix, and the answer with
    the severity the grader will apply; among equal scores, the fewest steps."""
    labels = dataset.labels(case.incident)
    roots = sorted(case.roots)
    fixes = dict(zip([f.service for f in case.incident.faults], labels.fixes, strict=True))
    remedies = [outsider.remedy(fixes[r], r) for r in roots]
    facing = [s.name for s in case.incident.services if s.user_facing]
    looks: list[list[Action]] = [[], [InspectMetrics(target=r) for r in roots]]
    looks += [[InspectTraces(target=s)] for s in facing]

    def answered(plan: list[Action], severity: str) -> Observation:
        declare = Declare(target=roots[0], additional_targets=roots[1:], severity=severity)
        return _run(case, [*plan, *remedies, declare])

    best: Observation | None = None
    for plan in looks:
        first = answered(plan, labels.peak_severity)
        graded = first.postmortem.severity if first.postmortem else None
        last = answered(plan, graded) if graded and graded != labels.peak_severity else first
        unseen = [r.service for r in last.postmortem.root_causes if not r.seen] if last.postmortem else []
        if plan and unseen and isinstance(plan[0], InspectTraces):
            plan = [*plan, *(InspectMetrics(target=r) for r in unseen)]
            last = answered(plan, graded or labels.peak_severity)
        if best is None or (last.score or 0.0, -last.step_count) > (best.score or 0.0, -best.step_count):
            best = last
    assert best is not None
    return best


def oracle_section(evaluation: int = dataset.EVAL_INCIDENTS) -> dict[str, tuple[list[float], list[float]]]:
    print("\n## Oracle ceiling (evaluation set; the answers read, the fewest steps to the best score)\n")
    print("| tier | episodes | oracle score | oracle steps (mean) | expert score |\n|---|---|---|---|---|")
    results = {}
    for tier in PRESETS:
        best, expert, steps = [], [], []
        for case in evaluation_cases(tier, evaluation):
            last = oracle(case)
            best.append(last.score or 0.0)
            steps.append(last.step_count)
            env, obs = case.reset()
            expert.append(play(ExpertAgent(), env, obs).score or 0.0)
        results[tier] = (best, expert)
        print(f"| gen_{tier} | {len(best)} | {_interval(best)} | {statistics.mean(steps):.1f} | {_interval(expert)} |")
    return results


# -- the ladder ------------------------------------------------------------------------------------


def ladder_section(
    train: int, holdout: int, evaluation: int = dataset.EVAL_INCIDENTS
) -> dict[str, dict[str, list[float]]]:
    """Scores per group for every reference agent, the outsider's script and the oracle."""
    print(f"\n## Ladder (mean score, 95% interval; the outsider fitted on {train} training seeds per tier)\n")
    model = outsider.fit(train)
    names = [*AGENTS, "outsider", "oracle"]
    print(f"| group | episodes | {' | '.join(names)} |")
    print("|---" * (2 + len(names)) + "|")
    results: dict[str, dict[str, list[float]]] = {}
    for group, cases in groups(holdout, evaluation).items():
        scores: dict[str, list[float]] = defaultdict(list)
        for case in cases:
            for name, make in AGENTS.items():
                env, obs = case.reset()
                scores[name].append(play(make(case.seed), env, obs).score or 0.0)
            env, obs = case.reset()
            scores["outsider"].append(outsider.play(model, env, obs, case.tier)[0].score or 0.0)
            scores["oracle"].append(oracle(case).score or 0.0)
        results[group] = scores
        print(f"| {group} | {len(cases)} | {' | '.join(_interval(scores[n]) for n in names)} |")
    return results


# Each section, run from the command line's settings, in the order they print.
SECTIONS: dict[str, Callable[[argparse.Namespace], object]] = {
    "outsider": lambda a: outsider_section(a.train, a.holdout, a.evaluation),
    "pager": lambda a: pager_section(a.train, a.holdout, a.evaluation),
    "harm": lambda a: harm_section(a.incidents),
    "ratios": lambda a: ratios_section(a.incidents),
    "weak": lambda a: weak_section(a.incidents),
    "oracle": lambda a: oracle_section(a.evaluation),
    "ladder": lambda a: ladder_section(a.train, a.holdout, a.evaluation),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=300, help="training seeds per tier the fitted players learn from")
    parser.add_argument("--incidents", type=int, default=300, help="training incidents per tier for harm, ratios, weak")
    parser.add_argument("--holdout", type=int, default=50, help="held-out incidents per held-out tier")
    parser.add_argument(
        "--evaluation", type=int, default=dataset.EVAL_INCIDENTS, help="evaluation incidents per generated tier"
    )
    parser.add_argument("--only", nargs="*", choices=list(SECTIONS), default=list(SECTIONS))
    args = parser.parse_args()
    for name, run in SECTIONS.items():
        if name in args.only:
            run(args)


if __name__ == "__main__":
    main()
