"""Procedural incidents: (difficulty or explicit knobs, seed) -> an Incident like the curated ones.

Everything is drawn from one `random.Random(seed)`, so a seed names an incident forever. Draws that
would make a label hard to recover (user-facing impact on the edge of a severity band, nobody
paged) are rejected and redrawn from the same stream, so every generated label is recoverable from
what the agent can observe.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from msgspec import Struct, structs

from .faults import FAULTS
from .herrings import HERRINGS, HerringType, in_background
from .incidents import Distraction, FaultSpec, Incident, LogGap, ServiceSpec, validate
from .models import Severity
from .telemetry import ALERT_RULES, fired
from .topology import KINDS
from .world import (
    HISTORY_MINUTES,
    P0_ERROR_RATE,
    P0_LATENCY_MS,
    P1_ERROR_RATE,
    P1_LATENCY_MS,
    SEVERITIES,
    ServiceState,
    World,
    pre_incident,
    rubric,
)
from .world.standout import Everyday, stands_out

# name, kind: the catalogue topologies are drawn from (the gateway is always an entry point).
APPS: tuple[tuple[str, str], ...] = (
    ("web", "web"),
    ("auth", "auth"),
    ("payments", "payments"),
    ("orders", "orders"),
    ("checkout", "checkout"),
    ("inventory", "inventory"),
    ("search", "search"),
    ("notifications", "notifications"),
    ("shipping", "app"),
    ("recommendations", "app"),
)
STORES: tuple[tuple[str, str], ...] = (
    ("db", "database"),
    ("cache", "cache"),
    ("queue", "queue"),
    ("orders-db", "database"),
    ("session-cache", "cache"),
)
MIN_SERVICES, MAX_SERVICES = 3, 15
# The entry points besides the gateway that hard topologies draw from.
MOBILE_API = "mobile-api"
QUEUE_CONSUMER = "event-consumer"
# A caller's failures to a dependency below this share of its requests are too rare to trace.
MIN_BLAMED_SHARE = 0.01
# Impact this close to a severity threshold is redrawn: the label must not hinge on noise.
ERROR_MARGIN = 0.01
LATENCY_MARGIN_MS = 100.0
# What a fault must move by itself, at the page, for an engineer to see it (beyond per-minute noise of
# a few percent): an error rate, a p99, CPU or memory, or request rate on its service or a caller, or a page.
OWN_ERROR = 0.02
OWN_LATENCY = 1.5
OWN_RATE = 1.2
OWN_POINTS = 10.0
MAX_DRAWS = 200
# Steps after the page a red herring's world is checked over when a signal is near a threshold: every
# generated task's step budget is within it (a test says so). A signal under NEAR of a threshold at the
# page stays clear of it whatever the per-minute noise: a few percent on latency and CPU, up to double
# on a small error rate.
HERRING_HORIZON = 20
NEAR = 0.8
NEAR_ERROR = 0.45
SETTLE_AFTER = 4
DRAWS_PER_TOPOLOGY = 3
INTENSITY_TRIES = 3
# The fault types each kind of service can host that a red herring's minor fault can be (`in_background`),
# in FAULTS' order.
_HOSTED_IN_BACKGROUND: Mapping[str, tuple[str, ...]] = {
    kind: tuple(name for name, fault in FAULTS.items() if kind in fault.kinds and in_background(fault))
    for kind in KINDS
}


class Knobs(Struct, frozen=True, forbid_unknown_fields=True):
    """What shapes a generated incident; a difficulty is a preset of these."""

    services: tuple[int, int]
    # How many faults an incident has, drawn in this range (the count is not published).
    faults: tuple[int, int] = (1, 1)
    intensity: tuple[float, float] = (0.8, 1.0)
    red_herrings: int = 0
    metrics_lag: int = 0
    log_gaps: int = 0
    intensify: bool = False
    fault_types: tuple[str, ...] = ()
    # How many entry points the topology has: the gateway, then a mobile API or a queue's consumer.
    entry_points: int = 1
    # The chance that a fault is drawn among the services behind the user-facing ones (datastores,
    # internal apps), where its type can land there: such a fault reaches users only through its
    # callers, so the pages show where users hurt and only an investigation shows where it began.
    deep_faults: float = 0.0


PRESETS: Mapping[str, Knobs] = {
    "easy": Knobs(services=(3, 5), intensity=(0.05, 1.0)),
    "medium": Knobs(services=(5, 8), intensity=(0.05, 0.9), red_herrings=2, intensify=True),
    "hard": Knobs(
        services=(8, 12),
        faults=(1, 2),
        intensity=(0.05, 0.7),
        red_herrings=3,
        metrics_lag=1,
        log_gaps=2,
        intensify=True,
        entry_points=2,
        deep_faults=0.5,
    ),
    "expert": Knobs(
        services=(10, 15),
        faults=(2, 3),
        intensity=(0.05, 0.7),
        red_herrings=5,
        metrics_lag=1,
        log_gaps=3,
        intensify=True,
        entry_points=3,
        deep_faults=0.75,
    ),
}


class Generation(Struct, frozen=True):
    """A generated incident, and how many draws were redrawn because their red herrings broke the label
    principle (`harmless_herrings`)."""

    incident: Incident
    herring_redraws: int


def generate(knobs: Knobs | str, seed: int, incident_id: str | None = None) -> Incident:
    """A well-formed incident whose labels are recoverable from its telemetry."""
    return generation(knobs, seed, incident_id).incident


def generation(knobs: Knobs | str, seed: int, incident_id: str | None = None) -> Generation:
    """`generate`'s incident, with the count of draws its red herrings made it redraw."""
    preset = PRESETS[knobs] if isinstance(knobs, str) else knobs
    rng = random.Random(f"incident:{seed}")
    name = incident_id or f"{knobs if isinstance(knobs, str) else 'custom'}-{seed}"
    # Aim at a severity so that labels spread over the rubric; settle for any recoverable one.
    wanted = rng.choice(SEVERITIES)
    services: list[ServiceSpec] = []
    redraws = 0
    for attempt in range(MAX_DRAWS):
        # A topology serves a few draws of faults before a new one is drawn: most rejections are
        # about where the faults landed and how hard they hit, not about the wiring.
        if attempt % DRAWS_PER_TOPOLOGY == 0:
            services = _topology(rng, rng.randint(*preset.services), preset.entry_points)
        incident = _draw(preset, rng, name, wanted, services, settle=attempt >= SETTLE_AFTER)
        if isinstance(incident, Incident):
            return Generation(validate(incident), redraws)
        redraws += incident == _HARMFUL
    raise ValueError(f"no recoverable incident for these knobs after {MAX_DRAWS} draws (seed {seed})")


