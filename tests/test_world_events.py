"""The orchestrator's events read as Kubernetes lists them: each event's last occurrence only moves
forward while it recurs, stays listed for the window, and once its cause is fixed keeps one time, at or
before the fix, in every later view; a rollout's event says what that rollout did."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from service_incident.faults import FAULTS
from service_incident.generator import Knobs, generate
from service_incident.telemetry import Telemetry, clock
from service_incident.world import World

FIX_STEP = 3
LAST_STEP = 10
_EVENT = re.compile(r"^  (\d+)([smhd]) ago (Warning|Normal) (\w+)")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _listed(text: str, now: datetime) -> dict[str, tuple[datetime, datetime]]:
    """Each listed event by reason, with the span of moments its printed age allows."""
    found = {}
    for line in text.split("events (last 15m):")[1].splitlines():
        if match := _EVENT.match(line):
            count, unit, _, reason = match.groups()
            seconds, size = int(count) * _UNITS[unit], _UNITS[unit]
            found[reason] = (now - timedelta(seconds=seconds + size), now - timedelta(seconds=seconds))
    return found


def _with_events() -> list[str]:
    return sorted(name for name, kind in FAULTS.items() if kind.events)


@pytest.mark.parametrize("fault_type", _with_events())
@pytest.mark.parametrize("seed", [1, 7, 13])
def test_an_event_moves_only_forward_and_holds_still_once_fixed(fault_type: str, seed: int) -> None:
    incident = generate(Knobs(services=(4, 6), fault_types=(fault_type,), intensity=(0.7, 1.0)), seed=seed)
    root = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=seed)
    seen: dict[str, tuple[datetime, datetime]] = {}
    fixed: dict[str, tuple[datetime, datetime]] = {}  # as the first view after the fix lists them
    for step in range(LAST_STEP + 1):
        if step:
            world.advance()
        if step == FIX_STEP:
            world.remediate(FAULTS[fault_type].fix, root)
            continue  # the remedy is this step's action
        now = clock(world, step)
        listed = _listed(telemetry.health(root, step), now)
        for reason, (low, high) in listed.items():
            if reason in seen:
                # The last occurrence of a recurring event is never earlier than an earlier view's.
                assert high >= seen[reason][0], (fault_type, step, reason)
            if step > FIX_STEP and reason != "ScalingReplicaSet":
                # Nothing recurs once fixed: one moment, before the fix, in every later view.
                assert low < clock(world, FIX_STEP), (fault_type, step, reason)
                if reason in fixed:
                    assert low <= fixed[reason][1] and high >= fixed[reason][0], (fault_type, step, reason)
                fixed.setdefault(reason, (low, high))
        for reason, (low, _) in seen.items():
            # An event stays listed for the window.
            if now - low < timedelta(minutes=14):
                assert reason in listed, (fault_type, step, reason)
        seen.update({reason: span for reason, span in listed.items() if reason != "ScalingReplicaSet"})


def test_a_scale_up_event_says_how_many_replicas_that_scale_up_made() -> None:
    """Two scale-ups at different steps each keep their own count of replicas."""
    incident = generate(Knobs(services=(4, 6), fault_types=("bad_deployment",)), seed=5)
    root = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=5)
    shown = []
    for step in range(1, 6):
        world.advance()
        if step in (1, 3):
            world.remediate("scale_up", root)
        else:
            events = [line for line in telemetry.health(root, step).splitlines() if "ScalingReplicaSet" in line]
            shown.append([line.partition(" ago ")[2] for line in events])
    # The first scale-up's event reads the same after the second happened.
    assert shown[0][0] in shown[1], shown
    assert len(set(shown[1])) == 2, shown
