"""The LLM baseline: a chat model behind any OpenAI-compatible endpoint plays the on-call engineer.

Configured the usual way: `API_BASE_URL`, `MODEL_NAME`, and the key in `HF_TOKEN`, `API_KEY` or
`OPENAI_API_KEY`. Each turn the model gets the task, the allowed actions as JSON Schemas and the
current observation, and answers with one JSON object (a tool call is accepted too). A reply that
cannot be turned into an action is handed back to the model with the reason on its next turn.
Rate limits (429) and server errors (5xx) are retried by the OpenAI client with exponential backoff,
honouring Retry-After.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from msgspec import Struct

from ..models import ACTION_TYPES, Action, InvalidAction, Observation, parse_action
from ..tasks import TASKS
from ..world import P0_ERROR_RATE, P0_LATENCY_MS, P1_ERROR_RATE, P1_LATENCY_MS
from .evaluation import EpisodeSpec, Policy, Turn

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam

DEFAULT_API_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_MODEL = "Qwen/Qwen2.5-72B-Instruct"
KEY_VARIABLES = ("HF_TOKEN", "API_KEY", "OPENAI_API_KEY")
# A reply is one small JSON object; the headroom is for a rationale.
MAX_TOKENS = 512
# Requests in flight to the provider; typical hosted tiers throttle well before 8.
DEFAULT_LLM_CONCURRENCY = 4
MAX_RETRIES = 5
REQUEST_TIMEOUT_S = 120.0
# How much of an unusable reply is quoted back to the model.
QUOTE_CHARS = 400


class MissingApiKey(RuntimeError):
    """The LLM agent was chosen but no key is set; there is no silent fallback to a heuristic."""


class LLMSettings(Struct, frozen=True, kw_only=True):
    base_url: str = DEFAULT_API_BASE_URL
    model: str = DEFAULT_MODEL
    api_key: str
    concurrency: int = DEFAULT_LLM_CONCURRENCY
    temperature: float = 0.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        environ = os.environ if environ is None else environ
        key = next((environ[name] for name in KEY_VARIABLES if environ.get(name)), None)
        if key is None:
            raise MissingApiKey(
                f"the llm agent needs an API key: set one of {', '.join(KEY_VARIABLES)} "
                "(and API_BASE_URL and MODEL_NAME for your provider)"
            )
        return cls(
            base_url=environ.get("API_BASE_URL") or DEFAULT_API_BASE_URL,
            model=environ.get("MODEL_NAME") or DEFAULT_MODEL,
            api_key=key,
            **overrides,
        )


class LLMAgent:
    """A policy factory: one client and one request limit shared by every episode, a chat per episode.

    `async with LLMAgent(settings) as agent: await evaluate(agent, ...)`.
    """

    def __init__(self, settings: LLMSettings) -> None:
        # Imported here: the openai package takes about 0.5 s to import, a quarter of a reference-agent run.
        from openai import AsyncOpenAI

        self.settings = settings
        self.name = settings.model
        self.client = AsyncOpenAI(
            base_url=settings.base_url, api_key=settings.api_key, max_retries=MAX_RETRIES, timeout=REQUEST_TIMEOUT_S
        )
        self._limiter = anyio.CapacityLimiter(settings.concurrency)

    def __call__(self, spec: EpisodeSpec) -> Policy:
        task = TASKS.get(spec.task_id)
        return _Chat(self, task.description if task else f"Task {spec.task_id}.")

    async def complete(
        self, messages: list[ChatCompletionMessageParam]
    ) -> tuple[ChatCompletionMessage | None, int, int]:
        """One chat completion: its message (None if it has no choice) and the prompt and completion tokens."""
        async with self._limiter:
            response = await self.client.chat.completions.create(
                model=self.settings.model,
                messages=messages,
                temperature=self.settings.temperature,
                max_tokens=MAX_TOKENS,
            )
        usage = response.usage
        prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        return (response.choices[0].message if response.choices else None), prompt, completion

    async def __aenter__(self) -> LLMAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.close()


class _Chat:
    """One episode's policy. The observation carries the episode so far (everything seen, every
    action taken), so each turn is a fresh two-message prompt: no chat history piles up."""

    def __init__(self, agent: LLMAgent, task: str) -> None:
        self.agent = agent
        self.task = task
        self.feedback: str | None = None

    async def __call__(self, observation: Observation) -> Turn:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": system_prompt(self.task, observation.available_actions)},
            {"role": "user", "content": user_prompt(observation, self.feedback)},
        ]
        message, prompt, completion = await self.agent.complete(messages)
        reply = (message.content if message else None) or ""
        try:
            if message is None:
                raise InvalidReply("the response holds no message")
            action = parse_reply(message)
        except InvalidReply as exc:
            self.feedback = f"Your previous reply could not be used: {exc}. It began: {reply[:QUOTE_CHARS]!r}"
            return Turn(action=None, error=f"unusable reply: {exc}", reply=reply, prompt_tokens=prompt,
                        completion_tokens=completion)
        self.feedback = None
        return Turn(action=action, reply=reply or _tool_text(message), prompt_tokens=prompt,
                    completion_tokens=completion)


# --- prompts ----------------------------------------------------------------------------------

_BY_NAME = {cls.__struct_config__.tag: cls for cls in ACTION_TYPES}
# Fields of the observation the prompt leaves out: the schema covers the actions, the rest is
# bookkeeping or only set once the episode is over.
_HIDDEN = ("task_id", "available_actions", "score", "breakdown", "metadata", "done", "visible_logs")


def action_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one action, without the fields a model never needs to send."""
    cls = _BY_NAME[name]
    schema = msgspec.json.schema(cls)["$defs"][cls.__name__]
    schema.pop("title", None)
    schema["properties"].pop("metadata", None)
    return schema


