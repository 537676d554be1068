"""The held-out tiers: incidents from a key, the same for it anywhere, from the open tiers' distribution;
no channel of a held-out episode names its generator seed or its answers; without a key, no such task.

Every channel is played over real sockets against our server (the page is in test_web_page.py); each
leak check is also run on the open tier, where the postmortem does name the faults, so a check that
could not see a leak would fail there.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from conftest import running_server
from distribution_support import disagreements
from holdout_support import KEY, OTHER_KEY, leaks
from inference_support import parse_transcript, run_inference
from mcp import Client
from websockets.asyncio.client import connect

from service_incident import dataset, holdout
from service_incident.client.base import ws_url
from service_incident.environment import MAX_SEED, ServiceIncidentEnvironment
from service_incident.harness.records import decode
from service_incident.holdout import HoldoutKey
from service_incident.models import InvalidReset, parse_action
from service_incident.server.settings import Settings
from service_incident.tasks import HELD_OUT, TASKS

SEED = 3  # the index of the held-out incident each channel plays
TIER = "expert"
TASK = holdout.task_id(TIER)


def script(services: list[str]) -> list[dict[str, Any]]:
    """A few looks, a bad target (an error reply), then the answer: an episode to its end."""
    looks = [{"action": "inspect_traces", "target": services[0]}, {"action": "inspect_logs", "target": services[1]}]
    return [
        *looks,
        {"action": "restart", "target": "nowhere"},
        {"action": "declare", "target": services[0], "severity": "P1"},
    ]


def judge(texts: list[str], task: str) -> None:
    if task == TASK:
        assert leaks(texts) == []
    else:  # the open tier's last observation tells its answers: the check sees them
        assert any(not found.startswith("seed") for found in leaks(texts))


TASKS_PLAYED = [TASK, f"gen_{TIER}"]
Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@asynccontextmanager
async def asking(url: str) -> AsyncIterator[tuple[Ask, list[str]]]:
    """A WebSocket session: `ask` sends a frame and returns the reply; every reply's text is kept, in order."""
    texts: list[str] = []
    async with connect(ws_url(url)) as ws:

        async def ask(frame: dict[str, Any]) -> dict[str, Any]:
            await ws.send(json.dumps(frame))
            texts.append(str(await ws.recv()))
            return json.loads(texts[-1])

        yield ask, texts


# --- the key and its incidents -----------------------------------------------------------------


def test_a_key_gives_the_same_incidents_and_another_key_other_ones() -> None:
    first, again, other = HoldoutKey(KEY), HoldoutKey(KEY), HoldoutKey(OTHER_KEY)
    for tier in holdout.TIERS:
        mine = [msgspec.json.encode(first.incident(tier, index)) for index in range(8)]
        assert mine == [msgspec.json.encode(again.incident(tier, index)) for index in range(8)]
        assert len(set(mine)) == len(mine)
        theirs = [msgspec.json.encode(other.incident(tier, index)) for index in range(8)]
        assert not set(mine) & set(theirs)
        assert {first.incident_id(tier, i) for i in range(8)}.isdisjoint(other.incident_id(tier, i) for i in range(8))
    # Above every public seed: no open episode plays a held-out incident.
    seeds = [first.generator_seed(tier, index) for tier in holdout.TIERS for index in (0, 1, MAX_SEED)]
    assert min(seeds) >= holdout.SEED_BASE > dataset.TRAIN_SEED_BASE + MAX_SEED
    assert len(set(seeds)) == len(seeds)
    assert KEY not in repr(first) and first.fingerprint == hashlib.sha256(KEY.encode()).hexdigest()[:16]


