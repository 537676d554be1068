"""The clock's stamps read as the standard library writes the same moments: a stamp to the second as
ISO 8601 in UTC, and a log line's to the millisecond; a view's minute is the HH:MM of its step's whole
stamp. Its durations of a float amount are the ones `timedelta` makes of the amount by keyword. An
incident's clock starts at a UTC time, or the incident is refused."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from msgspec import structs

from service_incident.generator import generate
from service_incident.incidents import IncidentError, validate
from service_incident.telemetry.clock import (
    clock_text,
    duration_d,
    duration_h,
    duration_min,
    duration_ms,
    duration_s,
    format_time,
    minute,
    stamp_ms,
)
from service_incident.world import World

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _moments(count: int) -> list[datetime]:
    rng = random.Random(7)
    # Every field at its edges (midnight, the last second of a year, a leap day), then anywhere.
    found = [datetime(2024, 2, 29, tzinfo=UTC), datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)]
    found += [EPOCH + timedelta(milliseconds=rng.randrange(0, 2**45)) for _ in range(count)]
    return found


def test_a_stamp_to_the_second_is_iso_8601_in_utc() -> None:
    moments = _moments(20_000)
    assert [format_time(moment) for moment in moments] == [m.strftime("%Y-%m-%dT%H:%M:%SZ") for m in moments]


def test_a_line_stamp_to_the_millisecond_is_iso_8601_in_utc() -> None:
    rng = random.Random(11)
    # Milliseconds since the epoch as lines carry them: whole, so the stamp is all that is tested here.
    millis = [0, 86_399_999, *(rng.randrange(0, 2**45) for _ in range(20_000))]
    written = [stamp_ms(ms) for ms in millis]
    moments = [EPOCH + timedelta(milliseconds=ms) for ms in millis]
    assert written == [m.isoformat(timespec="milliseconds").replace("+00:00", "Z") for m in moments]


def test_a_views_minute_is_the_hour_and_minute_of_the_steps_whole_stamp() -> None:
    rng = random.Random(17)
    incident = generate("easy", 1)
    # Starts at midnight, at the last minute of a day (steps carry over midnight and the year, back and
    # forth), off the minute (seconds are carried, never rounded), and anywhere.
    starts = ["2026-01-01T00:00:00Z", "2026-12-31T23:59:00Z", "2024-02-28T23:58:59Z"]
    starts += [format_time(moment) for moment in _moments(40)]
    for started_at in starts:
        world = World(structs.replace(incident, started_at=started_at), shared=False)
        steps = [-2000, -1441, -1440, -1, 0, 1, 1439, 1440, 3000, *(rng.randrange(-5000, 5000) for _ in range(50))]
        assert [minute(world, step) for step in steps] == [clock_text(world, step)[11:16] for step in steps]


def test_a_duration_of_a_float_amount_is_the_one_timedelta_makes_of_it_by_keyword() -> None:
    rng = random.Random(13)
    # Amounts as the views draw them and any other: whole, halfway between two microseconds of each unit
    # (where rounding goes to even), negative, tiny, and up to the largest days a timedelta holds.
    amounts = [0.0, -0.0, 1.0, 0.5e-6, 1.5e-6, 2.5e-6, 0.5e-3, 1.5e-3, 0.5 / 3600, 1.5 / 3600, 1e-12, -2.5e-6]
    amounts += [rng.uniform(-1, 1) * 10 ** rng.randrange(-9, 8) for _ in range(60_000)]
    amounts += [rng.randrange(-(10**6), 10**6) + rng.choice((0.5, 0.25, 0.125, 0.0)) for _ in range(10_000)]
    # Whole amounts as ints too, as a step's minute and a page's lead are.
    amounts += [rng.randrange(-(10**5), 10**5) for _ in range(1_000)]
    units = {"milliseconds": duration_ms, "seconds": duration_s, "minutes": duration_min, "hours": duration_h}
    for unit, made in {**units, "days": duration_d}.items():
        within = [amount for amount in amounts if unit != "days" or abs(amount) < 10**6]
        assert [made(amount) for amount in within] == [timedelta(**{unit: amount}) for amount in within], unit


@pytest.mark.parametrize(
    "started",
    [
        "2026-03-29T14:00:00+02:00",
        "2026-03-29T14:00:00",
        "2026-13-01T00:00:00Z",
        "2026-03-29 14:00:00Z",
        "\uff12\uff10\uff12\uff16-03-29T14:00:00Z",  # digits in full width
    ],
)
def test_an_incident_starts_at_a_utc_time_or_is_refused(started: str) -> None:
    incident = generate("easy", 1)
    assert validate(incident) is incident
    with pytest.raises(IncidentError, match="started_at must be a UTC time"):
        validate(structs.replace(incident, started_at=started))