def system_prompt(task: str, actions: list[str]) -> str:
    schemas = "\n".join(json.dumps(action_schema(name)) for name in actions if name in _BY_NAME)
    return f"""You are the on-call site reliability engineer and you have just been paged.
{task}

Nothing is visible until you look: inspect the services you choose, follow the evidence from the
paged services to the root cause (callers' logs name the upstream they called; not every clue is
true), remediate if the task allows it, then declare. Severity follows user-facing impact:
P0 when a user-facing service fails at least {P0_ERROR_RATE:.0%} of requests, or its p99 latency is at
least {P0_LATENCY_MS:.0f} ms, or a datastore refuses or loses writes; P1 when it fails at least
{P1_ERROR_RATE:.0%} of requests or p99 is at least {P1_LATENCY_MS:.0f} ms; P2 otherwise.

Answer every turn with exactly one action: a single JSON object, no other text, matching one of
these JSON Schemas (the field "action" selects which). A short "rationale" is welcome.
{schemas}"""


def user_prompt(observation: Observation, feedback: str | None = None) -> str:
    shown = {k: v for k, v in msgspec.to_builtins(observation).items() if k not in _HIDDEN}
    logs = "\n".join(f"--- logs of {name} ---\n{text}" for name, text in observation.visible_logs.items())
    left = observation.max_steps - observation.step_count
    parts = [
        f"Observation after step {observation.step_count} of {observation.max_steps}:",
        json.dumps(shown, separators=(",", ":")),
        logs,
        f"Steps left: {left}." + (" This is your last step." if left == 1 else ""),
    ]
    if feedback:
        parts.append(feedback)
    parts.append("Your action, as one JSON object:")
    return "\n\n".join(part for part in parts if part)


# --- replies ----------------------------------------------------------------------------------


class InvalidReply(ValueError):
    """A reply that is not one valid action; the message says why, for the model to correct."""


_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


def parse_reply(message: ChatCompletionMessage) -> Action:
    """The action in a reply: its first tool call, else the first JSON object in its text."""
    if message.tool_calls:
        call = message.tool_calls[0]
        function = getattr(call, "function", None)
        if function is None:
            raise InvalidReply("the tool call has no function")
        try:
            arguments = json.loads(function.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise InvalidReply(f"the tool call's arguments are not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise InvalidReply("the tool call's arguments are not a JSON object")
        # A tool per action is named after it; a generic tool carries "action" in its arguments.
        return _validate({"action": function.name, **arguments})
    return _validate(first_object(message.content or ""))


def first_object(text: str) -> dict[str, Any]:
    """The first JSON object in free text: reasoning blocks and code fences are ignored."""
    text = _FENCE.sub("", _THINKING.sub("", text))
    decoder = json.JSONDecoder()
    for start in (i for i, char in enumerate(text) if char == "{"):
        try:
            found, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(found, dict):
            return found
    raise InvalidReply("the reply holds no JSON object")


def _validate(payload: dict[str, Any]) -> Action:
    try:
        return parse_action(payload)
    except InvalidAction as exc:
        raise InvalidReply(f"not a valid action ({exc})") from None


def _tool_text(message: ChatCompletionMessage) -> str:
    calls = message.tool_calls or []
    return "; ".join(f"{c.function.name}({c.function.arguments})" for c in calls if getattr(c, "function", None))
