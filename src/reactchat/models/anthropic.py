"""``AnthropicModel``: Claude through the official ``anthropic`` SDK (Messages API).

``model="anthropic:claude-sonnet-4-6"`` with ``ANTHROPIC_API_KEY`` (or
``ANTHROPIC_AUTH_TOKEN``); ``ANTHROPIC_BASE_URL`` / ``base_url=`` for a proxy. Options
can ride in the spec: ``anthropic:MODEL?max_tokens=1024&stream=false``.

* **Text ReAct** uses Anthropic's native assistant prefill: the scratchpad is the final
  assistant message and Claude continues it after ``Thought:``. The API rejects a
  prefill that ends in whitespace, so it is sent right-stripped (the reply then starts
  with the space). Models that refuse prefill get the scratchpad appended to the last
  user message instead: ``prefill="auto"`` does so for Claude 4.6 and later (they
  answer "This model does not support assistant message prefill") and for any model
  that refuses it once, which is remembered.
* **Native tools**: ``tool_use`` blocks out, ``tool_result`` blocks back — all results
  of one step in a single user message, in the order of the calls. Streamed tool input
  that is not valid JSON stays the raw string so the engine can tell the model.
* **Images** (``supports_images``): ``image`` blocks with their base64 bytes, in the
  user's message and inside a ``tool_result`` (which holds text and images).
* **Streaming** (default) assembles the stream events; text deltas go to ``on_delta``.
* **Errors**: as for the OpenAI adapter (``_http``): 429, 529 overloaded, 5xx and
  timeouts are retried with backoff; a prompt that is too long raises ``ContextTooLong``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import Any, Literal

from reactchat.errors import ConfigError
from reactchat.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    Reply,
    Request,
    StopReason,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from reactchat.models._base import ModelError
from reactchat.models._http import (
    ClientPerLoop,
    DeltaCallback,
    Endpoint,
    RetryPolicy,
    call_with_retries,
    delta_sinks,
    emit_delta,
    parse_arguments,
    rejected,
    server_message,
    spec_options,
)
from reactchat.models._http_prefill import finish_scratchpad, prefill_as_user, split_prefill
from reactchat.models._window import Window, anthropic_window, claude_window

_INSTALL_HINT = "pip install 'reactchat[anthropic]'"
_ANTHROPIC_URL = "https://api.anthropic.com"
_STOP: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "stop_sequence",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
    "pause_turn": "end",
    "refusal": "error",
    "model_context_window_exceeded": "max_tokens",
}
Prefill = Literal["auto", "assistant", "user"]
_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:-(\d{1,2})(?!\d))?")


def refuses_prefill(model: str) -> bool:
    """Whether ``model`` is known to refuse assistant prefill: Claude 4.6 and later do
    (one that refuses it at run time is remembered: ``rejected(endpoint)``)."""
    match = _VERSION.search(model)
    if match is None:
        return False  # an unknown name (a proxy's alias): try prefill, learn from a refusal
    return (int(match.group(1)), int(match.group(2) or 0)) >= (4, 6)


def _sdk() -> Any:
    try:
        # optional: the [anthropic] extra
        import anthropic
    except ImportError as exc:
        raise ImportError(f"the anthropic: models need the anthropic SDK: {_INSTALL_HINT}") from exc
    return anthropic


class AnthropicModel:
    """A Claude model behind the Anthropic Messages API."""

    supports_tools = True
    #: every current Claude model reads images
    supports_images = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        prefill: Prefill = "auto",
        stream: bool = True,
        on_delta: DeltaCallback | None = None,
        max_tokens: int = 4096,
        temperature: float | None = None,
        context_tokens: int | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.5,
        http_client: Any = None,
    ) -> None:
        if not model:
            raise ConfigError("anthropic models need a model name: 'anthropic:claude-sonnet-4-6'")
        if prefill not in ("auto", "assistant", "user"):
            raise ConfigError(f"prefill must be 'auto', 'assistant' or 'user', not {prefill!r}")
        _sdk()
        self.model = model
        self.name = f"anthropic:{model}"
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or _ANTHROPIC_URL).rstrip("/")
        key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        self._auth_token = None if key else os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
        if not key and not self._auth_token:
            if self.base_url == _ANTHROPIC_URL:
                raise ModelError("Anthropic needs an API key: set ANTHROPIC_API_KEY")
            key = "not-needed"  # a proxy may hold the key itself
        self._api_key = key
        self.prefill: Prefill = prefill
        self.stream = stream
        self.on_delta = on_delta
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self.policy = RetryPolicy(retries=retries, backoff=backoff)
        self._http_client = http_client
        self._endpoint = Endpoint("Anthropic", model, self.base_url, "ANTHROPIC_API_KEY", "anthropic")
        self._clients = ClientPerLoop(self._new_client)
        # the Models API's max_input_tokens, else Anthropic's documented window (models/_window.py)
        ask = lambda: anthropic_window(self._clients.get, model)  # noqa: E731
        self._window = Window(context_tokens, ask, fallback=claude_window(model))

    @property
    def context_tokens(self) -> int | None:
        """The context window: ``context_tokens=``, or the API's if it says a smaller one."""
        return self._window.tokens

    async def read_context_tokens(self) -> int | None:
        """Ask the Models API for the window, once (``reactchat.models._window``)."""
        return await self._window.read()

    def _new_client(self) -> Any:
        return _sdk().AsyncAnthropic(
            api_key=self._api_key,
            auth_token=self._auth_token,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,  # ours: bounded, with errors that say what to fix
            http_client=self._http_client,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections of the current client (they also close with their event loop)."""
        await self._clients.aclose()

    async def complete(self, request: Request) -> Reply:
        """Send one request (streaming by default) and read the reply."""
        messages, scratchpad = split_prefill(request.messages)
        try:
            reply = await self._complete(request, messages, scratchpad)
        except ModelError as error:
            if scratchpad is None or self.prefill != "auto" or "prefill" not in str(error).casefold():
                raise
            rejected(self._endpoint)["prefill"] = ""  # one refusal is enough for the whole process
            reply = await self._complete(request, messages, scratchpad)
        return reply if scratchpad is None else finish_scratchpad(reply, scratchpad, request.stop)

    async def _complete(self, request: Request, messages: list[Message], scratchpad: str | None) -> Reply:
        prefill: str | None = None
        if scratchpad is not None:
            refused = "prefill" in rejected(self._endpoint) or refuses_prefill(self.model)
            if self.prefill == "user" or (self.prefill == "auto" and refused):
                messages = prefill_as_user(messages, scratchpad)
            else:
                prefill = scratchpad.rstrip()  # the API rejects a prefill ending in whitespace
        params = self._params(request, messages, prefill)
        sinks = delta_sinks(self.on_delta, request.on_delta)
        return await call_with_retries(lambda: self._call(params, sinks), self._endpoint, self.policy)

    def _params(self, request: Request, messages: list[Message], prefill: str | None) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
        chat = _messages([m for m in messages if not isinstance(m, SystemMessage)], tools=bool(request.tools))
        if prefill:
            chat.append({"role": "assistant", "content": prefill})
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": chat,
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
            ]
        if request.stop:
            params["stop_sequences"] = request.stop
        if self.temperature is not None:
            params["temperature"] = self.temperature
        return params

    async def _call(self, params: dict[str, Any], sinks: list[DeltaCallback]) -> Reply:
        client = await self._clients.get()
        if not self.stream:
            return _reply(await client.messages.create(**params))
        return await self._streamed(await client.messages.create(**params, stream=True), sinks)

    async def _streamed(self, stream: Any, sinks: list[DeltaCallback]) -> Reply:
        """Assemble the stream's events into a reply, passing text deltas on as they come."""
        blocks: dict[int, dict[str, Any]] = {}
        stop: str | None = None
        usage = Usage()
        shown = 0
        try:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    usage = _usage(event.message.usage)
                elif kind == "content_block_start":
                    block = event.content_block
                    blocks[event.index] = {
                        "type": block.type,
                        "text": "",
                        "id": getattr(block, "id", ""),
                        "name": getattr(block, "name", ""),
                        "json": "",
                    }
                elif kind == "content_block_delta":
                    slot = blocks.setdefault(event.index, {"type": "text", "text": "", "json": ""})
                    delta = event.delta
                    if delta.type == "text_delta":
                        slot["text"] += delta.text
                        shown += len(delta.text)
                        await emit_delta(delta.text, sinks)
                    elif delta.type == "input_json_delta":
                        slot["json"] += delta.partial_json
                elif kind == "message_delta":
                    stop = event.delta.stop_reason or stop
                    usage = usage.model_copy(update={"output_tokens": event.usage.output_tokens or 0})
        except Exception as exc:
            if shown:  # the caller has seen deltas: a retry would show them twice
                raise ModelError(f"the stream broke after {shown} characters: {server_message(exc) or exc}") from exc
            raise
        finally:
            await stream.close()
        parts: list[TextPart | ToolCallPart] = []
        for index in sorted(blocks):
            slot = blocks[index]
            if slot["type"] == "text" and slot["text"]:
                parts.append(TextPart(text=slot["text"]))
            elif slot["type"] == "tool_use":
                parts.append(ToolCallPart(id=slot["id"], name=slot["name"], input=parse_arguments(slot["json"])))
        return Reply(parts=parts, stop_reason=_STOP.get(stop or "end_turn", "end"), usage=usage)


def _messages(messages: list[Message], tools: bool) -> list[dict[str, Any]]:
    """Chat messages as Anthropic content blocks, consecutive same-role messages merged.

    Without ``tools`` in the request the API refuses ``tool_use``/``tool_result`` blocks
    (the final best-effort call), so earlier calls are then written out as text.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if isinstance(message, AssistantMessage) else "user"
        blocks = _blocks(message, tools)
        if not blocks:
            continue  # the API refuses empty messages
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _image(image: ImagePart) -> dict[str, Any]:
    data = base64.b64encode(image.data).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": data}}


def _blocks(message: Message, tools: bool) -> list[dict[str, Any]]:
    if isinstance(message, UserMessage):
        text = [{"type": "text", "text": message.content}] if message.content else []
        return [*text, *(_image(image) for image in message.images)]
    if isinstance(message, ToolResultMessage):
        images = [_image(image) for image in message.images]
        if not tools:
            return [{"type": "text", "text": f"[{message.name} returned] {message.content}"}, *images]
        # a tool result holds text and images: its content is then a list of blocks
        content: str | list[dict[str, Any]] = message.content
        if images:
            content = [{"type": "text", "text": message.content or "(images)"}, *images]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id, "content": content}
        if message.is_error:
            block["is_error"] = True
        return [block]
    assert isinstance(message, AssistantMessage)
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        elif tools:
            value = part.input if isinstance(part.input, dict) else _as_object(part.input)
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": value})
        else:
            blocks.append({"type": "text", "text": f"[called {part.name} with {json.dumps(part.input)}]"})
    return blocks


def _as_object(raw: str) -> dict[str, Any]:
    # tool_use input must be an object; keep the model's broken arguments visible to it
    return {"invalid_json_arguments": raw}


def _usage(usage: Any) -> Usage:
    fresh = getattr(usage, "input_tokens", 0) or 0
    read = getattr(usage, "cache_read_input_tokens", 0) or 0
    written = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return Usage(
        input_tokens=fresh + read + written,
        output_tokens=getattr(usage, "output_tokens", 0) or 0,
        evaluated_tokens=fresh + written if read else None,
    )


def _reply(message: Any) -> Reply:
    parts: list[TextPart | ToolCallPart] = []
    for block in message.content:
        if block.type == "text" and block.text:
            parts.append(TextPart(text=block.text))
        elif block.type == "tool_use":
            value = block.input if isinstance(block.input, dict) else parse_arguments(str(block.input))
            parts.append(ToolCallPart(id=block.id, name=block.name, input=value))
    return Reply(
        parts=parts, stop_reason=_STOP.get(message.stop_reason or "end_turn", "end"), usage=_usage(message.usage)
    )


def from_spec(rest: str) -> AnthropicModel:
    """``anthropic:MODEL`` or ``anthropic:MODEL?max_tokens=1024&stream=false``."""
    model, options = spec_options(rest)
    return AnthropicModel(model, **options)
