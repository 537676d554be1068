"""The LLM baseline: a chat model behind any OpenAI-compatible endpoint plays the on-call engineer.

Configured the usual way: `API_BASE_URL`, `MODEL_NAME`, and the key in `HF_TOKEN`, `API_KEY` or
`OPENAI_API_KEY`. Two choices shape the conversation:

- `mode`: "prompt" sends one fresh prompt per turn, the task and the whole observation so far
  (several KB by the end of a long episode); "chat" keeps one conversation per episode, and each
  turn adds only what the last action changed or revealed.
- `reply`: "text" asks for one JSON object in the reply's text (any endpoint); "json" also sets the
  provider's JSON mode (`response_format`); "tools" offers one tool per allowed action, built from
  the same schemas as the actions, and the model calls one.

A reply that cannot be turned into an action is handed back to the model with the reason on its
next turn. Rate limits (429) and server errors (5xx) are retried by the OpenAI client with
exponential backoff, honouring Retry-After; a call that still fails is the endpoint's failure
(`EndpointFailure`), not the agent's. The token limit is sent as `max_tokens`, or as
`max_completion_tokens` once the endpoint has refused the first name (OpenAI's reasoning models do).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec
from msgspec import Struct

from ..integrations.tools import TOOLS_BY_NAME
from ..models import ACTION_TYPES, VIEW_FIELD_PREFIX, Action, InvalidAction, Observation, parse_action
from ..tasks import find_task
from ..world.rubric import SEVERITY_RUBRIC
from .evaluation import EndpointFailure, EpisodeSpec, Policy, Turn

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam

DEFAULT_API_BASE_URL = "https://router.huggingface.co/v1"
DEFAULT_MODEL = "Qwen/Qwen2.5-72B-Instruct"
KEY_VARIABLES = ("HF_TOKEN", "API_KEY", "OPENAI_API_KEY")
Mode = Literal["prompt", "chat"]
Reply = Literal["text", "json", "tools"]
MODES: tuple[Mode, ...] = ("prompt", "chat")
REPLIES: tuple[Reply, ...] = ("text", "json", "tools")
# A reply is one small JSON object; the headroom is for a rationale.
MAX_TOKENS = 512
# The two names endpoints know the completion-token limit by: the older, widest supported first.
TOKEN_LIMIT_NAMES = ("max_tokens", "max_completion_tokens")
# Requests in flight to the provider; typical hosted tiers throttle well before 8.
DEFAULT_LLM_CONCURRENCY = 4
MAX_RETRIES = 5
REQUEST_TIMEOUT_S = 120.0
# After this many calls in a row failed (each after its retries) for want of the endpoint (down,
# throttling, refusing the key or the model), later calls fail at once: an endpoint that is down
# would otherwise cost every remaining episode its full retry schedule.
FAILURES_TO_STOP = 3
# How much of an unusable reply is quoted back to the model.
QUOTE_CHARS = 400


class LLMUnavailable(RuntimeError):
    """The LLM agent was chosen but cannot run; there is no silent fallback to a heuristic."""


class MissingApiKey(LLMUnavailable):
    """No API key is set."""


class LLMSettings(Struct, frozen=True, kw_only=True):
    base_url: str = DEFAULT_API_BASE_URL
    model: str = DEFAULT_MODEL
    api_key: str
    concurrency: int = DEFAULT_LLM_CONCURRENCY
    temperature: float = 0.0
    mode: Mode = "prompt"
    reply: Reply = "text"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> LLMSettings:
        if importlib.util.find_spec("openai") is None:
            raise LLMUnavailable("the llm agent needs the openai package: pip install 'openenv-service-incident[llm]'")
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
        import openai

        self.settings = settings
        self.name = settings.model
        self._openai = openai
        self.client = openai.AsyncOpenAI(
            base_url=settings.base_url, api_key=settings.api_key, max_retries=MAX_RETRIES, timeout=REQUEST_TIMEOUT_S
        )
        self._limiter = anyio.CapacityLimiter(settings.concurrency)
        self.token_limit_name = TOKEN_LIMIT_NAMES[0]
        self._failures = 0
        self._last_failure = ""

    def __call__(self, spec: EpisodeSpec) -> Policy:
        task = find_task(spec.task_id, held_out=True)
        return _Chat(self, task.description if task else f"Task {spec.task_id}.")

    async def complete(
        self, messages: list[ChatCompletionMessageParam], actions: list[str]
    ) -> tuple[ChatCompletionMessage | None, int, int]:
        """One chat completion: its message (None if it has no choice) and the prompt and completion tokens.

        Raises `EndpointFailure` when the endpoint fails the call after its retries.
        """
        if self._failures >= FAILURES_TO_STOP:
            raise EndpointFailure(f"{self._failures} calls in a row failed, not calling again: {self._last_failure}")
        options: dict[str, Any] = {}
        if self.settings.reply == "json":
            options["response_format"] = {"type": "json_object"}
        elif self.settings.reply == "tools":
            options["tools"] = [action_tool(name) for name in actions if name in _BY_NAME]
            options["tool_choice"] = "required"
        async with self._limiter:
            try:
                response = await self._create(messages, options)
            except self._openai.APIError as exc:
                reason = f"model endpoint {self.settings.base_url}: {_reason(exc)}"
                # A request the endpoint refuses (too long, say) says nothing of the next one.
                if not isinstance(exc, self._openai.BadRequestError | self._openai.UnprocessableEntityError):
                    self._failures += 1
                    self._last_failure = reason
                raise EndpointFailure(reason) from None
        self._failures = 0
        usage = response.usage
        prompt, completion = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        return (response.choices[0].message if response.choices else None), prompt, completion

    async def _create(self, messages: list[ChatCompletionMessageParam], options: dict[str, Any]) -> Any:
        for attempt in range(2):
            name = self.token_limit_name
            try:
                # Sent as an extra body field: under exactly the name chosen, whatever the client version knows.
                return await self.client.chat.completions.create(
                    model=self.settings.model,
                    messages=messages,
                    temperature=self.settings.temperature,
                    extra_body={name: MAX_TOKENS},
                    **options,
                )
            except self._openai.BadRequestError as exc:
                if attempt or name not in str(exc):
                    raise
                # The endpoint refused this name for the limit: every later call uses the other one.
                self.token_limit_name = next(other for other in TOKEN_LIMIT_NAMES if other != name)
        raise AssertionError("unreachable")

    async def __aenter__(self) -> LLMAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.close()


def _reason(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {exc}"


class _Chat:
    """One episode's policy: in "prompt" mode each turn is a fresh two-message prompt (the observation
    carries the episode so far); in "chat" mode one conversation grows by what each action revealed."""

    def __init__(self, agent: LLMAgent, task: str) -> None:
        self.agent = agent
        self.task = task
        self.feedback: str | None = None
        self.messages: list[ChatCompletionMessageParam] = []
        self.last: Observation | None = None
        self.pending_calls: list[str] = []  # tool call ids of the last reply, each owed an answer

    async def __call__(self, observation: Observation) -> Turn:
        reply_format = self.agent.settings.reply
        if self.agent.settings.mode == "prompt" or self.last is None:
            self.messages = [
                {"role": "system", "content": system_prompt(self.task, observation.available_actions, reply_format)},
                {"role": "user", "content": user_prompt(observation, self.feedback, reply_format)},
            ]
        else:
            self._add_turn(delta_prompt(self.last, observation, self.feedback, reply_format))
        self.last = observation
        message, prompt, completion = await self.agent.complete(self.messages, observation.available_actions)
        reply = (message.content if message else None) or ""
        self.pending_calls = []
        if message is not None:
            self.messages.append(_as_param(message))
            self.pending_calls = [call.id for call in message.tool_calls or []]
        try:
            if message is None:
                raise InvalidReply("the response holds no message")
            action = parse_reply(message)
        except InvalidReply as exc:
            self.feedback = f"Your previous reply could not be used: {exc}. It began: {reply[:QUOTE_CHARS]!r}"
            return Turn(
                action=None,
                error=f"unusable reply: {exc}",
                reply=reply,
                prompt_tokens=prompt,
                completion_tokens=completion,
            )
        self.feedback = None
        return Turn(
            action=action, reply=reply or _tool_text(message), prompt_tokens=prompt, completion_tokens=completion
        )

    def _add_turn(self, content: str) -> None:
        """What the last action brought, as the answer to its tool call when the model made one."""
        if not self.pending_calls:
            self.messages.append({"role": "user", "content": content})
            return
        first, *others = self.pending_calls
        self.messages.append({"role": "tool", "tool_call_id": first, "content": content})
        # Every call of a reply is owed an answer; only the first one is acted on.
        self.messages += [
            {"role": "tool", "tool_call_id": other, "content": "Not run: one action per turn."} for other in others
        ]


def _as_param(message: ChatCompletionMessage) -> ChatCompletionMessageParam:
    """A reply as the assistant turn of the conversation sent back."""
    param: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        param["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
            if call.type == "function"
        ]
    return param  # type: ignore[return-value]


# --- prompts ----------------------------------------------------------------------------------

_BY_NAME = {cls.__struct_config__.tag: cls for cls in ACTION_TYPES}
# Fields of the observation the prompt leaves out: the schema covers the actions, the rest is
# bookkeeping, only set once the episode is over, or a reward (the agent is not told how it is doing).
_HIDDEN = ("task_id", "available_actions", "score", "breakdown", "metadata", "done", "reward", "as_of")
# Fields of the observation that never change within an episode: a chat turn does not repeat them.
# The chat turn's list of alerts that are still firing, unchanged since the last turn.
STILL_FIRING = "alerts_still_firing_unchanged"
_FIXED = ("incident_id", "title", "services", "topology", "max_steps", "terminal_actions")


def action_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of one action, without the fields a model never needs to send."""
    cls = _BY_NAME[name]
    _, components = msgspec.json.schema_components([cls], ref_template="#/$defs/{name}")
    schema = components.pop(cls.__name__)
    schema.pop("title", None)
    schema["properties"].pop("metadata", None)
    if components:  # types the action refers to
        schema["$defs"] = components
    return schema


