"""``OpenAIModel``: any OpenAI-compatible chat completions server, through the official SDK.

``model="openai:gpt-4o-mini"`` calls OpenAI with ``OPENAI_API_KEY``; with
``OPENAI_BASE_URL`` (or ``base_url=``) the same adapter talks to vLLM, Ollama,
llama.cpp's server, llama-cpp-python's server or LM Studio, which need no key (a
placeholder is sent). Options can ride in the spec: ``openai:MODEL?max_tokens=256&prefill=assistant``.
What this adapter does about the servers' differences is listed in docs/servers.md.

* **Both protocols.** Native tool calls map to ``tools`` / ``tool_calls`` / role
  ``tool`` messages (results in call order, parallel calls included; arguments that
  are not valid JSON stay the raw string so the engine can tell the model). For text
  ReAct the scratchpad goes at the end of the last user message (``prefill="user"``,
  works everywhere) or as a final assistant message (``prefill="assistant"``, for
  servers that continue it: llama.cpp's server, Ollama, vLLM with
  ``extra_body={"continue_final_message": True, "add_generation_prompt": False}``).
* **Streaming** (default): text deltas go to ``on_delta`` as they arrive; usage comes
  from the final chunk (``stream_options={"include_usage": True}``).
* **Errors** become ``ModelError`` messages that say what to fix; 429, 5xx, timeouts
  and dropped connections are retried with backoff; a prompt that does not fit raises
  ``ContextTooLong``. A parameter the server rejects as unsupported (``stop`` on some
  reasoning models, ``max_tokens`` where ``max_completion_tokens`` is wanted,
  ``stream_options`` on old servers, ``parallel_tool_calls``) is dropped or renamed once
  and remembered.
* **Images** (``supports_images``: true for OpenAI's vision models by their name,
  ``images=True|False`` to say so for another): a user message's images are
  ``image_url`` parts holding a ``data:`` URL; a tool message holds text only, so the
  images of the tool results of one step follow them in one user message.
* **Tool choice.** ``tool_choice="auto" | "none" | "required"``, or a tool's name to force
  a call of that tool, is sent with every request that offers tools (a name only where
  that tool is offered: the last request of a run, asking for an answer, offers none).
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
from reactchat.models._window import Window, openai_compatible_window

_INSTALL_HINT = "pip install 'reactchat[openai]'"
_OPENAI_URL = "https://api.openai.com/v1"
_FINISH: dict[str, StopReason] = {
    "stop": "end",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "error",
}
_UNSUPPORTED = re.compile(
    r"unsupported (?:parameter|value)|not supported|unrecognized|unexpected keyword|extra inputs are not permitted"
    r"|unknown (?:parameter|field|argument)",
    re.I,
)
#: the values of ``tool_choice`` that are not a tool's name
_CHOICES = ("auto", "none", "required")
#: parameters the adapter may drop (or rename) when a server says it does not support them
_OPTIONAL = ("stream_options", "stop", "max_tokens", "parallel_tool_calls")
#: models that accept images, by name (OpenAI's and the open vision models servers host)
_VISION = re.compile(
    r"gpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-5|chatgpt-4o|(?:^|/)(?:o1(?!-mini|-preview)|o3(?!-mini)|o4)"
    r"|vision|-vl\b|llava|pixtral|gemma-?3",
    re.I,
)


def _vision_model(model: str) -> bool:
    """Whether the model of this name accepts images (OpenAI's vision models, open ones by name)."""
    return _VISION.search(model) is not None


def _sdk() -> Any:
    try:
        # optional: the [openai] extra
        import openai
    except ImportError as exc:
        raise ImportError(f"the openai: models need the openai SDK: {_INSTALL_HINT}") from exc
    return openai


class OpenAIModel:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    supports_tools = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        prefill: Literal["user", "assistant"] = "user",
        stream: bool = True,
        on_delta: DeltaCallback | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        context_tokens: int | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.5,
        extra_body: dict[str, Any] | None = None,
        http_client: Any = None,
        tool_choice: str | None = None,
        parallel_tool_calls: bool | None = None,
        images: bool | None = None,
    ) -> None:
        if not model:
            raise ConfigError("openai models need a model name: 'openai:gpt-4o-mini'")
        if prefill not in ("user", "assistant"):
            raise ConfigError(f"prefill must be 'user' or 'assistant', not {prefill!r}")
        _sdk()  # fail now, with the install hint, rather than on the first call
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or _OPENAI_URL).rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url == _OPENAI_URL:
                raise ModelError(
                    "OpenAI needs an API key: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local "
                    "OpenAI-compatible server such as vLLM, Ollama or llama.cpp's server)"
                )
            key = "not-needed"  # local servers ignore it, but the SDK insists on one
        self._api_key = key
        self.prefill = prefill
        self.stream = stream
        self.on_delta = on_delta
        self.max_tokens = max_tokens
        self.temperature = temperature
        # OpenAI's own API publishes no window; other servers may (models/_window.py)
        ask = lambda: openai_compatible_window(self.base_url, model, key, http_client)  # noqa: E731
        self._window = Window(context_tokens, None if self.base_url == _OPENAI_URL else ask)
        self.timeout = timeout
        self.policy = RetryPolicy(retries=retries, backoff=backoff)
        self.extra_body = extra_body
        self.tool_choice = tool_choice
        self.parallel_tool_calls = parallel_tool_calls
        #: the model accepts images (by its name unless ``images=`` says)
        self.supports_images = _vision_model(model) if images is None else images
        self._http_client = http_client
        provider = "OpenAI" if self.base_url == _OPENAI_URL else "the OpenAI-compatible server"
        self._endpoint = Endpoint(provider, model, self.base_url, "OPENAI_API_KEY", "openai")
        self._clients = ClientPerLoop(self._new_client)

    @property
    def context_tokens(self) -> int | None:
        """The context window: ``context_tokens=``, or the server's if it says a smaller one."""
        return self._window.tokens

    async def read_context_tokens(self) -> int | None:
        """Ask the server for its window, once (``reactchat.models._window``)."""
        return await self._window.read()

    def _new_client(self) -> Any:
        return _sdk().AsyncOpenAI(
            api_key=self._api_key,
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
        if scratchpad is not None:
            if self.prefill == "assistant":
                messages.append(AssistantMessage(parts=[TextPart(text=scratchpad)]))
            else:
                messages = prefill_as_user(messages, scratchpad)
        params = self._params(request, messages)
        sinks = delta_sinks(self.on_delta, request.on_delta)
        reply = await call_with_retries(lambda: self._call(params, sinks), self._endpoint, self.policy)
        return reply if scratchpad is None else finish_scratchpad(reply, scratchpad, request.stop)

    def _params(self, request: Request, messages: list[Message]) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "messages": _chat(messages)}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
            choice = self._tool_choice([t.name for t in request.tools])
            if choice is not None:
                params["tool_choice"] = choice
            if self.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = self.parallel_tool_calls
        if request.stop:
            params["stop"] = request.stop[:4]  # OpenAI accepts at most four
        max_tokens = request.max_tokens or self.max_tokens
        if max_tokens:
            params["max_tokens"] = max_tokens
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    def _tool_choice(self, offered: list[str]) -> str | dict[str, Any] | None:
        """What to send as ``tool_choice`` with these tools: a forced call names one of them."""
        if self.tool_choice is None or self.tool_choice in _CHOICES:
            return self.tool_choice
        if self.tool_choice not in offered:
            return None
        return {"type": "function", "function": {"name": self.tool_choice}}

    async def _call(self, params: dict[str, Any], sinks: list[DeltaCallback]) -> Reply:
        sent = dict(params)
        for name, replacement in rejected(self._endpoint).items():
            value = sent.pop(name, None)
            if replacement and value is not None:
                sent[replacement] = value
        try:
            if sent.get("stream"):
                return await self._streamed(sent, sinks)
            response = await (await self._clients.get()).chat.completions.create(**sent)
        except (_sdk().BadRequestError, _sdk().UnprocessableEntityError) as exc:  # 400, 422
            if self._learn_rejection(exc, sent):
                return await self._call(params, sinks)
            raise
        return _reply(response)

    def _learn_rejection(self, exc: Exception, sent: dict[str, Any]) -> bool:
        """Remember a parameter the server says it does not support; True to try again."""
        message = server_message(exc)
        if not _UNSUPPORTED.search(message):
            return False
        for name in _OPTIONAL:
            if name in sent and re.search(rf"\b{name}\b", message) and name not in rejected(self._endpoint):
                wanted = "max_completion_tokens" if name == "max_tokens" and "max_completion_tokens" in message else ""
                rejected(self._endpoint)[name] = wanted
                return True
        return False

    async def _streamed(self, params: dict[str, Any], sinks: list[DeltaCallback]) -> Reply:
        stream = await (await self._clients.get()).chat.completions.create(**params)
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: Usage | None = None
        try:
            async for chunk in stream:
                usage = self._chunk(chunk, text, calls) or usage
                finish = next((c.finish_reason for c in chunk.choices or [] if c.finish_reason), finish)
                if chunk.choices and chunk.choices[0].delta is not None and chunk.choices[0].delta.content:
                    await emit_delta(chunk.choices[0].delta.content, sinks)
        except Exception as exc:
            if text:  # the caller has seen deltas: a retry would show them twice
                raise ModelError(f"the stream broke after {len(''.join(text))} characters: {exc}") from exc
            raise
        finally:
            await stream.close()
        parts: list[TextPart | ToolCallPart] = [TextPart(text="".join(text))] if text else []
        for index in sorted(calls):
            slot = calls[index]
            # no id from the server: leave it empty and the engine assigns a unique one
            parts.append(ToolCallPart(id=slot["id"], name=slot["name"], input=parse_arguments(slot["arguments"])))
        return Reply(parts=parts, stop_reason=_stop_reason(finish, bool(calls)), usage=usage)

    @staticmethod
    def _chunk(chunk: Any, text: list[str], calls: dict[int, dict[str, str]]) -> Usage | None:
        """Fold one streamed chunk into the text and tool calls so far; its usage, if any."""
        for choice in chunk.choices or []:
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text.append(delta.content)
            for call in delta.tool_calls or []:
                slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = getattr(call, "id", None) or slot["id"]
                if call.function is not None:
                    name = call.function.name or ""
                    # OpenAI sends the name in the first delta only; llama-cpp-python's server
                    # repeats it in every one, which must not make "calculatorcalculator"
                    if name != slot["name"]:
                        slot["name"] += name
                    slot["arguments"] += call.function.arguments or ""
        return _usage(chunk.usage) if getattr(chunk, "usage", None) else None


