"""The typed schema of everything the environment exchanges: actions, observations, state.

msgspec Structs are the schema, the validation and the JSON encoding in one place; the JSON Schemas
served to clients are generated from these classes.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta, Struct

from .aliases import translate

Severity = Literal["P0", "P1", "P2"]
ServiceName = Annotated[str, Meta(min_length=1, max_length=64)]
Rationale = Annotated[str, Meta(max_length=2000)]
# An endpoint in route form (`POST /v1/charges`, `GET /v1/orders/{id}`), as a view's breakdown lists it.
Endpoint = Annotated[str, Meta(min_length=1, max_length=128)]


ActionKind = Literal["inspect", "remedy", "answer"]
# The observation's field of each view is this prefix and the view's name (`visible_logs`, `visible_db`).
VIEW_FIELD_PREFIX = "visible_"


class _ActionBase(Struct, tag_field="action", forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Every action may carry a free-text rationale; it is recorded, never parsed for keywords.

    `metadata` is accepted because OpenEnv's pydantic actions always send it; it is ignored.
    Each action type states its own metadata: `kind` (inspect, remedy or answer) and, for an
    inspection, the `view` it reads; its docstring's first line is its description.
    """

    kind: ClassVar[ActionKind]
    view: ClassVar[str | None] = None
    rationale: Rationale | None = None
    metadata: dict[str, Any] = {}


class InspectLogs(_ActionBase, tag="inspect_logs", frozen=True):
    """Read the last two minutes of log lines from a service's pods."""

    kind = "inspect"
    view = "logs"
    target: ServiceName


# The breakdown's rows `errors_only` keeps: those failing at least this share of their work.
ERRORS_ONLY_FLOOR = 0.01


class InspectMetrics(_ActionBase, tag="inspect_metrics", frozen=True):
    """Read a service's golden signals (p50/p99 latency, error rate, rate, CPU, memory), history and endpoints."""

    kind = "inspect"
    view = "metrics"
    target: ServiceName
    # A filter that keeps the view short: one row of its per-endpoint breakdown, or its failing rows.
    endpoint: Annotated[str, Meta(max_length=128)] | None = None
    errors_only: bool = False


class CheckHealth(_ActionBase, tag="check_health", frozen=True):
    """Ask the orchestrator for a service's pods, restarts, termination reasons, events and probe."""

    kind = "inspect"
    view = "health"
    target: ServiceName


class InspectDeploys(_ActionBase, tag="inspect_deploys", frozen=True):
    """List a service's recent releases and configuration changes."""

    kind = "inspect"
    view = "deploys"
    target: ServiceName


class RunDbQuery(_ActionBase, tag="run_db_query", frozen=True):
    """Read a datastore's diagnostics: a database's sessions, locks, statements; a queue's lag; a cache's INFO.

    A database shows the session holding the locks others wait on (pid, client, statement, how long), slow
    statements, disk and replication; a queue its consumer lag, in-sync replicas, disk and rejected writes;
    a cache its replication, memory and evictions, hit ratio, clients and uptime.
    """

    kind = "inspect"
    view = "db"
    target: ServiceName


class InspectTraces(_ActionBase, tag="inspect_traces", frozen=True):
    """Read sampled requests through a service: per endpoint (requests, failed, p99), and spans with their status."""

    kind = "inspect"
    view = "traces"
    target: ServiceName
    endpoint: Endpoint | None = None
    errors_only: bool = False


class Restart(_ActionBase, tag="restart", frozen=True):
    """Replace a service's pods (a rollout restart)."""

    kind = "remedy"
    target: ServiceName


class Rollback(_ActionBase, tag="rollback", frozen=True):
    """Roll a service back to its previous release or configuration (a canary included)."""

    kind = "remedy"
    target: ServiceName


class ScaleUp(_ActionBase, tag="scale_up", frozen=True):
    """Double a service's replicas and resources."""

    kind = "remedy"
    target: ServiceName


class Escalate(_ActionBase, tag="escalate", frozen=True):
    """Page the provider or partner a service relies on: acknowledged now, they act a step later on what they own.

    What a provider owns is its quota and its outage; nothing else changes (a service's own certificate
    is renewed, not escalated).
    """

    kind = "remedy"
    target: ServiceName


class Failover(_ActionBase, tag="failover", frozen=True):
    """Promote a datastore's replica to primary."""

    kind = "remedy"
    target: ServiceName


class ExpandVolume(_ActionBase, tag="expand_volume", frozen=True):
    """Grow a service's data volume online."""

    kind = "remedy"
    target: ServiceName


class RenewCertificate(_ActionBase, tag="renew_certificate", frozen=True):
    """Issue and load a fresh TLS certificate for a service."""

    kind = "remedy"
    target: ServiceName


class ShedLoad(_ActionBase, tag="shed_load", frozen=True):
    """Turn on admission control at a service: requests beyond its usual rate are answered 429."""

    kind = "remedy"
    target: ServiceName