def test_the_incidents_are_the_same_in_another_interpreter() -> None:
    """Nothing per process (hash randomisation, global random state) enters the derivation."""
    program = (
        "import hashlib, msgspec, random, sys\n"
        "from service_incident.holdout import HoldoutKey\n"
        "random.seed(sys.argv[2])\n"
        "key = HoldoutKey(sys.argv[1])\n"
        "print(hashlib.sha256(b''.join(msgspec.json.encode(key.incident(t, i)) for t in ('hard', 'expert') "
        "for i in range(5))).hexdigest())\n"
    )

    def digest(hash_seed: str) -> str:
        result = subprocess.run(
            [sys.executable, "-c", program, KEY, hash_seed],
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": hash_seed},
            check=True,
        )
        return result.stdout.strip()

    key = HoldoutKey(KEY)
    here = hashlib.sha256(
        b"".join(msgspec.json.encode(key.incident(t, i)) for t in holdout.TIERS for i in range(5))
    ).hexdigest()
    assert digest("1") == digest("4242") == here


def test_held_out_episodes_are_deterministic_and_keyed() -> None:
    def frames(key: str) -> list[bytes]:
        env = ServiceIncidentEnvironment(holdout_key=key)
        observation = env.reset(task_id=TASK, seed=SEED, episode_id="same")
        played = [msgspec.json.encode(observation)]
        for action in script(observation.services):
            played.append(msgspec.json.encode(env.step(parse_action(action))))
        return played

    assert frames(KEY) == frames(KEY)
    assert frames(KEY)[0] != frames(OTHER_KEY)[0]


def test_held_out_episodes_pay_nothing_before_the_end() -> None:
    """Dense shaping pays for inspecting a root: on a held-out tier it would be an oracle."""
    env = ServiceIncidentEnvironment(holdout_key=KEY)
    with pytest.raises(InvalidReset, match=r"held out.*final"):
        env.reset(task_id=TASK, seed=SEED, reward_mode="dense")
    observation = env.reset(task_id=TASK, seed=SEED)
    rewards = []
    for action in script(observation.services):
        observation = env.step(parse_action(action))
        rewards.append(observation.reward)
        if observation.done:
            break
    assert all(reward == 0.0 for reward in rewards[:-1])


@pytest.mark.parametrize("tier", holdout.TIERS)
def test_held_out_incidents_come_from_the_open_tiers_distribution(tier: str) -> None:
    key = HoldoutKey(KEY)
    held_out = [key.incident(tier, index) for index in range(150)]
    trained = [dataset.training_incident(tier, seed) for seed in range(150)]
    assert not disagreements(held_out, trained), tier
    assert HELD_OUT[holdout.task_id(tier)].max_steps == TASKS[f"gen_{tier}"].max_steps


def test_training_incident_ids_do_not_spell_their_seed() -> None:
    env = ServiceIncidentEnvironment()
    first = env.reset(task_id="gen_hard", seed=12345).incident_id
    assert "12345" not in first and first.startswith("gen_hard-train-")
    assert env.reset(task_id="gen_hard", seed=12345).incident_id == first
    assert env.reset(task_id="gen_hard", seed=12346).incident_id != first


# --- without a key -----------------------------------------------------------------------------


def test_without_a_key_the_tasks_are_not_offered_in_process() -> None:
    env = ServiceIncidentEnvironment()
    for task_id in HELD_OUT:
        with pytest.raises(InvalidReset, match=f"{task_id}.*held out.*HOLDOUT_KEY"):
            env.reset(task_id=task_id, seed=0)
    with pytest.raises(ValueError, match="at least 16 characters"):
        ServiceIncidentEnvironment(holdout_key="short")
    with pytest.raises(ValueError, match="invalid server setting"):
        Settings.load({"HOLDOUT_KEY": "short"})
    keyed = ServiceIncidentEnvironment(holdout_key=KEY)
    with pytest.raises(InvalidReset, match="not part of task"):  # a held-out incident is drawn by its seed only
        keyed.reset(task_id=TASK, incident_id="gen_expert-0001")