def _chat(messages: list[Message]) -> list[dict[str, Any]]:
    """The messages as chat completions messages. A tool message holds text only (the API
    refuses image parts in it), so the images of a run of tool results go in one user
    message after the last of them: between them it would break the run the API expects
    after an assistant message with tool calls."""
    out: list[dict[str, Any]] = []
    images: list[ImagePart] = []
    for message in messages:
        if images and not isinstance(message, ToolResultMessage):
            out.append(_tool_images(images))
            images = []
        out.append(_message(message))
        if isinstance(message, ToolResultMessage):
            images.extend(message.images)
    if images:
        out.append(_tool_images(images))
    return out


def _image_url(image: ImagePart) -> dict[str, Any]:
    url = f"data:{image.media_type};base64,{base64.b64encode(image.data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_images(images: list[ImagePart]) -> dict[str, Any]:
    """The user message that carries the images of the tool results before it."""
    names = ", ".join(image.name for image in images)
    said = {"type": "text", "text": f"The images the tool results above returned: {names}"}
    return {"role": "user", "content": [said, *(_image_url(image) for image in images)]}


def _message(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        if message.images:
            parts = [{"type": "text", "text": message.content}] if message.content else []
            return {"role": "user", "content": [*parts, *(_image_url(image) for image in message.images)]}
        return {"role": "user", "content": message.content}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    calls = [
        {
            "id": p.id,
            "type": "function",
            "function": {"name": p.name, "arguments": p.input if isinstance(p.input, str) else json.dumps(p.input)},
        }
        for p in message.parts
        if isinstance(p, ToolCallPart)
    ]
    # "" rather than null beside tool calls: OpenAI takes both, but llama-cpp-python's
    # server answers null with a 500 ("7 validation errors")
    out: dict[str, Any] = {"role": "assistant", "content": message.text}
    if calls:
        out["tool_calls"] = calls
    return out


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        input_tokens=prompt,
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        evaluated_tokens=prompt - cached if cached else None,
    )