class TerminateBlocker(_ActionBase, tag="terminate_blocker", frozen=True):
    """On a database (the target), end the session its diagnostics show holding the row locks others wait on."""

    kind = "remedy"
    target: ServiceName


class ResyncClock(_ActionBase, tag="resync_clock", frozen=True):
    """Point the nodes a service runs on at a working time source and step their clocks into sync."""

    kind = "remedy"
    target: ServiceName


class Declare(_ActionBase, tag="declare", frozen=True):
    """Name the root-cause service(s) and the incident severity."""

    kind = "answer"
    target: ServiceName
    severity: Severity
    additional_targets: Annotated[list[ServiceName], Meta(max_length=16)] = []


class DeclareRootCauses(_ActionBase, tag="declare_rca", frozen=True):
    """Name the root-cause services, for tasks that do not grade severity."""

    kind = "answer"
    targets: Annotated[list[ServiceName], Meta(min_length=1, max_length=16)]


class Resolve(_ActionBase, tag="resolve", frozen=True):
    """Close the incident as mitigated; checked against the world, not taken on trust."""

    kind = "answer"
    target: ServiceName | None = None


Action = (
    InspectLogs
    | InspectMetrics
    | CheckHealth
    | InspectDeploys
    | RunDbQuery
    | InspectTraces
    | Restart
    | Rollback
    | ScaleUp
    | Escalate
    | Failover
    | ExpandVolume
    | RenewCertificate
    | ShedLoad
    | TerminateBlocker
    | ResyncClock
    | Declare
    | DeclareRootCauses
    | Resolve
)
ACTION_TYPES: tuple[type[_ActionBase], ...] = typing.get_args(Action)
ACTION_NAMES: tuple[str, ...] = tuple(str(cls.__struct_config__.tag) for cls in ACTION_TYPES)
INSPECTIONS: tuple[type[_ActionBase], ...] = tuple(t for t in ACTION_TYPES if t.kind == "inspect")
REMEDIATIONS: tuple[type[_ActionBase], ...] = tuple(t for t in ACTION_TYPES if t.kind == "remedy")
ACTIONS_BY_NAME: dict[str, type[_ActionBase]] = dict(zip(ACTION_NAMES, ACTION_TYPES, strict=True))


def action_name(action: Action | type[_ActionBase]) -> str:
    return str(action.__struct_config__.tag)


def describe(action_type: type[_ActionBase]) -> str:
    """An action's description: the first line of its docstring."""
    return (action_type.__doc__ or "").strip().splitlines()[0]


# The views' parts below (points, breakdown rows, metrics, cards, alerts, history rows) are not tracked
# by the garbage collector: they hold strings, numbers and lists of each other, so no cycle runs through
# them, and a server holds hundreds of them per session while a client decodes them on every step.
class MetricPoint(Struct, frozen=True, gc=False):
    """One minute of a service's golden signals."""

    at: str  # HH:MM, UTC
    p99_ms: float
    error_rate: float
    rps: float
    cpu_pct: float
    memory_pct: float


class EndpointMetrics(Struct, frozen=True, gc=False):
    """One row of a service's per-endpoint breakdown now: a request endpoint in route form, or a
    background job no request waits on (its runs per second, the share that fail, their p99)."""

    endpoint: str
    work: Literal["request", "job"]
    rps: float
    error_rate: float
    p99_ms: float


class Metrics(Struct, frozen=True, gc=False):
    """Golden signals of one service now (its requests'; its background jobs are rows of their own in
    the breakdown), and minute by minute since before the page."""

    p50_ms: float
    p99_ms: float
    error_rate: float
    rps: float
    cpu_pct: float
    memory_pct: float
    history: list[MetricPoint] = []
    endpoints: list[EndpointMetrics] = []

    @property
    def latency_ms(self) -> float:
        """The latency the rubric and the pages speak of: p99."""
        return self.p99_ms


class ServiceCard(Struct, frozen=True, gc=False):
    """What the on-call engineer knows about a service before looking at it: the architecture."""

    name: str
    kind: str
    depends_on: list[str]
    user_facing: bool


class Alert(Struct, frozen=True, kw_only=True, gc=False):
    """A page as the pager shows it: a symptom on a service, never a diagnosis.

    An alert that fired earlier in the episode stays listed once it clears, as `resolved`, so the
    worst impact users saw (`peak`) is never lost.
    """

    service: str
    signal: Literal["http_5xx_ratio", "p99_latency_ms", "cpu_pct", "memory_pct", "disk_pct"]
    level: Literal["critical", "warning"]
    status: Literal["firing", "resolved"]
    value: float
    peak: float
    summary: str
    since: str


