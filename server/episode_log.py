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

import asyncio
import sqlite3
import struct
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from .bounded import BoundedStore, Clock
from .group_commit import GroupCommit


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


# One row per episode, its actions appended to one blob, each behind its length: a step is one UPDATE of
# one row, where a row per action cost a second statement and a second b-tree. (The table is named
# anew: a file an earlier version wrote holds its logs in `episodes` and `actions`, left alone.)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS logs (
    key TEXT PRIMARY KEY, owner TEXT NOT NULL, head BLOB NOT NULL, length INTEGER NOT NULL, touched REAL NOT NULL,
    actions BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS logs_by_owner ON logs (owner, touched);
CREATE INDEX IF NOT EXISTS logs_by_touch ON logs (touched);
"""
_LENGTH = struct.Struct(">I")


def _framed(pieces: list[bytes]) -> bytes:
    """Each piece behind its length, so that no byte inside one (a NUL, a newline) can end it."""
    return b"".join([_LENGTH.pack(len(piece)) + piece for piece in pieces])


def _unframed(blob: bytes) -> list[bytes]:
    pieces, at, size = [], 0, _LENGTH.size
    while at < len(blob):
        (length,) = _LENGTH.unpack_from(blob, at)
        pieces.append(blob[at + size : at + size + length])
        at += size + length
    return pieces


# A write the SQLite writer thread makes inside a batch's transaction; its result is a row count.
SqlWrite = Callable[[sqlite3.Connection], int]


class SqliteLog:
    """A SQLite file for the workers of one box.

    Writes go to one writer thread in batches (group_commit.py): the saves sessions make while one
    transaction commits share the next one, so a step costs one statement rather than a
    transaction of its own, and the event loop never waits on the file or on another worker's lock.
    Reads run on the loop, on a connection of their own, beside the writer (WAL).

    Durability: WAL with `synchronous=NORMAL`. A commit is in the WAL file (so in the OS's cache)
    before its writers hear of it, so a killed process (kill -9 included) loses no step it answered;
    a power cut may lose the last commits, which an fsync per commit would save at a disk flush each."""

    def __init__(self, path: str, per_owner: int, idle_timeout_s: float) -> None:
        self.per_owner = per_owner
        self.idle_timeout_s = idle_timeout_s
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = _connect(path)  # the writer thread's alone from here on
        self._writer.executescript(_SCHEMA)
        self._reader = _connect(path)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episode-log")
        self._commits: GroupCommit[SqlWrite, int] = GroupCommit(self._write_batch)

    async def _write_batch(self, batch: list[SqlWrite]) -> list[int]:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._transact, batch)

    def _transact(self, batch: list[SqlWrite]) -> list[int]:
        """One transaction for the batch (in the writer thread): it lands whole or not at all."""
        db = self._writer
        db.execute("BEGIN IMMEDIATE")
        try:
            counts = [write(db) for write in batch]
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return counts

    async def create(self, key: str, head: bytes, owner: str) -> None:
        await self._commits.write(partial(_create, key, head, owner, self.per_owner, time.time()))

    async def append(self, key: str, index: int, actions: list[bytes]) -> bool:
        return bool(await self._commits.write(partial(_append, key, index, actions, time.time())))

    async def load(self, key: str) -> Logged | None:
        row = self._reader.execute("SELECT head, actions FROM logs WHERE key = ?", (key,)).fetchone()
        return None if row is None else Logged(row[0], _unframed(row[1]))

    async def length(self, key: str) -> int | None:
        row = self._reader.execute("SELECT length FROM logs WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    async def drop(self, key: str) -> None:
        await self._commits.write(partial(_drop, key))

    async def expire(self) -> int:
        return await self._commits.write(partial(_expire, time.time() - self.idle_timeout_s))

    async def aclose(self) -> None:
        await self._commits.aclose()
        self._thread.shutdown()
        self._writer.close()
        self._reader.close()


def _connect(path: str) -> sqlite3.Connection:
    # Not bound to the thread that opens it: the app may be made in one thread and served in another.
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _create(key: str, head: bytes, owner: str, per_owner: int, now: float, db: sqlite3.Connection) -> int:
    db.execute(
        "DELETE FROM logs WHERE key IN (SELECT key FROM logs WHERE owner = ? AND key != ? "
        "ORDER BY touched DESC LIMIT -1 OFFSET ?)",
        (owner, key, per_owner - 1),
    )
    db.execute("INSERT OR REPLACE INTO logs VALUES (?, ?, ?, 0, ?, x'')", (key, owner, head, now))
    return 1


def _append(key: str, index: int, actions: list[bytes], now: float, db: sqlite3.Connection) -> int:
    # `||` answers text; in a UTF-8 database (the default) the cast back gives the very bytes joined.
    return db.execute(
        "UPDATE logs SET length = length + ?, touched = ?, actions = CAST(actions || ? AS BLOB) "
        "WHERE key = ? AND length = ?",
        (len(actions), now, _framed(actions), key, index),
    ).rowcount


def _drop(key: str, db: sqlite3.Connection) -> int:
    return db.execute("DELETE FROM logs WHERE key = ?", (key,)).rowcount


def _expire(deadline: float, db: sqlite3.Connection) -> int:
    return db.execute("DELETE FROM logs WHERE touched < ?", (deadline,)).rowcount


# A batch of writes as one script, run atomically in Redis. A log is a list: the head, then the
# actions; an owner's episodes a sorted set by start time. Both expire with the idle timeout, renewed
# by every write. ARGV: the time, the idle timeout, the bound per owner, the two key prefixes, and one
# blob of the batch's writes in order, each an operation letter and its fields, each field behind its
# length (`_framed`): `c` key owner head (create), `a` key index count actions... (append where the log
# holds `index` actions), `d` key (drop). One argument, so the client packs a batch's bytes once rather
# than an argument per field. The answer is one string, a '1' or '0' a write: an append landed where its
# log ends or not; a drop found the log or not; a create always lands.
_BATCH = """
local now, idle, per_owner = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local logs, owners, blob = ARGV[4], ARGV[5], ARGV[6]
local ttl, at, done = math.max(1, math.ceil(idle)), 1, {}
while at <= #blob do
    local op, key
    op, key, at = struct.unpack('c1>I4c0', blob, at)
    local log = logs .. key
    if op == 'a' then
        local index, count, actions = 0, 0, {}
        index, count, at = struct.unpack('>I4I4', blob, at)
        for j = 1, count do
            actions[j], at = struct.unpack('>I4c0', blob, at)
        end
        if redis.call('LLEN', log) == index + 1 then
            redis.call('RPUSH', log, unpack(actions))
            redis.call('EXPIRE', log, ttl)
            done[#done + 1] = '1'
        else
            done[#done + 1] = '0'
        end
    elseif op == 'c' then
        local owner, head
        owner, head, at = struct.unpack('>I4c0I4c0', blob, at)
        owner = owners .. owner
        redis.call('ZREMRANGEBYSCORE', owner, '-inf', now - idle)
        redis.call('ZREM', owner, key)
        while redis.call('ZCARD', owner) >= per_owner do
            local oldest = redis.call('ZRANGE', owner, 0, 0)[1]
            redis.call('DEL', logs .. oldest)
            redis.call('ZREM', owner, oldest)
        end
        redis.call('DEL', log)
        redis.call('RPUSH', log, head)
        redis.call('EXPIRE', log, ttl)
        redis.call('ZADD', owner, now, key)
        redis.call('EXPIRE', owner, ttl)
        done[#done + 1] = '1'
    else
        done[#done + 1] = tostring(redis.call('DEL', log))
    end
end
return table.concat(done)
"""
_APPEND_AT = struct.Struct(">II")


def _fields(op: bytes, *fields: str | bytes) -> bytes:
    """One write of the batch script: its operation letter, then each field behind its length."""
    return op + _framed([field.encode() if isinstance(field, str) else field for field in fields])


REDIS_CONNECTIONS = 64
# A loaded machine can keep every connection busy for seconds; a save waits rather than fails.
REDIS_WAIT_S = 60.0


class RedisLog:
    """A Redis shared by every process of a deployment (Kubernetes: the manifests' Redis).

    Writes go in batches (group_commit.py): one script a batch, so one round trip and one reply to
    parse, whatever the batch holds. A script runs atomically, so the steps of one episode never
    interleave. It goes by EVAL, not EVALSHA: a couple of kilobytes a batch, and no script that a
    restarted Redis no longer knows. The script names the keys it writes itself, so a Redis Cluster
    could not place them: one Redis (with replicas) is the store. Durable as the Redis is:
    acknowledged means in its memory."""

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
        self._commits: GroupCommit[bytes, bool] = GroupCommit(self._write_batch)

    async def _write_batch(self, batch: list[bytes]) -> list[bool]:
        args = (time.time(), self.idle_timeout_s, self.per_owner, self.PREFIX, self.OWNERS, b"".join(batch))
        done: bytes = await self._redis.execute_command("EVAL", _BATCH, 0, *args)
        return [flag == ord("1") for flag in done]

    async def create(self, key: str, head: bytes, owner: str) -> None:
        await self._commits.write(_fields(b"c", key, owner, head))

    async def append(self, key: str, index: int, actions: list[bytes]) -> bool:
        return await self._commits.write(_fields(b"a", key) + _APPEND_AT.pack(index, len(actions)) + _framed(actions))

    async def load(self, key: str) -> Logged | None:
        items: list[bytes] = await self._redis.lrange(self.PREFIX + key, 0, -1)  # type: ignore[assignment]
        return Logged(items[0], items[1:]) if items else None

    async def length(self, key: str) -> int | None:
        size = await self._redis.llen(self.PREFIX + key)
        return size - 1 if size else None

    async def drop(self, key: str) -> None:
        await self._commits.write(_fields(b"d", key))

    async def expire(self) -> int:
        return 0  # Redis expires the keys itself

    async def aclose(self) -> None:
        await self._commits.aclose()
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
