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
The clock is injected, so every bound is tested without waiting.
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
    __slots__ = ("last_active", "owner", "value")

    def __init__(self, value: V, owner: str, now: float) -> None:
        self.value = value
        self.owner = owner
        self.last_active = now


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
        finished: Callable[[V], bool] = lambda value: False,
        evict_own: bool = True,
    ) -> None:
        self.capacity = capacity
        self.per_owner = per_owner
        self.idle_timeout_s = idle_timeout_s
        self.live_s = min(live_s, idle_timeout_s)
        self.what = what
        self.clock = clock
        self.on_drop = on_drop
        self.finished = finished
        self.evict_own = evict_own
        self._entries: OrderedDict[str, _Entry[V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def values(self) -> Iterator[V]:
        return (entry.value for entry in self._entries.values())

    def held_by(self, owner: str) -> int:
        return sum(entry.owner == owner for entry in self._entries.values())

    def make_room(self, owner: str) -> None:
        """Evict what the bounds require before `owner` adds an entry, or raise AtCapacity."""
        now = self.clock()
        own = [key for key, entry in self._entries.items() if entry.owner == owner]
        if len(own) >= self.per_owner:
            if not self.evict_own:
                victims = [key for key in own if self._idle(self._entries[key], now)]
                if not victims:
                    raise AtCapacity("owner", self.what, len(own), self.per_owner)
                own = victims
            self.pop(self._preferred(own, now))
        if len(self._entries) < self.capacity:
            return
        idle = [key for key, entry in self._entries.items() if self._idle(entry, now)]
        own = [key for key, entry in self._entries.items() if entry.owner == owner]
        if idle:
            self.pop(idle[0])
        elif own and self.evict_own:
            self.pop(own[0])
        else:
            raise AtCapacity("server", self.what, len(self._entries), self.capacity)

    def add(self, key: str, value: V, owner: str) -> None:
        """Keep `value` under `key`; call `make_room(owner)` first (it may refuse)."""
        self._entries[key] = _Entry(value, owner, self.clock())

    def get(self, key: str) -> V | None:
        """The value, marked as just used; None if not held."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        entry.last_active = self.clock()
        self._entries.move_to_end(key)
        return entry.value

    def peek(self, key: str) -> V | None:
        """The value, left as it was used; None if not held."""
        entry = self._entries.get(key)
        return entry.value if entry is not None else None

    def touch(self, key: str) -> None:
        self.get(key)

    def owner(self, key: str) -> str | None:
        entry = self._entries.get(key)
        return entry.owner if entry is not None else None

    def pop(self, key: str) -> bool:
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        self.on_drop(entry.value)
        return True

    def expire(self, idle_timeout_s: float | None = None, where: Callable[[V], bool] = lambda value: True) -> int:
        """Drop the entries unused for the idle timeout (or the one given, for those `where` picks); how many."""
        deadline = self.clock() - (self.idle_timeout_s if idle_timeout_s is None else idle_timeout_s)
        stale = [k for k, entry in self._entries.items() if entry.last_active < deadline and where(entry.value)]
        for key in stale:
            self.pop(key)
        return len(stale)

    def _idle(self, entry: _Entry[V], now: float) -> bool:
        return entry.last_active < now - self.live_s or self.finished(entry.value)

    def _preferred(self, keys: list[str], now: float) -> str:
        """Of an owner's entries (least recently used first), the one to give up: an idle one if any."""
        return next((key for key in keys if self._idle(self._entries[key], now)), keys[0])