async def test_without_a_key_the_server_lists_no_held_out_task_and_refuses_one(server_url: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        assert {task["id"] for task in http.get("/tasks").json()}.isdisjoint(HELD_OUT)
        assert http.get("/health").json()["holdout_fingerprint"] is None
        reset = http.post("/reset", json={"task_id": TASK, "seed": 0})
    assert 400 <= reset.status_code < 500 and "HOLDOUT_KEY" in reset.text
    async with connect(ws_url(server_url)) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK}}))
        frame = json.loads(await ws.recv())
    assert frame["type"] == "error" and "HOLDOUT_KEY" in frame["data"]["message"]
    async with Client(f"{server_url}/mcp") as client:
        result = await client.call_tool("reset", {"task_id": TASK})
    assert result.is_error is True and "HOLDOUT_KEY" in result.content[0].text


# --- with a key: what each channel shows -------------------------------------------------------


@pytest.fixture(scope="module")
def keyed_url() -> Iterator[str]:
    with running_server(holdout_key=KEY) as url:
        yield url


def test_the_catalogue_lists_the_held_out_tasks_without_incidents_and_health_names_the_key(keyed_url: str) -> None:
    with httpx.Client(base_url=keyed_url) as http:
        tasks, health = http.get("/tasks"), http.get("/health")
    listed = {task["id"]: task for task in tasks.json()}
    assert all(listed[task_id]["incidents"] == [] and listed[task_id]["held_out"] for task_id in HELD_OUT)
    assert health.json()["holdout_fingerprint"] == HoldoutKey(KEY).fingerprint
    assert leaks([tasks.text, health.text]) == []


@pytest.mark.parametrize("task", TASKS_PLAYED)
async def test_websocket_frames_name_no_seed_and_no_answer(keyed_url: str, task: str) -> None:
    async with asking(keyed_url) as (ask, texts):
        reset = await ask({"type": "reset", "data": {"task_id": task, "seed": SEED}})
        observation = reset["data"]["observation"]
        for action in script(observation["services"]):
            last = await ask({"type": "step", "data": action})
        state = await ask({"type": "state"})
        await ask({"type": "reset", "data": {"task_id": task, "incident_id": "gen_expert-0001"}})
    assert last["data"]["done"] is True
    if task == TASK:
        assert observation["incident_id"] == HoldoutKey(KEY).incident_id(TIER, SEED)
        assert "seed" not in observation["metadata"] and state["data"]["seed"] is None
        assert last["data"]["observation"]["postmortem"] is None
        assert last["data"]["observation"]["score"] is not None
    judge(texts, task)


