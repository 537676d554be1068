"""A bounded map of what clients hold (HTTP episodes, MCP sessions, WebSocket sessions): one policy.

Each entry has an owner (the client that made it: the unit of the per-owner bound) and the time it
was last used. The map is bounded three ways:

* in idle time: `expire()` drops every entry unused for `idle_timeout_s`;
* per owner: an owner past `per_owner` gives up its own least recently used entry, idle or finished
  ones first; with `evict_own=False` it is refused instead;
* in total: past `capacity`, the least recently used entry that is no longer live goes (unused for
  `live_s`, or finished), whoever owns it; a live entry of another owner is never taken, so when
  every entry is live the newcomer is refused (`AtCapacity` says whose bound is full).

Dropping an entry calls `on_drop` with its value (closing the environment, cancelling the scope).
The clock is injected, so every bound is tested without waiting; it never goes back (as
`time.monotonic`), so the entries in order of last use are in order of idle time too.

Making room costs the same however many entries are held: the entries are kept in order of last use,
in all and per owner, and the finished ones apart in the same order. The least recently used idle
entry is then the oldest, if it has been unused for `live_s`, else the oldest finished one. An entry
is finished when its holder says so (`finish`): the store never asks its value.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, Literal, TypeVar

V = TypeVar("V")
Clock = Callable[[], float]


class AtCapacity(Exception):
    """No room for another entry: `whose` bound is full, the owner's own or the server's."""

    def __init__(self, whose: Literal["owner", "server"], what: str, held: int, limit: int) -> None:
        if whose == "owner":
            text = f"this client already holds {held} of its {limit} {what}, all in use: close one or wait"
        else:
            text = f"the server holds {held} of its {limit} {what}, all in use by other clients: retry later"
        super().__init__(text)
        self.whose = whose
        self.held = held
        self.limit = limit


class _Entry(Generic[V]):
    __slots__ = ("finished", "last_active", "owner", "value")

    def __init__(self, value: V, owner: str, now: float) -> None:
        self.value = value
        self.owner = owner
        self.last_active = now
        self.finished = False


class _Recency:
    """Keys in order of last use, and those of them finished in that order too."""

    __slots__ = ("finished", "used")

    def __init__(self) -> None:
        self.used: OrderedDict[str, None] = OrderedDict()
        self.finished: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self.used)

    def use(self, key: str, finished: bool) -> None:
        self.used[key] = None
        self.used.move_to_end(key)
        if finished:
            self.finished[key] = None
            self.finished.move_to_end(key)

    def remove(self, key: str) -> None:
        del self.used[key]
        self.finished.pop(key, None)


class BoundedStore(Generic[V]):
    def __init__(
        self,
        *,
        capacity: int,
        per_owner: int,
        idle_timeout_s: float,
        live_s: float,
        what: str,
        clock: Clock = time.monotonic,
        on_drop: Callable[[V], None] = lambda value: None,
        evict_own: bool = True,
    ) -> None:
        self.capacity = capacity
        self.per_owner = per_owner
        self.idle_timeout_s = idle_timeout_s
        self.live_s = min(live_s, idle_timeout_s)
        self.what = what
        self.clock = clock
        self.on_drop = on_drop
        self.evict_own = evict_own
        self._entries: dict[str, _Entry[V]] = {}
        self._all = _Recency()
        self._owners: dict[str, _Recency] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def values(self) -> Iterator[V]:
        """Least recently used first."""
        return (self._entries[key].value for key in self._all.used)

    def held_by(self, owner: str) -> int:
        own = self._owners.get(owner)
        return len(own) if own is not None else 0

    def make_room(self, owner: str) -> None:
        """Evict what the bounds require before `owner` adds an entry, or raise AtCapacity."""
        now = self.clock()
        own = self._owners.get(owner)
        if own is not None and len(own) >= self.per_owner:
            victim = self._first_idle(own, now)
            if victim is None:
                if not self.evict_own:
                    raise AtCapacity("owner", self.what, len(own), self.per_owner)
                victim = next(iter(own.used))
            self.pop(victim)
        if len(self._entries) < self.capacity:
            return
        victim = self._first_idle(self._all, now)
        if victim is None and self.evict_own and (own := self._owners.get(owner)) is not None:
            victim = next(iter(own.used))  # an owner's recency goes with its last entry
        if victim is None:
            raise AtCapacity("server", self.what, len(self._entries), self.capacity)
        self.pop(victim)

    def add(self, key: str, value: V, owner: str) -> None:
        """Keep `value` under `key` (replacing what it held, without dropping that); call
        `make_room(owner)` first (it may refuse)."""
        if key in self._entries:
            self._forget(key)
        entry = self._entries[key] = _Entry(value, owner, self.clock())
        self._use(key, entry)

    def get(self, key: str) -> V | None:
        """The value, marked as just used; None if not held."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        entry.last_active = self.clock()
        self._use(key, entry)
        return entry.value

    def peek(self, key: str) -> V | None:
        """The value, left as it was used; None if not held."""
        entry = self._entries.get(key)
        return entry.value if entry is not None else None

    def touch(self, key: str) -> None:
        self.get(key)

    def finish(self, key: str) -> None:
        """The entry is done with (its episode is over): idle from now on, though this counts as a use."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.finished = True
            self.get(key)

    def owner(self, key: str) -> str | None:
        entry = self._entries.get(key)
        return entry.owner if entry is not None else None

    def pop(self, key: str) -> bool:
        entry = self._forget(key)
        if entry is None:
            return False
        self.on_drop(entry.value)
        return True

    def expire(self, idle_timeout_s: float | None = None, where: Callable[[V], bool] = lambda value: True) -> int:
        """Drop the entries unused for the idle timeout (or the one given, for those `where` picks); how many."""
        deadline = self.clock() - (self.idle_timeout_s if idle_timeout_s is None else idle_timeout_s)
        stale = []
        for key in self._all.used:  # oldest first: the first one used since the deadline ends the search
            entry = self._entries[key]
            if entry.last_active >= deadline:
                break
            if where(entry.value):
                stale.append(key)
        for key in stale:
            self.pop(key)
        return len(stale)

    def _use(self, key: str, entry: _Entry[V]) -> None:
        self._all.use(key, entry.finished)
        self._owners.setdefault(entry.owner, _Recency()).use(key, entry.finished)

    def _forget(self, key: str) -> _Entry[V] | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._all.remove(key)
        own = self._owners[entry.owner]
        own.remove(key)
        if not own:
            del self._owners[entry.owner]
        return entry

    def _first_idle(self, recency: _Recency, now: float) -> str | None:
        """The least recently used of `recency`'s keys that is idle: unused for `live_s` (then it is
        the oldest of all), or finished."""
        oldest = next(iter(recency.used), None)
        if oldest is not None and self._entries[oldest].last_active < now - self.live_s:
            return oldest
        return next(iter(recency.finished), None)