def action_tool(name: str) -> dict[str, Any]:
    """One action as a provider tool: the spec MCP and TRL read too (`integrations.tools`)."""
    spec = TOOLS_BY_NAME[name]
    function = {"name": name, "description": spec.description, "parameters": spec.input_schema}
    return {"type": "function", "function": function}


def system_prompt(task: str, actions: list[str], reply: Reply = "text") -> str:
    if reply == "tools":
        answer = (
            'Answer every turn by calling exactly one tool, one tool per action. A short "rationale" is welcome '
            "(required where the task says so)."
        )
    else:
        schemas = "\n".join(json.dumps(action_schema(name)) for name in actions if name in _BY_NAME)
        answer = f"""Answer every turn with exactly one action: a single JSON object, no other text, matching one of
these JSON Schemas (the field "action" selects which). A short "rationale" is welcome (required where
the task says so).
{schemas}"""
    return f"""You are the on-call site reliability engineer and you have just been paged.
{task}

Nothing is visible until you look: inspect the services you choose, follow the evidence from the
paged services to the root cause (not every clue is true), remediate if the task allows it, then
answer as the task says. Each view is stamped with the minute it was taken (as of HH:MM): one from an
earlier step shows the past. Traces break a service's requests down by endpoint, and can be narrowed
to one endpoint or to failed requests. Severity follows user-facing impact:
{SEVERITY_RUBRIC}

{answer}"""