@pytest.mark.parametrize("task", TASKS_PLAYED)
def test_http_replies_name_no_seed_and_no_answer(keyed_url: str, task: str) -> None:
    with httpx.Client(base_url=keyed_url) as http:
        reset = http.post("/reset", json={"task_id": task, "seed": SEED})
        episode = {"Episode-Id": reset.json()["episode_id"]}
        replies = [reset]
        services = reset.json()["observation"]["services"]
        for action in script(services):
            replies.append(http.post("/step", json={"action": action}, headers=episode))
        grade = http.get("/grade", headers=episode)
        replies += [
            http.get("/state", headers=episode),
            grade,
            http.post("/step", json={"action": {"action": "declare", "target": "x"}}, headers=episode),
        ]
        # OpenEnv's JSON-RPC dialect at /mcp plays an HTTP episode of its own, here of the same incident.
        create = {"task_id": task, "seed": SEED}
        replies.append(
            http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": create})
        )
        session = replies[-1].json()["result"]["session_id"]
        call = {"name": "inspect_traces", "arguments": {"target": services[0]}, "session_id": session}
        replies.append(http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
        replies.append(http.get("/state", params={"episode_id": session}))
    assert set(grade.json()) == {"episode_id", "done", "score", "breakdown"} and grade.json()["score"] is not None
    assert replies[-1].json()["task_id"] == task and replies[-2].json()["result"]["isError"] is False
    judge([reply.text for reply in replies], task)


@pytest.mark.parametrize("task", TASKS_PLAYED)
async def test_mcp_replies_name_no_seed_and_no_answer(keyed_url: str, task: str) -> None:
    texts: list[str] = []
    async with Client(f"{keyed_url}/mcp") as client:
        reset = await client.call_tool("reset", {"task_id": task, "seed": SEED})
        results = [reset]
        for action in script(reset.structured_content["observation"]["services"]):
            name = action.pop("action")
            results.append(await client.call_tool(name, action))
    for result in results:
        texts += [content.text for content in result.content]
        texts.append(json.dumps(result.structured_content))
    assert results[-1].structured_content["done"] is True
    judge(texts, task)


# --- evaluating on them ------------------------------------------------------------------------


def test_inference_plays_the_held_out_tiers_of_a_keyed_server_and_in_process_alike(
    keyed_url: str, tmp_path: Path
) -> None:
    tasks = ",".join(HELD_OUT)
    remote = run_inference(
        "--env-url", keyed_url, "--tasks", tasks, "--episodes", "2", "--output", str(tmp_path / "remote"), cwd=tmp_path
    )
    assert remote.returncode == 0, remote.stderr
    assert {e.task for e in parse_transcript(remote.stdout)} == {f"{t}/{i:04d}" for t in HELD_OUT for i in range(2)}
    records = decode((tmp_path / "remote" / "episodes.jsonl").read_bytes())
    key = HoldoutKey(KEY)
    assert sorted(r.incident for r in records) == sorted(key.incident_id(t, i) for t in holdout.TIERS for i in range(2))
    report = (tmp_path / "remote" / "report.md").read_text()
    assert all(f"| {task_id} (held out) |" in report for task_id in HELD_OUT)
    assert "`holdout_fingerprint` at /health" in report
    raw = (tmp_path / "remote" / "episodes.jsonl").read_text()
    assert leaks([raw, report, remote.stdout, remote.stderr]) == []

    local = run_inference(
        "--in-process",
        "--tasks",
        tasks,
        "--episodes",
        "2",
        "--output",
        str(tmp_path / "local"),
        cwd=tmp_path,
        env={"HOLDOUT_KEY": KEY},
    )
    assert local.returncode == 0, local.stderr
    played = decode((tmp_path / "local" / "episodes.jsonl").read_bytes())

    def steps(rs: list[Any]) -> dict[str, list[bytes]]:
        unnamed = {"metadata": {}}
        return {
            r.name: [msgspec.json.encode(msgspec.structs.replace(s.observation, **unnamed)) for s in r.trace]
            for r in rs
        }

    assert steps(played) == steps(records)
    assert f"key fingerprint `{key.fingerprint}`" in (tmp_path / "local" / "report.md").read_text()
    # The embedded server takes the key from the run's environment too.
    embedded = run_inference(
        "--tasks",
        "holdout_hard",
        "--episodes",
        "1",
        "--output",
        str(tmp_path / "embedded"),
        cwd=tmp_path,
        env={"HOLDOUT_KEY": KEY},
    )
    assert embedded.returncode == 0, embedded.stderr
    first = decode((tmp_path / "embedded" / "episodes.jsonl").read_bytes())
    assert steps(first) == {"holdout_hard/0000": steps(records)["holdout_hard/0000"]}


def test_inference_in_process_without_the_key_says_which_setting_is_missing(tmp_path: Path) -> None:
    result = run_inference("--in-process", "--tasks", "holdout_hard", "--output", str(tmp_path / "out"), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert "HOLDOUT_KEY" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    short = run_inference(
        "--in-process",
        "--tasks",
        "holdout",
        "--output",
        str(tmp_path / "out"),
        cwd=tmp_path,
        env={"HOLDOUT_KEY": "short"},
    )
    assert short.returncode == 2 and "HOLDOUT_KEY: a holdout key needs at least 16 characters" in short.stderr


# --- open tiers: a seed the server drew is told only once the episode is over ------------------
#
# The generator is public: with the seed of an open generated episode, `generate(tier, seed)` gives
# its incident and labels. A seed the client gave is its own; one the server drew stays with the
# server until the end, when it is reported so that the episode can be replayed.

OPEN_TASK = "gen_hard"


def withheld_until_the_end(texts: list[str], last: dict[str, Any], state: dict[str, Any]) -> int:
    """The drawn seed the last observation and the state after the end report; no earlier text names it."""
    seed = last["metadata"]["seed"]
    assert isinstance(seed, int) and state["seed"] == seed and state["done"] is True
    assert [text for text in texts if str(seed) in text] == []
    return seed


def test_a_drawn_seed_is_reported_in_process_only_once_the_episode_is_over() -> None:
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id=OPEN_TASK)
    during = [msgspec.json.encode(observation).decode(), msgspec.json.encode(env.state).decode()]
    assert "seed" not in observation.metadata and env.state.seed is None
    for action in script(observation.services):
        observation = env.step(parse_action(action))
        during.append(msgspec.json.encode(observation if not observation.done else env.state).decode())
    assert observation.done
    seed = withheld_until_the_end(during[:-1], msgspec.to_builtins(observation), msgspec.to_builtins(env.state))
    # Reported so that the episode can be replayed: the same seed plays the same incident.
    replay = ServiceIncidentEnvironment().reset(task_id=OPEN_TASK, seed=seed)
    assert replay.incident_id == observation.incident_id
    # A seed the client gave is its own: echoed from the start.
    assert replay.metadata["seed"] == seed and env.reset(task_id=OPEN_TASK, seed=SEED).metadata["seed"] == SEED
    assert env.state.seed == SEED


async def test_websocket_frames_withhold_a_drawn_seed_until_the_end(keyed_url: str) -> None:
    async with asking(keyed_url) as (ask, texts):
        reset = await ask({"type": "reset", "data": {"task_id": OPEN_TASK}})
        midway = await ask({"type": "state"})
        assert "seed" not in reset["data"]["observation"]["metadata"] and midway["data"]["seed"] is None
        for action in script(reset["data"]["observation"]["services"]):
            last = await ask({"type": "step", "data": action})
        state = await ask({"type": "state"})
    assert last["data"]["done"] is True
    withheld_until_the_end(texts[:-2], last["data"]["observation"], state["data"])


def test_http_replies_withhold_a_drawn_seed_until_the_end(keyed_url: str) -> None:
    with httpx.Client(base_url=keyed_url) as http:
        reset = http.post("/reset", json={"task_id": OPEN_TASK})
        episode = {"Episode-Id": reset.json()["episode_id"]}
        replies = [reset, http.get("/state", headers=episode)]
        assert replies[-1].json()["seed"] is None
        for action in script(reset.json()["observation"]["services"]):
            replies.append(http.post("/step", json={"action": action}, headers=episode))
        state = http.get("/state", headers=episode)
        grade = http.get("/grade", headers=episode)
        # OpenEnv's JSON-RPC dialect: a session created without a seed, then a look and its state.
        create = http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {"task_id": OPEN_TASK}},
        )
        session = create.json()["result"]["session_id"]
        call = {"name": "inspect_traces", "arguments": {"target": "x"}, "session_id": session}
        rpc = [
            create,
            http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}),
            http.get("/state", params={"episode_id": session}),
        ]
    assert rpc[-1].json()["seed"] is None and "seed" not in create.text
    withheld_until_the_end(
        [r.text for r in replies[:-1]] + [grade.text], replies[-1].json()["observation"], state.json()
    )


async def test_mcp_replies_withhold_a_drawn_seed_until_the_end(keyed_url: str) -> None:
    texts: list[str] = []
    async with Client(f"{keyed_url}/mcp") as client:
        reset = await client.call_tool("reset", {"task_id": OPEN_TASK})
        results = [reset]
        for action in script(reset.structured_content["observation"]["services"]):
            name = action.pop("action")
            results.append(await client.call_tool(name, action))
    for result in results[:-1]:
        texts += [content.text for content in result.content]
        texts.append(json.dumps(result.structured_content))
    last = results[-1].structured_content
    assert last["done"] is True and "seed" not in reset.structured_content["observation"]["metadata"]
    seed = last["observation"]["metadata"]["seed"]
    assert isinstance(seed, int) and [text for text in texts if str(seed) in text] == []