# Why a draw was redrawn: its labels were not recoverable, or its red herrings broke the label principle.
_UNRECOVERABLE, _HARMFUL = "unrecoverable", "harmful herrings"


def _draw(
    knobs: Knobs, rng: random.Random, incident_id: str, wanted: str, services: list[ServiceSpec], settle: bool
) -> Incident | str:
    names = [s.name for s in services]
    kinds = {s.name: s.kind for s in services}
    calls = {s.name: [kinds[d] for d in s.depends_on] for s in services}
    facing = {s.name for s in services if s.user_facing}
    types = list(knobs.fault_types or FAULTS)
    faults: list[FaultSpec] = []
    for _ in range(_fault_count(rng, knobs.faults)):
        fault_type = rng.choice(types)
        taken = {f.service for f in faults}
        hosts = [n for n in names if FAULTS[fault_type].hosts(kinds[n], calls[n]) and n not in taken]
        if wanted == "P2":
            # Minor incidents live where callers lean on a service lightly (queues, caches, async work).
            hosts = [n for n in hosts if KINDS[kinds[n]].caller_weight < 1.0] or hosts
        if knobs.deep_faults and rng.random() < knobs.deep_faults:
            hosts = [n for n in hosts if n not in facing] or hosts
        if not hosts:
            return _UNRECOVERABLE
        intensify_at = rng.randint(2, 4) if knobs.intensify and rng.random() < 0.5 else None
        faults.append(FaultSpec(service=rng.choice(hosts), type=fault_type, intensify_at=intensify_at))
    roots = {f.service for f in faults}
    gaps: dict[str, LogGap] = {}
    # Log shipping fails anywhere, a root cause's included: other views still tell its story.
    for name in rng.sample(names, min(knobs.log_gaps, len(names))):
        gaps[name] = rng.choice(("partial", "empty"))
    draft = Incident(
        id=incident_id,
        services=services,
        faults=faults,
        initial_visible=rng.choice(names),
        distractions=_distractions(rng, knobs.red_herrings, services, roots),
        started_at=f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
        f"{rng.randint(0, 59):02d}:00Z",
        metrics_lag=knobs.metrics_lag,
        log_gaps=gaps,
    )
    # Red herrings do not depend on the faults' strengths: checked once per draw, before the search, on
    # the world without faults that every strength's stand-out check measures against too.
    everyday = Everyday(draft)
    if not harmless_herrings(draft, everyday.world):
        return _HARMFUL
    # Search the fault strengths for clear labels at the wanted severity: too severe halves the
    # range from above, too mild from below.
    low, high = knobs.intensity
    candidates: list[Incident] = []
    for tried in range(INTENSITY_TRIES):
        strengths = [round(rng.uniform(low, high), 2) for _ in faults]
        incident = structs.replace(
            draft,
            faults=[
                structs.replace(f, intensity=x, peak=round(min(1.0, x + 0.3), 2) if f.intensify_at else 1.0)
                for f, x in zip(faults, strengths, strict=True)
            ],
        )
        severity = _clear_severity(incident, everyday.world)
        # The last try's labels decide nothing unless it is returned: the search ends with it, and only
        # the first candidate is ever settled for. Its dearer checks are then spared.
        decides = severity == wanted or (tried < INTENSITY_TRIES - 1) or (settle and not candidates)
        if severity is None or not decides or not _roots_recoverable(incident, everyday):
            continue
        if severity == wanted:
            return incident
        candidates.append(incident)
        middle = sum(strengths) / len(strengths)
        if SEVERITIES.index(severity) > SEVERITIES.index(wanted):
            high = max(low, middle)
        else:
            low = min(high, middle)
    return candidates[0] if candidates and settle else _UNRECOVERABLE


