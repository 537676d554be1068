"""The fitted reference agent: an investigator whose judgments are gradient-boosted models fitted on
training play (`python -m service_incident.harness.fitted build`), evaluated in pure Python.

It localizes with traces from the paged entry points, surveys the suspects the traces and pages
point at (their logs and metrics, a database's diagnostics, an application's deploys), then ranks
every service with the model and declares each one above its tier's threshold, fixes each with the
fix the views suggest when that is worth its risk, and declares the severity the model reads from the
pages and the user-facing metrics. It reads observations only. Tasks that are not generated tiers
(no model is fitted for them) are played by `expert`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ...faults import DATASTORE_KINDS
from ...generator import PRESETS
from ...models import (
    ACTIONS_BY_NAME,
    Action,
    Declare,
    DeclareRootCauses,
    InspectDeploys,
    InspectLogs,
    InspectMetrics,
    InspectTraces,
    Observation,
    RunDbQuery,
)
from ..agents import ExpertAgent, trace_origins
from .features import TIERS, incident_row, service_rows
from .model import Model, load

# Traces are taken at this many paged user-facing services, or at as many as the tier has entry points.
ENTRY_TRACES = 2
# Suspects surveyed per tier, and how many applications among them get a deploy look.
SUSPECTS = {"easy": 2, "medium": 2, "hard": 3, "expert": 4}
DEPLOY_LOOKS = 2
# What a fix earns when right (the remediation weight, shared among the roots) and what a remedy
# that does no good costs (the waste penalty): a fix is tried when its expected gain is positive.
FIX_WEIGHT = 0.2
WASTED_REMEDY = 0.05


def tier_of(task_id: str) -> str | None:
    """The generated tier a task plays (gen_hard and holdout_hard are both `hard`), else None."""
    prefix, _, tier = task_id.partition("_")
    return tier if prefix in ("gen", "holdout") and tier in TIERS else None


def entries(obs: Observation, tier: str) -> list[str]:
    """The user-facing services paged first (all user-facing ones when none is)."""
    facing = [c.name for c in obs.topology if c.user_facing]
    paged = [a.service for a in obs.alerts if a.service in facing]
    return list(dict.fromkeys(paged or facing))[: max(ENTRY_TRACES, PRESETS[tier].entry_points)]


def suspects(obs: Observation, tier: str) -> list[str]:
    """Where trouble seems to start: trace origins, then paged internal services, then memory pages,
    then the paged entry points themselves."""
    origins: Counter[str] = Counter()
    for text in obs.visible_traces.values():
        origins.update(trace_origins(text))
    facing = {c.name for c in obs.topology if c.user_facing}
    paged = [a.service for a in obs.alerts if a.service not in facing and a.signal != "disk_pct"]
    memory = [a.service for a in obs.alerts if a.signal == "memory_pct"]
    ranked = [s for s, _ in origins.most_common()] + paged + memory + entries(obs, tier)
    return list(dict.fromkeys(ranked))[: SUSPECTS[tier]]


Look = InspectTraces | InspectLogs | InspectMetrics | RunDbQuery | InspectDeploys


def survey(obs: Observation, tier: str) -> list[Look]:
    """The looks of the investigation, in order, given what has been seen so far."""
    kinds = {c.name: c.kind for c in obs.topology}
    looks: list[Look] = [InspectTraces(target=entry) for entry in entries(obs, tier)]
    ranked = suspects(obs, tier)
    for suspect in ranked:
        if suspect not in obs.visible_logs:
            looks.append(InspectLogs(target=suspect))
        looks.append(InspectMetrics(target=suspect))
    looks += [RunDbQuery(target=s) for s in ranked if kinds[s] == "database"]
    looks += [InspectDeploys(target=s) for s in [s for s in ranked if kinds[s] not in DATASTORE_KINDS][:DEPLOY_LOOKS]]
    return looks


def reserve(tier: str) -> int:
    """Steps kept for the fixes and the answer: one per root the tier may have, and one."""
    return PRESETS[tier].faults[1] + 1


def next_look(obs: Observation, tier: str) -> Look | None:
    """The survey's next look not taken yet, or None when the survey is over or out of budget."""
    if obs.step_count >= obs.max_steps - reserve(tier):
        return None
    taken = {(r.action, r.target) for r in obs.action_history}
    available = set(obs.available_actions)
    for look in survey(obs, tier):
        name = look.__struct_config__.tag
        if name in available and (name, look.target) not in taken:
            return look
    return None


@dataclass(frozen=True)
class Decision:
    """What the model concluded at the end of the survey."""

    roots: list[str]
    fixes: dict[str, str]
    severity: str


def decide(model: Model, obs: Observation, tier: str) -> Decision:
    rows = service_rows(obs, tier, model.vocabulary)
    p_root = {s: model.root.probabilities(row)["True"] for s, row in rows.items()}
    ranked = sorted(obs.services, key=lambda s: -p_root[s])
    cut = model.thresholds.get(tier, 0.5)
    roots = [s for s in ranked if p_root[s] >= cut][: model.max_roots.get(tier, 1)] or ranked[:1]
    fixes = {}
    for root in roots:
        chances = model.fix.probabilities(rows[root])
        fix = max(chances, key=lambda f: chances[f])
        right = p_root[root] * chances[fix]
        # A remedy that does no good costs the waste penalty; one that works earns the root's share.
        if fix in obs.available_actions and right * FIX_WEIGHT / len(roots) > (1 - right) * WASTED_REMEDY:
            fixes[root] = fix
    return Decision(sorted(roots), fixes, model.severity.predict(incident_row(obs, tier)))


class FittedAgent:
    """Surveys, ranks with the fitted model, fixes, declares; `expert` outside the generated tiers."""

    name = "fitted"

    def __init__(self, model: Model | None = None) -> None:
        self._model = model
        self._expert = ExpertAgent()
        self._decision: tuple[str, Decision] | None = None

    def act(self, observation: Observation) -> Action:
        obs = observation
        tier = tier_of(obs.task_id)
        if tier is None or "inspect_traces" not in obs.available_actions:
            return self._expert.act(obs)
        if obs.step_count == 0:
            self._decision = None
        look = next_look(obs, tier)
        if look is not None and self._decision is None:
            return look
        decision = self._decide(obs, tier)
        fixed = {r.target for r in obs.action_history if ACTIONS_BY_NAME[r.action].kind == "remedy"}
        for root in decision.roots:
            fix = decision.fixes.get(root)
            if fix and root not in fixed and obs.max_steps - obs.step_count > 1:
                return ACTIONS_BY_NAME[fix](target=root, rationale=f"{root}: the views point at {fix}")  # type: ignore[call-arg, return-value]
        if "declare" not in obs.available_actions:
            return DeclareRootCauses(targets=decision.roots)
        return Declare(
            target=decision.roots[0],
            additional_targets=decision.roots[1:],
            severity=decision.severity,  # type: ignore[arg-type]
            rationale=f"{', '.join(decision.roots)}: ranked first by the evidence surveyed",
        )

    def _decide(self, obs: Observation, tier: str) -> Decision:
        # Decided once, at the end of the survey: later observations show the fixes, not the fault.
        if self._decision is None or self._decision[0] != obs.incident_id:
            self._model = self._model or load()
            self._decision = (obs.incident_id, decide(self._model, obs, tier))
        return self._decision[1]
