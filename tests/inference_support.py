"""Helpers for the inference tests: run inference.py, check OpenEnv's stdout contract, and a scripted
OpenAI-compatible chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serving import serving
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

ROOT = Path(__file__).resolve().parent.parent
INFERENCE = ROOT / "inference.py"
# The reference expert's mean over the evaluation set stays above this (0.69 when last measured;
# 0.89 on the evaluation set before it was rebuilt): a regression guard, not a figure.
EXPERT_FLOOR = 0.6
# Variables that would change what inference.py does; the tests set the ones they need.
CONFIG_VARIABLES = ("ENV_URL", "API_BASE_URL", "MODEL_NAME", "HF_TOKEN", "API_KEY", "OPENAI_API_KEY", "HOLDOUT_KEY")


def inference_environ(env: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in CONFIG_VARIABLES}
    # Loopback traffic (the stub, the servers) must not go through a proxy set in the environment.
    environ["NO_PROXY"] = environ["no_proxy"] = "127.0.0.1,localhost"
    environ.update(env or {})
    return environ


def run_inference(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(INFERENCE), *args],
        cwd=cwd,
        env=inference_environ(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# --- the stdout contract ----------------------------------------------------------------------

START = re.compile(r"\[START\] task=(?P<task>\S+) env=(?P<env>\S+) model=(?P<model>\S+)")
STEP = re.compile(
    r"\[STEP\] step=(?P<step>\d+) action=(?P<action>\S+) reward=(?P<reward>-?\d+\.\d\d) "
    r"done=(?P<done>true|false) error=(?P<error>\S.*)"
)
END = re.compile(
    r"\[END\] success=(?P<success>true|false) steps=(?P<steps>\d+) score=(?P<score>\d\.\d\d) "
    r"rewards=(?P<rewards>(-?\d+\.\d\d(,-?\d+\.\d\d)*)?)"
)


@dataclass
class Episode:
    task: str
    env: str
    model: str
    steps: list[dict[str, str]] = field(default_factory=list)
    end: dict[str, str] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return float(self.end["score"])


def parse_transcript(stdout: str) -> list[Episode]:
    """Every stdout line is one of the three kinds, and each episode's lines form one uninterrupted
    block: [START], [STEP] 1..n, [END] with steps=n and the same rewards."""
    episodes: list[Episode] = []
    current: Episode | None = None
    for number, line in enumerate(stdout.splitlines(), 1):
        if match := START.fullmatch(line):
            assert current is None, f"line {number}: [START] inside an episode"
            current = Episode(match["task"], match["env"], match["model"])
        elif match := STEP.fullmatch(line):
            assert current is not None, f"line {number}: [STEP] outside an episode"
            assert int(match["step"]) == len(current.steps) + 1, f"line {number}: steps out of order"
            assert not current.steps or current.steps[-1]["done"] == "false", f"line {number}: step after done"
            current.steps.append(match.groupdict())
        elif match := END.fullmatch(line):
            assert current is not None, f"line {number}: [END] outside an episode"
            assert int(match["steps"]) == len(current.steps), f"line {number}: steps= disagrees with the [STEP]s"
            rewards = match["rewards"].split(",") if match["rewards"] else []
            assert rewards == [s["reward"] for s in current.steps], f"line {number}: rewards= disagree"
            assert 0.0 <= float(match["score"]) <= 1.0
            current.end = match.groupdict()
            episodes.append(current)
            current = None
        else:
            raise AssertionError(f"line {number} breaks the stdout contract: {line!r}")
    assert current is None, "the last episode has no [END]"
    return episodes


# --- a scripted OpenAI-compatible server --------------------------------------------------------

Reply = tuple[int, dict[str, Any], dict[str, str]]
Entry = Reply | Callable[[dict[str, Any]], Reply]
# Retries in the tests must not wait the client's real backoff.
FAST_RETRY = {"retry-after-ms": "5"}
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


def text(content: str) -> Reply:
    return 200, _completion({"role": "assistant", "content": content}), {}


def tool_call(name: str, arguments: Mapping[str, Any]) -> Reply:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return 200, _completion({"role": "assistant", "content": None, "tool_calls": [call]}), {}


def no_choices() -> Reply:
    return 200, {**_completion({}), "choices": []}, {}


def failure(status: int) -> Reply:
    return status, {"error": {"message": f"scripted {status}", "type": "scripted"}}, FAST_RETRY


def _completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": USAGE,
    }


def observation_of(request: dict[str, Any]) -> dict[str, Any]:
    """The whole observation the episode's first user message holds (its first JSON line): every
    prompt in one-prompt mode, the start of the conversation in chat mode."""
    prompt = request["messages"][1]["content"]
    return json.loads(next(line for line in prompt.splitlines() if line.startswith("{")))


class ScriptedOpenAI:
    """Answers each incident's requests from its own script, in order, so episodes may run in any order;
    once a script is spent, `fallback` answers. Every request is kept, by incident."""

    def __init__(self, scripts: Mapping[str, list[Entry]], fallback: Entry) -> None:
        self.scripts = {incident: list(entries) for incident, entries in scripts.items()}
        self.fallback = fallback
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.statuses: dict[str, list[int]] = {}
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.complete, methods=["POST"])])

    async def complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        incident = observation_of(body)["incident_id"]
        self.requests.setdefault(incident, []).append(body)
        script = self.scripts.get(incident, [])
        entry = script.pop(0) if script else self.fallback
        status, payload, headers = entry(body) if callable(entry) else entry
        self.statuses.setdefault(incident, []).append(status)
        return JSONResponse(payload, status_code=status, headers=headers)

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on a free 127.0.0.1 port in a thread; yields the API base URL."""
        with serving(self.app) as url:
            yield f"{url}/v1"
