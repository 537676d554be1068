"""What the LLM agent sends, per mode: prompt characters per episode and what the last turn adds.

The real `LLMAgent` builds its prompts; a stand-in for the model endpoint answers each call with
the expert reference agent's action (so every mode plays the same episodes) and counts the
characters of the messages it is sent (about 4 per token). Every evaluation incident is played
in-process, with text replies and with tool calls.
    python bench/bench_prompts.py [--episodes N]
"""

from __future__ import annotations

import argparse
import json
import statistics
from types import SimpleNamespace
from typing import Any

import anyio
import msgspec

from service_incident.harness import report
from service_incident.harness.evaluation import Policy, evaluate, plan, reference_policy
from service_incident.harness.llm import MODES, LLMAgent, LLMSettings
from service_incident.harness.records import EpisodeRecord, EpisodeSpec
from service_incident.harness.session import InProcess
from service_incident.models import Observation
from service_incident.tasks import TASKS


class ExpertEndpoint:
    """`client.chat.completions.create` of an endpoint whose model is the expert reference agent."""

    def __init__(self) -> None:
        self.chat = SimpleNamespace(completions=self)
        self.action: dict[str, Any] = {}
        self.last_added = 0  # characters of the last message sent

    async def create(self, *, messages: list[dict[str, Any]], tools: list[Any] | None = None, **_: Any) -> Any:
        sent = sum(len(json.dumps(m)) for m in messages) + len(json.dumps(tools or []))
        self.last_added = len(json.dumps(messages[-1]))
        name = self.action["action"]
        arguments = json.dumps({k: v for k, v in self.action.items() if k != "action"})
        if tools:
            call = SimpleNamespace(
                id=f"call_{len(messages)}", type="function", function=SimpleNamespace(name=name, arguments=arguments)
            )
            message = SimpleNamespace(content=None, tool_calls=[call])
        else:
            message = SimpleNamespace(content=json.dumps(self.action), tool_calls=None)
        return SimpleNamespace(
            choices=[SimpleNamespace(message=message)], usage=SimpleNamespace(prompt_tokens=sent, completion_tokens=0)
        )

    async def close(self) -> None:
        pass


def measure(specs: list[EpisodeSpec], mode: str, reply: str) -> tuple[list[EpisodeRecord], list[int]]:
    """Records (prompt_tokens holds characters here) and the characters each episode's last turn added."""
    agent = LLMAgent(LLMSettings(api_key="unused", mode=mode, reply=reply))  # type: ignore[arg-type]
    endpoint = ExpertEndpoint()
    agent.client = endpoint  # type: ignore[assignment]
    last_added: list[int] = []

    def policy_for(spec: EpisodeSpec) -> Policy:
        chat, expert = agent(spec), reference_policy("expert")(spec)

        async def policy(observation: Observation) -> Any:
            endpoint.action = msgspec.to_builtins(await expert(observation))
            endpoint.action.pop("metadata", None)
            turn = await chat(observation)
            if turn.action is not None and turn.action.__struct_config__.tag in observation.terminal_actions:
                last_added.append(endpoint.last_added)
            return turn

        return policy

    async def run() -> list[EpisodeRecord]:
        return await evaluate(policy_for, specs, sessions=InProcess(), concurrency=1)

    return anyio.run(run), last_added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=None, help="the first N incidents of each task (all)")
    args = parser.parse_args()
    specs = plan(TASKS.values(), args.episodes)
    print(f"{len(specs)} episodes, the expert's actions; characters (about 4 per token)\n")
    print("| mode | replies | prompt characters / episode | calls / episode | last turn adds |")
    print("|---|---|---:|---:|---:|")
    for reply in ("text", "tools"):
        for mode in MODES:
            records, last_added = measure(specs, mode, reply)
            assert not any(r.error for r in records), [r.error for r in records if r.error][:3]
            summary = report.summarize(records)
            calls = statistics.fmean(r.steps for r in records)
            print(
                f"| {mode} | {reply} | {summary.prompt_tokens:,.0f} | {calls:.1f} | "
                f"{statistics.fmean(last_added):,.0f} |"
            )


if __name__ == "__main__":
    main()
