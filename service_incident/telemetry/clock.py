"""The episode's clock: a step is a minute after the page, and every view stamps its lines from it."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from functools import lru_cache

from ..world import World, unit

STEP_MINUTES = 1
# How far behind a skewed node's clock runs, in seconds: (least, most).
SKEW_S = (300.0, 600.0)


@lru_cache(maxsize=1024)
def parse_time(stamp: str) -> datetime:
    # Cached: every view's clock starts from the incident's start, parsed once.
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


# Durations of an amount of one unit, `timedelta(seconds=amount)` and the like to the microsecond:
# the amount passed in its place rather than by keyword, which `timedelta` finds by looking each of its
# seven keywords' names up, at more than the duration's arithmetic costs (a pod's age takes two, and a
# new incident's clock one a minute).
def duration_ms(amount: float) -> timedelta:
    return timedelta(0, 0, 0, amount)


def duration_s(amount: float) -> timedelta:
    return timedelta(0, amount)


def duration_min(amount: float) -> timedelta:
    return timedelta(0, 0, 0, 0, amount)


def duration_h(amount: float) -> timedelta:
    return timedelta(0, 0, 0, 0, 0, amount)


def duration_d(amount: float) -> timedelta:
    return timedelta(amount)


# Every number below 100 as a stamp writes it, two digits: a format call per field cost more than the
# rest of a stamp.
_TWO_DIGITS = tuple(f"{number:02d}" for number in range(100))


def format_time(moment: datetime) -> str:
    two = _TWO_DIGITS
    date = f"{moment.year:04d}-{two[moment.month]}-{two[moment.day]}"
    return f"{date}T{two[moment.hour]}:{two[moment.minute]}:{two[moment.second]}Z"


def clock(world: World, step: int) -> datetime:
    return _clock(world.incident.started_at, step)


@lru_cache(maxsize=8192)
def _clock(started_at: str, step: int) -> datetime:
    # Cached: every view asks the clock of the same few minutes, many times each.
    return parse_time(started_at) + duration_min(STEP_MINUTES * step)


def clock_text(world: World, step: int) -> str:
    """The moment of a step as views print it."""
    return _clock_text(world.incident.started_at, step)


@lru_cache(maxsize=8192)
def _clock_text(started_at: str, step: int) -> str:
    # Cached: every step prints its clock, and most views the minutes of the history.
    return format_time(_clock(started_at, step))


# Every minute of a day as a stamp writes it, HH:MM: a new incident's views stamp new minutes on most
# steps, and a whole stamp, worked out through the calendar, cost about 2 µs each.
_MINUTES_OF_DAY = tuple(f"{_TWO_DIGITS[at // 60]}:{_TWO_DIGITS[at % 60]}" for at in range(24 * 60))


def minute(world: World, step: int) -> str:
    """The minute of a step as a view's stamp reads it: HH:MM, UTC. A step is whole minutes, so the
    start's seconds never carry into it: it is `clock_text`'s minute, counted on from the start's."""
    return _MINUTES_OF_DAY[(_start_minute(world.incident.started_at) + STEP_MINUTES * step) % len(_MINUTES_OF_DAY)]


@lru_cache(maxsize=1024)
def _start_minute(started_at: str) -> int:
    """The minute of the day an incident starts on (its start is in UTC: `incidents.validate`)."""
    moment = parse_time(started_at)
    return moment.hour * 60 + moment.minute


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def step_of(world: World, moment: datetime) -> int:
    """The step a moment falls in."""
    return (epoch_ms(moment) - epoch_ms(clock(world, 0))) // 60_000


# The tail of a stamp, by second and by millisecond: every line of a log view is stamped.
_SECONDS = tuple(f"{second}." for second in _TWO_DIGITS[:60])
_MILLIS = tuple(f"{millis:03d}Z" for millis in range(1000))


def stamp_ms(moment_ms: int) -> str:
    seconds, millis = divmod(moment_ms, 1000)
    minutes, second = divmod(seconds, 60)
    return _minute_stamp(minutes) + _SECONDS[second] + _MILLIS[millis]


@lru_cache(maxsize=8192)
def _minute_stamp(minutes: int) -> str:
    """The stamp of an epoch minute up to its seconds: a log view's lines fall in a few minutes."""
    t, two = time.gmtime(minutes * 60), _TWO_DIGITS
    return f"{t.tm_year:04d}-{two[t.tm_mon]}-{two[t.tm_mday]}T{two[t.tm_hour]}:{two[t.tm_min]}:"


def age(delta: timedelta) -> str:
    """How long ago, as the orchestrator prints it: 45s, 12m, 5h, 3d."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def skew_s(incident_id: str, service: str) -> float:
    """How far behind the clock of a skewed service's node runs: one figure for every view and line that
    prints it (containers share their node's clock, so every pod reads the same offset)."""
    least, most = SKEW_S
    return least + unit(incident_id, service, "skew") * (most - least)
