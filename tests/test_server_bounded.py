"""The bounded store makes room without scanning its entries, and evicts exactly what the rules say:
over random sequences of opens, uses, finishes, drops, expiries and time, it picks the same victims,
in the same order, and refuses the same newcomers as the rules applied to every entry in turn."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from serving import ManualClock

from service_incident.server.bounded import AtCapacity, BoundedStore

OWNERS = "abcd"
LIVE_S = 30.0
IDLE_S = 100.0


class Scanning:
    """The rules, applied to every entry in turn (the entries least recently used first): the
    specification the store is checked against."""

    def __init__(self, capacity: int, per_owner: int, evict_own: bool, clock: ManualClock) -> None:
        self.capacity, self.per_owner, self.evict_own, self.clock = capacity, per_owner, evict_own, clock
        self.entries: dict[str, tuple[str, float, bool]] = {}  # key: owner, last used, finished
        self.dropped: list[str] = []

    def use(self, key: str, finished: bool = False) -> None:
        owner, _, was = self.entries.pop(key)
        self.entries[key] = (owner, self.clock(), was or finished)

    def idle(self, key: str) -> bool:
        _, last, finished = self.entries[key]
        return last < self.clock() - LIVE_S or finished

    def drop(self, key: str) -> None:
        del self.entries[key]
        self.dropped.append(key)

    def make_room(self, owner: str) -> None:
        own = [key for key, (who, _, _) in self.entries.items() if who == owner]
        if len(own) >= self.per_owner:
            idle = [key for key in own if self.idle(key)]
            if not idle and not self.evict_own:
                raise AtCapacity("owner", "x", len(own), self.per_owner)
            self.drop((idle or own)[0])
        if len(self.entries) < self.capacity:
            return
        idle = [key for key in self.entries if self.idle(key)]
        own = [key for key, (who, _, _) in self.entries.items() if who == owner]
        if idle:
            self.drop(idle[0])
        elif own and self.evict_own:
            self.drop(own[0])
        else:
            raise AtCapacity("server", "x", len(self.entries), self.capacity)

    def expire(self, idle_s: float, where: Callable[[str], bool]) -> int:
        stale = [key for key, (_, last, _) in self.entries.items() if last < self.clock() - idle_s and where(key)]
        for key in stale:
            self.drop(key)
        return len(stale)


def outcome(make_room: Callable[[str], None], owner: str) -> tuple[str, int, int] | None:
    """None if there is room, else whose bound refused and its figures."""
    try:
        make_room(owner)
        return None
    except AtCapacity as refused:
        return (refused.whose, refused.held, refused.limit)


def every(key: str) -> bool:
    return True


def odd(key: str) -> bool:
    return int(key[1:]) % 2 == 1


@pytest.mark.parametrize("evict_own", [True, False], ids=["evict-own", "refuse-own"])
@pytest.mark.parametrize(("capacity", "per_owner"), [(8, 3), (5, 5), (12, 4)])
def test_eviction_picks_the_entries_the_rules_pick_in_their_order(
    evict_own: bool, capacity: int, per_owner: int
) -> None:
    for seed in range(60):
        rng = random.Random(seed)
        clock = ManualClock()
        dropped: list[str] = []
        store: BoundedStore[str] = BoundedStore(
            capacity=capacity,
            per_owner=per_owner,
            idle_timeout_s=IDLE_S,
            live_s=LIVE_S,
            what="x",
            clock=clock,
            on_drop=dropped.append,
            evict_own=evict_own,
        )
        rules = Scanning(capacity, per_owner, evict_own, clock)
        for step in range(400):
            held = list(rules.entries)
            choice = rng.random()
            if choice < 0.35 or not held:
                owner, key = rng.choice(OWNERS), f"k{step}"
                made = outcome(store.make_room, owner)
                assert made == outcome(rules.make_room, owner), (seed, step)
                if made is None:
                    store.add(key, key, owner)
                    rules.entries[key] = (owner, clock(), False)
            elif choice < 0.6:
                key = rng.choice(held)
                assert store.get(key) == key
                rules.use(key)
            elif choice < 0.7:
                key = rng.choice(held)
                store.finish(key)
                rules.use(key, finished=True)
            elif choice < 0.75:
                key = rng.choice(held)
                assert store.pop(key)
                rules.drop(key)
            elif choice < 0.78:
                idle_s, where = rng.choice([IDLE_S, LIVE_S / 2]), rng.choice([every, odd])
                assert store.expire(idle_s, where) == rules.expire(idle_s, where)
            else:
                clock.advance(rng.choice([0.0, 1.0, 7.5, 20.0]))
            assert dropped == rules.dropped, (seed, step)
            assert len(store) == len(rules.entries) and list(store.values()) == list(rules.entries)
            assert all(store.held_by(o) == sum(w == o for w, _, _ in rules.entries.values()) for o in OWNERS)


def test_a_store_of_many_entries_makes_room_by_its_oldest_idle_one() -> None:
    clock = ManualClock()
    dropped: list[str] = []
    store: BoundedStore[str] = BoundedStore(
        capacity=50_000,
        per_owner=50_000,
        idle_timeout_s=IDLE_S,
        live_s=LIVE_S,
        what="x",
        clock=clock,
        on_drop=dropped.append,
    )
    for n in range(50_000):
        store.add(f"k{n}", f"k{n}", OWNERS[n % 4])
    store.finish("k40000")  # finished, and so idle, though just used
    store.make_room("a")
    assert dropped == ["k40000"]
    store.add("new", "new", "a")
    clock.advance(LIVE_S + 1)
    store.get("k0")  # live again: the oldest idle one is now the next
    store.make_room("a")
    assert dropped == ["k40000", "k1"]