class ActionRecord(Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One action taken, as the history lists it: what was done to what, never how it turned out."""

    step: int
    action: str
    target: str | None = None
    targets: list[str] = []
    severity: Severity | None = None
    refused: bool = False


class RootCause(Struct, frozen=True, kw_only=True):
    service: str
    fault: str
    fixes: list[str]
    seen: bool  # whether any view showed its fault
    named: bool  # whether the answer named it
    fixed: bool  # whether its fix was in effect at the end
    # The score it earned, by part of the breakdown earned root by root (root_cause, evidence, remediation).
    credited: dict[str, float]


class Postmortem(Struct, frozen=True, kw_only=True):
    """The truth of an episode and what each part of the score missed, shown when it ends."""

    root_causes: list[RootCause]
    declared: list[str]
    severity: Severity | None
    severity_basis: str
    declared_severity: Severity | None
    remedies: list[str]
    red_herrings: list[str]
    missed: dict[str, str]


class Observation(Struct, kw_only=True, omit_defaults=False):
    """What the agent sees after reset and after every step."""

    task_id: str
    incident_id: str
    title: str
    services: list[str]
    topology: list[ServiceCard]
    alerts: list[Alert]
    visible_logs: dict[str, str]
    visible_metrics: dict[str, Metrics]
    visible_health: dict[str, str] = {}
    visible_deploys: dict[str, str] = {}
    visible_db: dict[str, str] = {}
    visible_traces: dict[str, str] = {}
    # The minute (HH:MM, UTC) each view shown was taken, by view (`logs`, `metrics`, ..., the `visible_`
    # field's suffix) and service: a view from an earlier step keeps its minute, so it never reads as current.
    as_of: dict[str, dict[str, str]] = {}
    # Every service's golden signals at a glance (values, no verdict), in tasks that show a dashboard.
    dashboard: dict[str, str] = {}
    step_count: int
    max_steps: int
    clock: str
    sla_minutes_left: int = 0
    message: str
    available_actions: list[str] = []
    terminal_actions: list[str] = []
    last_diagnostic: str | None = None
    action_history: list[ActionRecord] = []
    last_action_error: str | None = None
    score: float | None = None
    breakdown: dict[str, float] | None = None
    done: bool = False
    reward: float | None = None
    # What happened, told once the episode is over (None before).
    postmortem: Postmortem | None = None
    metadata: dict[str, Any] = {}

    def taken(self, field: str, service: str) -> str | None:
        """When the view a `visible_<view>` field shows of a service was taken (HH:MM), if it shows one."""
        return self.as_of.get(field.removeprefix(VIEW_FIELD_PREFIX), {}).get(service)


class State(Struct, kw_only=True):
    """Episode bookkeeping; carries no part of the answer."""

    episode_id: str | None = None
    step_count: int = 0
    task_id: str | None = None
    incident_id: str | None = None
    seed: int | None = None
    done: bool = False


RewardMode = Literal["final", "dense"]


# The longest episode id, as OpenEnv bounds it.
MAX_EPISODE_ID_CHARS = 255


class ResetRequest(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Arguments of `reset`, for every caller (environment, wire, HTTP, client, evaluation).

    A misspelt key is an error rather than silently ignored. `reward_mode` "final" pays nothing until
    the last step, which carries the whole return (evaluation); "dense" adds per-step shaping (training).
    """

    task_id: str | None = None
    seed: int | None = None
    incident_id: str | None = None
    episode_id: Annotated[str, Meta(min_length=1, max_length=MAX_EPISODE_ID_CHARS)] | None = None
    reward_mode: RewardMode = "final"


class InvalidAction(ValueError):
    """An action that does not match the schema; the message says what is wrong and where."""


class InvalidReset(ValueError):
    """Reset arguments that name no task or incident, or a seed out of range."""


_action_decoder = msgspec.json.Decoder(Action)


def parse_action(payload: Any) -> Action:
    """Validate a decoded JSON object (or raw JSON bytes/str) into a typed action.

    Objects in the legacy vocabularies of the root-cause and response systems (keyed by `action_type`)
    are translated first.
    """
    try:
        if isinstance(payload, bytes | str):
            try:
                return _action_decoder.decode(payload)
            except msgspec.ValidationError:
                payload = msgspec.json.decode(payload)
                if not (isinstance(payload, dict) and "action_type" in payload):
                    raise
        if isinstance(payload, dict):
            # Clients built on one model for every action send the fields an action lacks as null.
            payload = {key: value for key, value in payload.items() if value is not None}
            if "action_type" in payload and "action" not in payload:
                payload = translate(payload)
        return msgspec.convert(payload, Action)
    except msgspec.ValidationError as exc:
        raise InvalidAction(_explain(exc, payload)) from None
    except msgspec.DecodeError as exc:
        raise InvalidAction(f"action is not valid JSON: {exc}") from None


def _explain(exc: msgspec.ValidationError, payload: Any) -> str:
    text = str(exc)
    if "field `action`" in text or "`$.action`" in text:
        return f"{text}; `action` must be one of: {', '.join(ACTION_NAMES)}"
    return text


def schemas() -> dict[str, Any]:
    """JSON Schemas of the action union, the observation and the state."""
    return {
        "action": msgspec.json.schema(Action),
        "observation": msgspec.json.schema(Observation),
        "state": msgspec.json.schema(State),
    }