def _fault_count(rng: random.Random, bounds: tuple[int, int]) -> int:
    """How many faults: in a tier with several possible counts, its lowest is the least likely."""
    low, high = bounds
    if low == high:
        return low
    return rng.choice([low, *range(low + 1, high + 1), *range(low + 1, high + 1), *range(low + 1, high + 1)])


def _topology(rng: random.Random, count: int, entry_points: int = 1) -> list[ServiceSpec]:
    """A layered DAG: the gateway calls front services, apps call deeper apps and datastores. With more
    than one entry point, a mobile API fronts some apps too, or a consumer takes work off the queue."""
    count = max(MIN_SERVICES, min(MAX_SERVICES, count))
    others = entry_points - 1
    store_count = 1 + (count >= 6) + (count >= 9) + (count >= 12)
    app_count = min(len(APPS), count - 1 - others - store_count)
    store_count = count - 1 - others - app_count
    apps = rng.sample(APPS, app_count)
    stores = [STORES[0], *rng.sample(STORES[1:], store_count - 1)]
    depends: dict[str, list[str]] = {name: [] for name, _ in apps}
    for index, (name, _) in enumerate(apps):
        deeper = [n for n, _ in apps[index + 1 :]]
        picks = rng.sample(deeper, min(len(deeper), rng.randint(0, 2)))
        picks += rng.sample([n for n, _ in stores], rng.randint(1, min(2, len(stores))))
        depends[name] = picks
    called = {dep for deps in depends.values() for dep in deps}
    for store, _ in stores:
        if store not in called:
            depends[rng.choice(apps)[0]].append(store)
    # The gateway fronts the first apps and any app nobody else calls: everything is reachable.
    front = [n for index, (n, _) in enumerate(apps) if index < 2 or n not in called]
    specs = [ServiceSpec(name="gateway", kind="gateway", depends_on=front, user_facing=True)]
    entries = _entry_points(rng, others, [n for n, _ in apps], [n for n, k in stores if k == "queue"])
    facing = set(front) | {dep for spec in entries if spec.user_facing for dep in spec.depends_on}
    specs += entries
    specs += [ServiceSpec(name=n, kind=k, depends_on=depends[n], user_facing=n in facing) for n, k in apps]
    specs += [ServiceSpec(name=n, kind=k) for n, k in stores]
    return specs


