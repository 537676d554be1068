"""Incidents generated off the event loop.

A reset of a training or held-out task generates its incident from the seed: milliseconds to tens of
milliseconds of pure computation, during which the event loop would serve nobody else. Here it runs
in a pool of processes of its own (the standard library's), and the incident comes back to be kept
where the environment finds it (`tasks.keep_drawn`): the reset that follows generates nothing, and
every other session's frames are answered meanwhile. The world is deterministic, so the incident is
the one the environment would have generated itself; where the pool cannot give it (a task that is
not generated, a seed out of range, a pool that broke), the environment generates it as before.

The pool's process also plays the incident's reset. What it simulated and rendered there for every
episode of the incident (the states of the minutes up to the page, the pages, the first look's log
lines) comes back with the incident and is kept too (`keep_untouched_steps`, `keep_shared`): some
twenty kilobytes, where simulating and rendering them again would hold the event loop for about half
of the reset, and the first step for the history's alert readings. It renders ahead, too, what the
episodes of the incident show from the incident alone until their first remedy: each service's pods
at the page (what a look at a service shows, unless its containers crash and change them) and its
metrics breakdown, and the states and pages of every step of the task's budget (which every step
asks). That is 1.5-3 ms more of the pool's per draw and some 10-65 KB more to send (gen_easy to
gen_expert), where the serving process would spend about a third of the load test's steps simulating
and rendering them among its other sessions' steps (an agent that remedies early gains less); a
burst of resets waits longer on the pool for it (docs/measurement.md).

The pool's processes run at a lower priority than the server's (`NICENESS`). Sessions that started
together end together, so resets come in bursts that keep the pool busy for a second or more; at the
server's own priority it would take cores from the processes answering steps, whose replies are what
a session waits on between its moves, while a reset's reply waits on the pool anyway.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import secrets
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, NamedTuple

import msgspec

from service_incident.environment import MAX_SEED, ServiceIncidentEnvironment, valid_seed
from service_incident.holdout import HoldoutKey
from service_incident.incidents import Incident
from service_incident.models import ResetRequest
from service_incident.tasks import DEFAULT_TASK, Task, draws_incident, find_task, keep_drawn, resolve_incident
from service_incident.telemetry.state import Shared, keep_shared, portable
from service_incident.world.steps import States, keep_untouched_steps, untouched_steps

from . import collector

# How much lower than the server's a generation process's priority is (nice(2)'s scale, 0-19).
NICENESS = 10


class Drawn(NamedTuple):
    """An incident generated in the pool, and what the pool simulated and rendered of it there for
    every episode of it."""

    incident: Incident
    states: dict[int, States]  # of the steps no remedy reached that the pool simulated: through the budget
    rendered: Shared


class Reset(NamedTuple):
    """A reset ready to begin: its request, and the seed drawn for it if it names none."""

    request: ResetRequest
    drawn_seed: int | None


def reset_arguments(env: ServiceIncidentEnvironment, reset: Reset) -> dict[str, Any]:
    """The arguments of `env.reset` for a reset made ready, its drawn seed the one the environment draws
    (so the seed stays withheld, as a seed the environment drew itself is)."""
    drawn = reset.drawn_seed
    if drawn is not None:
        env.draw_seed = lambda: drawn
    return msgspec.structs.asdict(reset.request)


class Generation:
    """A pool of `processes` generating incidents (none: every reset generates on the event loop)."""

    def __init__(self, processes: int, holdout_key: str | None) -> None:
        self.processes = processes
        self._holdout_key = holdout_key
        self._key = HoldoutKey(holdout_key) if holdout_key is not None else None
        self._pool: ProcessPoolExecutor | None = None

    async def ready(self, request: ResetRequest) -> Reset:
        """Draw the seed of a reset that names none (so that a log replays it), and generate its incident
        off the event loop if it is generated from the seed: the reset then only starts it."""
        drawn = secrets.randbelow(MAX_SEED) if request.seed is None else None
        await self.draw(request, drawn)
        return Reset(request, drawn)

    async def draw(self, request: ResetRequest, drawn_seed: int | None) -> None:
        """Generate the incident a reset will play, if it is generated from its seed, and keep it."""
        if not self.processes:
            return
        seed = request.seed if request.seed is not None else drawn_seed
        task = self._drawn_task(request)
        if task is None or seed is None or not valid_seed(seed):
            return
        try:
            drawn = await asyncio.get_running_loop().run_in_executor(self._running(), _generate, task.id, seed)
        except BrokenProcessPool:
            # A process of the pool died (killed, out of memory): the next draw starts a new pool, and
            # this reset generates in the event loop's process.
            self._pool = None
            return
        if drawn is not None:
            keep_drawn(task, seed, self._key, drawn.incident)
            keep_untouched_steps(drawn.incident, drawn.states)
            keep_shared(drawn.incident, drawn.rendered)

    def close(self) -> None:
        """Stop the pool, waiting for its processes to end (a generation under way finishes first), so
        that none is left behind and nothing of theirs is left for the resource tracker to clean up."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _drawn_task(self, request: ResetRequest) -> Task | None:
        task = find_task(request.task_id or DEFAULT_TASK, held_out=self._key is not None)
        return task if task is not None and draws_incident(task, request.incident_id) else None

    def _running(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # Spawned, not forked: a fork would copy the event loop's threads and sockets half-way.
            self._pool = ProcessPoolExecutor(
                self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=(self._holdout_key,),
            )
        return self._pool


# The holdout key of the process a pool started, which its held-out incidents derive from, and the
# environment that plays each incident's reset there.
_key: HoldoutKey | None = None
_env: ServiceIncidentEnvironment | None = None


def _start(holdout_key: str | None) -> None:
    global _key, _env
    _key = HoldoutKey(holdout_key) if holdout_key is not None else None
    _env = ServiceIncidentEnvironment(holdout_key)
    threading.Thread(target=_exit_with_parent, name="exit-with-server", daemon=True).start()
    collector.settle()
    os.nice(NICENESS)


def _exit_with_parent() -> None:
    """A pool's process waits for work as long as its server lives, and no longer: a server killed
    (or stopped before it could shut its pool down) leaves no process behind, holding its pipes."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        multiprocessing.connection.wait([parent.sentinel])
    os._exit(0)


def _generate(task_id: str, seed: int) -> Drawn | None:
    """In a process of the pool: the incident a reset of the task with this seed plays, and what playing
    its reset simulated and rendered for every episode of it, with what its episodes show from the
    incident alone until their first remedy rendered ahead through the task's budget; None where no
    incident is to be had (the environment then says why, in its own words)."""
    task = find_task(task_id, held_out=_key is not None)
    if task is None or _env is None:
        return None
    try:
        incident = resolve_incident(task, None, seed, _key)
    except (KeyError, ValueError):
        return None
    _env.reset(task_id=task_id, seed=seed)  # plays the incident just kept, rendering its reset
    _env.render_ahead()
    return Drawn(incident, untouched_steps(incident), portable(incident))
