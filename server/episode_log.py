"""The episode log: an episode is its reset request plus the actions it accepted, appended in order.

The world is deterministic, so any process that reads an episode's log rebuilds it exactly (replay.py).
One setting, `EPISODE_STORE`, names where the log lives:

    memory                   this process only (the default: `server` alone, as ever)
    sqlite:///path/to/file   a file the workers of one box share (stdlib sqlite3, WAL)
    redis://host:6379/0      a Redis the boxes of a deployment share (the `redis` extra)

Every store is bounded the same way: an episode untouched for `idle_timeout_s` expires, and an
owner (client address) starting one past `per_owner` loses its own oldest. Keys are digests of the
episode ids (replay.py), so a store never holds the credential that resumes an episode.

`append(key, index, actions)` writes only where the log holds exactly `index` actions, so two
processes can never interleave one episode's steps: the second learns it is behind (False).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from .bounded import BoundedStore, Clock


class Logged:
    """What a log holds for one episode."""

    __slots__ = ("actions", "head")

    def __init__(self, head: bytes, actions: list[bytes]) -> None:
        self.head = head
        self.actions = actions


class EpisodeLog(Protocol):
    async def create(self, key: str, head: bytes, owner: str) -> None: ...

    async def append(self, key: str, index: int, actions: list[bytes]) -> bool: ...

    async def load(self, key: str) -> Logged | None: ...

    async def length(self, key: str) -> int | None: ...

    async def drop(self, key: str) -> None: ...

    async def expire(self) -> int: ...

    async def aclose(self) -> None: ...


class MemoryLog:
    """This process's memory: resumes a session whose connection dropped, not one whose process died."""

    def __init__(
        self, capacity: int, per_owner: int, idle_timeout_s: float, clock: Clock = time.monotonic, live_s: float = 60.0
    ) -> None:
        # Every save touches its log: one untouched for `live_s` is an abandoned session's, which a
        # full log gives up for a newcomer.
        self._logs: BoundedStore[Logged] = BoundedStore(
            capacity=capacity,
            per_owner=per_owner,
            idle_timeout_s=idle_timeout_s,
            live_s=live_s,
            what="logged episodes",
            clock=clock,
        )

    async def create(self, key: str, head: bytes, owner: str) -> None:
        self._logs.pop(key)
        self._logs.make_room(owner)
        self._logs.add(key, Logged(head, []), owner)

    async def append(self, key: str, index: int, actions: list[bytes]) -> bool:
        logged = self._logs.get(key)
        if logged is None or len(logged.actions) != index:
            return False
        logged.actions.extend(actions)
        return True

    async def load(self, key: str) -> Logged | None:
        logged = self._logs.get(key)
        return None if logged is None else Logged(logged.head, list(logged.actions))

    async def length(self, key: str) -> int | None:
        logged = self._logs.get(key)
        return None if logged is None else len(logged.actions)

    async def drop(self, key: str) -> None:
        self._logs.pop(key)

    async def expire(self) -> int:
        return self._logs.expire()

    async def aclose(self) -> None:
        pass


_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    key TEXT PRIMARY KEY, owner TEXT NOT NULL, head BLOB NOT NULL, length INTEGER NOT NULL, touched REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_by_owner ON episodes (owner, touched);
CREATE INDEX IF NOT EXISTS episodes_by_touch ON episodes (touched);
CREATE TABLE IF NOT EXISTS actions (
    key TEXT NOT NULL, n INTEGER NOT NULL, action BLOB NOT NULL, PRIMARY KEY (key, n)
) WITHOUT ROWID;
"""


class SqliteLog:
    """A SQLite file for the workers of one box. Calls are short local transactions, made on the event
    loop; WAL lets readers run beside the one writer, and `synchronous=NORMAL` does not fsync every
    commit (a power cut may lose the last steps; a killed process loses nothing)."""

    def __init__(self, path: str, per_owner: int, idle_timeout_s: float) -> None:
        self.per_owner = per_owner
        self.idle_timeout_s = idle_timeout_s
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def _write(self, statements: list[tuple[str, Any]]) -> list[int]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            counts = [db.execute(sql, args).rowcount for sql, args in statements]
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return counts

    async def create(self, key: str, head: bytes, owner: str) -> None:
        now = time.time()
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for (old,) in db.execute(
                "SELECT key FROM episodes WHERE owner = ? AND key != ? ORDER BY touched DESC LIMIT -1 OFFSET ?",
                (owner, key, self.per_owner - 1),
            ).fetchall():
                db.execute("DELETE FROM episodes WHERE key = ?", (old,))
                db.execute("DELETE FROM actions WHERE key = ?", (old,))
            db.execute("DELETE FROM actions WHERE key = ?", (key,))
            db.execute("INSERT OR REPLACE INTO episodes VALUES (?, ?, ?, 0, ?)", (key, owner, head, now))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    async def append(self, key: str, index: int, actions: list[bytes]) -> bool:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            moved = db.execute(
                "UPDATE episodes SET length = length + ?, touched = ? WHERE key = ? AND length = ?",
                (len(actions), time.time(), key, index),
            ).rowcount
            if moved:
                db.executemany(
                    "INSERT INTO actions VALUES (?, ?, ?)", [(key, index + i, a) for i, a in enumerate(actions)]
                )
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return bool(moved)

    async def load(self, key: str) -> Logged | None:
        row = self._db.execute("SELECT head, length FROM episodes WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        actions = [a for (a,) in self._db.execute("SELECT action FROM actions WHERE key = ? ORDER BY n", (key,))]
        return Logged(row[0], actions[: row[1]])

    async def length(self, key: str) -> int | None:
        row = self._db.execute("SELECT length FROM episodes WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    async def drop(self, key: str) -> None:
        self._write([("DELETE FROM episodes WHERE key = ?", (key,)), ("DELETE FROM actions WHERE key = ?", (key,))])

    async def expire(self) -> int:
        deadline = time.time() - self.idle_timeout_s
        counts = self._write(
            [
                ("DELETE FROM episodes WHERE touched < ?", (deadline,)),
                ("DELETE FROM actions WHERE key NOT IN (SELECT key FROM episodes)", ()),
            ]
        )
        return counts[0]

    async def aclose(self) -> None:
        self._db.close()


# Each runs atomically in Redis. A log is a list: the head, then the actions; an owner's episodes a
# sorted set by start time. Both expire with the idle timeout, renewed by every write.
_CREATE = """
local now, idle, per_owner = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - idle)
redis.call('ZREM', KEYS[2], ARGV[5])
while redis.call('ZCARD', KEYS[2]) >= per_owner do
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    redis.call('DEL', ARGV[6] .. oldest)
    redis.call('ZREM', KEYS[2], oldest)