def _entry_points(rng: random.Random, count: int, apps: list[str], queues: list[str]) -> list[ServiceSpec]:
    """Entry points besides the gateway: a mobile API in front of a few apps (user-facing, like the
    gateway), and where there is a queue, a consumer taking work off it (no user waits on it)."""
    kinds = [MOBILE_API, *([QUEUE_CONSUMER] if queues else [])]
    found = []
    for name in rng.sample(kinds, min(count, len(kinds))):
        if name == MOBILE_API:
            fronted = rng.sample(apps, min(len(apps), rng.randint(1, 3)))
            found.append(ServiceSpec(name=name, kind="gateway", depends_on=fronted, user_facing=True))
        else:
            work = [rng.choice(queues), *rng.sample(apps, min(len(apps), 1))]
            found.append(ServiceSpec(name=name, kind="app", depends_on=work))
    return found


def _distractions(rng: random.Random, count: int, services: list[ServiceSpec], roots: set[str]) -> list[Distraction]:
    """Real anomalies off the causal story, with strengths and onsets drawn like the faults', each on a
    service its kind may stand on (`HerringType.stands`). Side work (a batch job's CPU, a failing export)
    runs on any service, so it shows on roots as often as elsewhere; a release, a stale warning, a
    misleading blame or a minor fault lands off the roots."""
    found: list[Distraction] = []
    kinds = list(HERRINGS.values())
    for herring in rng.sample(kinds, min(count, len(kinds))):
        strength = round(rng.uniform(0.2, 1.0), 2)
        places = _places(herring, services, roots)
        if places:
            service, blames, fault = rng.choice(places)
            found.append(Distraction(herring.name, service, blames=blames, strength=strength, fault=fault))
    return found


# Where a herring may stand: (service, the dependency it blames, the fault type it shows).
_Place = tuple[str, str | None, str | None]


def _places(herring: HerringType, services: list[ServiceSpec], roots: set[str]) -> list[_Place]:
    stands = herring.stands
    if stands == "anywhere":
        return [(s.name, None, None) for s in services]
    if stands == "internal":
        # Side work fails on any internal service, a root's included: its lines say nothing of the fault.
        return [(s.name, None, None) for s in services if not s.user_facing]
    if stands == "caller":
        # Any caller, on the blame path or not, may blame a dependency that is fine.
        return [(s.name, d, None) for s in services for d in s.depends_on if d not in roots]
    bystanders = [s for s in services if s.name not in roots]
    if stands == "host":
        return [(s.name, None, t) for s in bystanders for t in _HOSTED_IN_BACKGROUND[s.kind]]
    return [(s.name, None, None) for s in bystanders]