def _stop_reason(finish: str | None, has_calls: bool) -> StopReason:
    if has_calls:
        return "tool_use"  # some servers (Ollama) say "stop" after tool calls
    return _FINISH.get(finish or "stop", "end")


def _reply(response: Any) -> Reply:
    if not response.choices:
        raise ModelError(f"the server returned no choices: {str(response)[:300]}")
    choice = response.choices[0]
    message = choice.message
    parts: list[TextPart | ToolCallPart] = []
    if message.content:
        parts.append(TextPart(text=message.content))
    for call in message.tool_calls or []:
        function = call.function
        parts.append(
            ToolCallPart(
                id=getattr(call, "id", None) or "", name=function.name, input=parse_arguments(function.arguments)
            )
        )
    return Reply(
        parts=parts,
        stop_reason=_stop_reason(choice.finish_reason, bool(message.tool_calls)),
        usage=_usage(response.usage),
    )


def from_spec(rest: str) -> OpenAIModel:
    """``openai:MODEL`` or ``openai:MODEL?max_tokens=256&prefill=assistant&stream=false``
    (also ``tool_choice=NAME``, ``parallel_tool_calls=false`` and ``images=true``)."""
    model, options = spec_options(rest, {"tool_choice": str, "parallel_tool_calls": bool, "images": bool})
    return OpenAIModel(model, **options)