end
redis.call('DEL', KEYS[1])
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], math.ceil(idle))
redis.call('ZADD', KEYS[2], now, ARGV[5])
redis.call('EXPIRE', KEYS[2], math.ceil(idle))
return 1
"""
_APPEND = """
if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) + 1 then return 0 end
redis.call('RPUSH', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


REDIS_CONNECTIONS = 64
# A loaded machine can keep every connection busy for seconds; a save waits rather than fails.
REDIS_WAIT_S = 60.0


class RedisLog:
    """A Redis shared by every process of a deployment (Kubernetes: the manifests' Redis)."""

    PREFIX = "service_incident:log:"
    OWNERS = "service_incident:owner:"

    def __init__(self, url: str, per_owner: int, idle_timeout_s: float) -> None:
        try:
            import redis.asyncio as redis
        except ImportError:
            raise ValueError("EPISODE_STORE names Redis: pip install 'openenv-service-incident[redis]'") from None
        self.per_owner = per_owner
        self.idle_timeout_s = idle_timeout_s
        # Sessions wait for one of a few connections rather than each opening its own (or failing).
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=REDIS_CONNECTIONS, timeout=REDIS_WAIT_S)
        self._redis = redis.Redis(connection_pool=pool)
        self._create = self._redis.register_script(_CREATE)
        self._append = self._redis.register_script(_APPEND)

    async def create(self, key: str, head: bytes, owner: str) -> None:
        args: list[bytes | str | float] = [head, time.time(), self.idle_timeout_s, self.per_owner, key, self.PREFIX]
        await self._create(keys=[self.PREFIX + key, self.OWNERS + owner], args=args)

    async def append(self, key: str, index: int, actions: list[bytes]) -> bool:
        ttl = max(1, round(self.idle_timeout_s))
        return bool(await self._append(keys=[self.PREFIX + key], args=[index, ttl, *actions]))

    async def load(self, key: str) -> Logged | None:
        items: list[bytes] = await self._redis.lrange(self.PREFIX + key, 0, -1)  # type: ignore[assignment]
        return Logged(items[0], items[1:]) if items else None

    async def length(self, key: str) -> int | None:
        size = await self._redis.llen(self.PREFIX + key)
        return size - 1 if size else None

    async def drop(self, key: str) -> None:
        await self._redis.delete(self.PREFIX + key)

    async def expire(self) -> int:
        return 0  # Redis expires the keys itself

    async def aclose(self) -> None:
        await self._redis.aclose()


def open_log(
    store: str, capacity: int, per_owner: int, idle_timeout_s: float, clock: Clock = time.monotonic
) -> EpisodeLog:
    """The log `store` (the EPISODE_STORE setting) names; `clock` times the in-memory one."""
    if store == "memory":
        return MemoryLog(capacity, per_owner, idle_timeout_s, clock)
    url = urlsplit(store)
    if url.scheme == "sqlite":
        return SqliteLog(url.path, per_owner, idle_timeout_s)
    if url.scheme in ("redis", "rediss", "unix"):
        return RedisLog(store, per_owner, idle_timeout_s)
    raise ValueError(f"EPISODE_STORE must be memory, sqlite:///path or redis://host:port/db, not {store!r}")