def harmless_herrings(incident: Incident, alone: World | None = None) -> bool:
    """The label principle for red herrings: alone in the world (every fault removed) they cause no
    graded user impact and raise no critical page, and any warning they raise is chronic: firing from
    before anything of the incident began. None loses a write of record (`in_background`). What they
    cause is what differs from the same world without them, whose per-minute noise is the same; their
    side effects are the same on every step from the page on, so a world where every signal they move
    is clear of its threshold at the page is checked there alone, one near a threshold at every step of
    the horizon. `alone` is the incident's world without faults, if the caller has it."""
    if not incident.distractions:
        return True
    alone = alone or World(structs.replace(incident, faults=[]), shared=False)
    calm = World(structs.replace(incident, faults=[], distractions=[]), shared=False)
    moved = [spec for spec in incident.services if alone.states_at(0)[spec.name] != calm.states_at(0)[spec.name]]
    steps = range(HERRING_HORIZON + 1) if _near(moved, alone.states_at(0), calm.states_at(0)) else range(1)
    chronic: set[tuple[str, str]] | None = None
    for step in steps:
        states, before = alone.states_at(step), calm.states_at(step)
        if rubric(*alone.user_facing_impact(step), False) != rubric(*calm.user_facing_impact(step), False):
            return False
        for spec in moved:
            for rule, value in set(fired(spec.user_facing, states[spec.name])) - set(
                fired(spec.user_facing, before[spec.name])
            ):
                if rule.critical_at is not None and value >= rule.critical_at:
                    return False
                if chronic is None:
                    # What fires at every minute from before the incident to the start of the history.
                    history = range(pre_incident(alone.incident), -HISTORY_MINUTES + 1)
                    chronic = set.intersection(*(_firing(incident, alone.states_at(at)) for at in history))
                if (spec.name, rule.signal) not in chronic:
                    return False
    return True


def _firing(incident: Incident, states: dict[str, ServiceState]) -> set[tuple[str, str]]:
    return {
        (spec.name, rule.signal) for spec in incident.services for rule, _ in fired(spec.user_facing, states[spec.name])
    }


def _near(services: list[ServiceSpec], states: dict[str, ServiceState], calm: dict[str, ServiceState]) -> bool:
    """Whether a signal the herrings move on these services is within reach of a page or of the rubric's
    first band by noise alone."""
    for spec in services:
        state, before = states[spec.name], calm[spec.name]
        if spec.user_facing and (
            (state.error_rate != before.error_rate and state.error_rate >= NEAR_ERROR * P1_ERROR_RATE)
            or (state.p99_ms != before.p99_ms and state.p99_ms >= NEAR * P1_LATENCY_MS)
        ):
            return True
        for rule in ALERT_RULES:
            if rule.audience == "any" or spec.user_facing:
                near = NEAR_ERROR if rule.signal.endswith("ratio") else NEAR
                value = rule.value(state)
                if value != rule.value(before) and value >= near * rule.threshold:
                    return True
    return False


def _clear_severity(incident: Incident, faultless: World) -> Severity | None:
    """The incident's severity if every root cause is paged itself or lies at the end of a trail of blame
    from a paged user-facing service (each hop's callers log failures naming it, or log nothing at all),
    and the user-facing impact is clear of the rubric's edges; else None. Untouched, the world only
    changes when a fault worsens, so checking those steps covers every step. `faultless` is the
    incident's world without faults."""
    # Not in the store episodes share: most candidates are dropped, and keeping each one's states there
    # would cost an encode of it for its key and push out incidents that are played.
    world = World(incident, faultless=faultless, shared=False)
    if not traceable(incident, world.states_at(0)):
        return None
    at_risk = world.data_at_risk(0)
    severities: list[Severity] = []
    for step in {0} | {f.intensify_at for f in incident.faults if f.intensify_at is not None}:
        error_rate, latency = world.user_facing_impact(step)
        if any(abs(error_rate - edge) < ERROR_MARGIN for edge in (P1_ERROR_RATE, P0_ERROR_RATE)):
            return None
        if any(abs(latency - edge) < LATENCY_MARGIN_MS for edge in (P1_LATENCY_MS, P0_LATENCY_MS)):
            return None
        severities.append(rubric(error_rate, latency, at_risk))
    return max(severities, key=SEVERITIES.index)


def _roots_recoverable(incident: Incident, everyday: Everyday) -> bool:
    """The rest of the labels' recoverability, dearer than `_clear_severity`'s: every root's fix restores
    users, and every root alone shows something of its own, pages or lies at the end of failing calls
    from a page, and stands out of the everyday excursions around it (`everyday` is the incident's
    world without faults)."""
    if not _fixes_restore(incident):
        return False
    # The dearest checks last: they simulate the incident once more per fault, and its history.
    for index in range(len(incident.faults)):
        alone = fault_alone(incident, index)
        if not (own_impact(incident, index, alone) and pages_alone(alone)):
            return False
    return stands_out(incident, everyday)