def user_prompt(observation: Observation, feedback: str | None = None, reply: Reply = "text") -> str:
    """The whole observation: the first turn of a chat, every turn of a one-prompt episode."""
    heading = f"Observation after step {observation.step_count} of {observation.max_steps}:"
    return _prompt(heading, msgspec.to_builtins(observation), observation, feedback, reply)


def revealed(before: Observation, after: Observation) -> dict[str, Any]:
    """What changed from one observation to the next: new or changed entries of each mapping, new or
    changed items of each list (an alert whose value moved, the last action in the history), and
    every other changed field; and, under `STILL_FIRING`, the alerts still firing as they were, so
    that a page that did not move is not read as cleared."""
    changed = _changes(before, after)
    still = [f"{a.service} {a.signal}" for a in after.alerts if a.status == "firing" and a in before.alerts]
    return {**changed, STILL_FIRING: still} if still else changed


def _changes(before: Observation, after: Observation) -> dict[str, Any]:
    old, new = msgspec.to_builtins(before), msgspec.to_builtins(after)
    changed: dict[str, Any] = {}
    for key, value in new.items():
        previous = old.get(key)
        if key in _FIXED:
            continue
        if isinstance(value, dict) and isinstance(previous, dict):
            # A view taken again is shown again, under its new minute, even where it reads as it did.
            entries = {
                k: v for k, v in value.items() if previous.get(k) != v or before.taken(key, k) != after.taken(key, k)
            }
            if entries:  # not when entries were only dropped
                changed[key] = entries
        elif value == previous:
            continue
        elif isinstance(value, list) and isinstance(previous, list):
            changed[key] = [item for item in value if item not in previous]
        else:
            changed[key] = value
    return changed


def delta_prompt(before: Observation, after: Observation, feedback: str | None = None, reply: Reply = "text") -> str:
    """A chat turn: only what the last action changed or revealed."""
    changed = revealed(before, after)
    heading = (
        f"After step {after.step_count} of {after.max_steps}, what changed:"
        if set(changed) - {STILL_FIRING}
        else f"After step {after.step_count} of {after.max_steps}, nothing changed."
    )
    return _prompt(heading, changed, after, feedback, reply)


def _prompt(heading: str, fields: dict[str, Any], observation: Observation, feedback: str | None, reply: Reply) -> str:
    """The fields as one JSON line, except text views (`visible_<view>`: service -> text), which are
    printed as they read: `--- logs of db (as of 14:03) ---` and its lines. Every view carries the
    minute it was taken (metrics as their `as_of`)."""
    shown = {k: v for k, v in fields.items() if k not in _HIDDEN}
    views = {k: shown.pop(k) for k in list(shown) if k.startswith(_VIEW) and _is_text_view(shown[k])}
    for key in [k for k in shown if k.startswith(_VIEW)]:
        shown[key] = {name: {"as_of": observation.taken(key, name), **value} for name, value in shown[key].items()}
    left = observation.max_steps - observation.step_count
    parts = [
        heading,
        json.dumps(shown, separators=(",", ":")) if shown else "",
        "\n".join(
            f"--- {key[len(_VIEW) :].replace('_', ' ')} of {name} (as of {observation.taken(key, name)}) ---\n{text}"
            for key, texts in views.items()
            for name, text in texts.items()
        ),
        f"Steps left: {left}." + (" This is your last step." if left == 1 else ""),
        feedback or "",
        "Your action, as one tool call:" if reply == "tools" else "Your action, as one JSON object:",
    ]
    return "\n\n".join(part for part in parts if part)


_VIEW = VIEW_FIELD_PREFIX


def _is_text_view(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(text, str) for text in value.values())


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
    return "; ".join(f"{c.function.name}({c.function.arguments})" for c in calls if c.type == "function")