def _fixes_restore(incident: Incident) -> bool:
    """Whether every root's fix, applied a step after the page, brings users back even at the faults'
    peak. Only extra requests outlast a fix (no remedy ends demand from outside): an incident without
    them is restored by its fixes by construction, so only one with them is simulated."""
    if not any(FAULTS[f.type].load for f in incident.faults):
        return True
    world = World(incident, shared=False)
    world.advance()
    for fault in incident.faults:
        world.remediate(FAULTS[fault.type].fix, fault.service)
    settled = max([f.intensify_at or 0 for f in incident.faults]) + 3
    while world.step < settled:
        world.advance()
    return world.restored()


def own_impact(incident: Incident, index: int, alone: World | None = None) -> bool:
    """Whether fault `index` alone, at the page, moves something an engineer can see: on its service a
    metric beyond noise; on any service that calls it, directly or not, its error rate or p99; or a page
    that would not fire without it. A root that shows nothing of its own cannot be told from a guess."""
    fault = incident.faults[index]
    alone = alone or fault_alone(incident, index)
    sick, calm = alone.states_at(0), alone.plan.calm
    own, before = sick[fault.service], calm[fault.service]
    if (
        own.error_rate - before.error_rate >= OWN_ERROR
        or own.p99_ms >= OWN_LATENCY * before.p99_ms
        or abs(own.cpu_pct - before.cpu_pct) >= OWN_POINTS
        or abs(own.memory_pct - before.memory_pct) >= OWN_POINTS
        or not 1 / OWN_RATE < own.rps / max(before.rps, 1e-9) < OWN_RATE
    ):
        return True
    callers = _callers(incident, fault.service)
    for spec in incident.services:
        now, then = sick[spec.name], calm[spec.name]
        if spec.name in callers and (
            now.error_rate - then.error_rate >= OWN_ERROR or now.p99_ms >= OWN_LATENCY * then.p99_ms
        ):
            return True
        if {rule for rule, _ in fired(spec.user_facing, now)} - {rule for rule, _ in fired(spec.user_facing, then)}:
            return True
    return False


def _callers(incident: Incident, service: str) -> set[str]:
    """Every service whose requests reach `service`, directly or through others."""
    found: set[str] = set()
    frontier = [service]
    while frontier:
        name = frontier.pop()
        for spec in incident.services:
            if name in spec.depends_on and spec.name not in found:
                found.add(spec.name)
                frontier.append(spec.name)
    return found


def fault_alone(incident: Incident, index: int) -> World:
    """The incident's world with fault `index` alone in it: no other fault, no red herring."""
    return World(structs.replace(incident, faults=[incident.faults[index]], distractions=[]), shared=False)


def pages_alone(alone: World) -> bool:
    """The label principle's root rule, on a fault's world alone: it pages its service or lies at the
    end of failing calls from a user-facing service it pages. A fault that shows only beside another
    one's pages (a surge that another fault's failures turn into errors) is no root of its own."""
    return traceable(alone.incident, alone.states_at(0))


def traceable(incident: Incident, states: dict[str, ServiceState]) -> bool:
    """Every root is paged itself or reached along failing calls from a paged user-facing service."""
    # Only the user-facing services and the roots are asked whether they page.
    paged = {spec.name for spec in incident.services if spec.user_facing and _alerted(spec, states)}
    reached, frontier = set(paged), list(paged)
    while frontier:
        caller = frontier.pop()
        for dep, share, _ in states[caller].failing_upstreams:
            if share >= MIN_BLAMED_SHARE and dep not in reached:
                reached.add(dep)
                frontier.append(dep)
    return all(f.service in reached or _alerted(incident.service(f.service), states) for f in incident.faults)


def _alerted(spec: ServiceSpec, states: dict[str, ServiceState]) -> bool:
    # A function of the module, not a closure: compiled, a closure called from the comprehensions above
    # would share their scope, a reference cycle on every call (tests/test_server_collector.py).
    return any(fired(spec.user_facing, states[spec.name]))
