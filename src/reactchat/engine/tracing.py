"""OpenTelemetry spans and metrics, named by the GenAI semantic conventions.

* ``invoke_agent {agent}`` (INTERNAL) around each run of a turn, with a ``link skipped``
  event for each link of its message not read; a sub-agent's run nests under the
  ``execute_tool`` span of the call that started it;
* ``chat {model}`` (CLIENT) around each model call;
* ``execute_tool {tool}`` (INTERNAL) around each tool call;
* the histograms ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.

Optional, and free when unused: with OpenTelemetry not installed (``pip install
'reactchat[otel]'``) every hook is a no-op and nothing is imported. Nothing is ever
exported by reactchat itself: spans go to the tracer provider the application configured
(``opentelemetry.trace.set_tracer_provider``, or ``configure(tracer_provider=...)``);
while no provider is set, no span is made at all.

Message and tool content (prompts, replies, tool arguments and results, exception
messages) is recorded only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is
``true``. Otherwise a failure records its ``error.type`` (the exception's class) and
nothing of its message.

A turn paused on an ``ask_user`` question and its resumption (in this process or another,
days later) are two spans with the same ``gen_ai.conversation.id`` (the session); the
resumed one carries a link to the one that asked (``TurnTrace.traceparent`` is stored with
the question).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from reactchat.messages import LinkSkippedEvent, Reply, Request, StopReason, TextPart, ToolCallPart, Usage
from reactchat.tools import PauseForUser

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: the instrumentation scope
SCOPE = "reactchat"
#: bucket boundaries the conventions advise for the two histograms
TOKEN_BUCKETS = [4.0**i for i in range(14)]
DURATION_BUCKETS = [0.01 * 2**i for i in range(14)]
#: well-known ``gen_ai.provider.name`` values by model spec prefix
PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "local": "llama.cpp", "scripted": "reactchat"}
_FINISH: dict[StopReason, str] = {
    "end": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "error": "error",
}


def capture_content() -> bool:
    """Whether message and tool content may be recorded (the user opted in)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def model_names(model_name: str) -> tuple[str, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` for a ``Model.name`` such as ``openai:gpt-4o``."""
    prefix, sep, rest = model_name.partition(":")
    if not sep:
        return "reactchat", model_name
    return PROVIDER_NAMES.get(prefix, prefix), rest.partition("?")[0] or model_name


# ----------------------------------------------------------------- the OTel handles


class _Otel:
    """The OpenTelemetry API modules and the instruments, loaded on the first traced turn."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        # optional: the [otel] extra, loaded on the first traced turn
        from opentelemetry import metrics, trace

        self.trace = trace
        self.metrics = metrics
        self.explicit = tracer_provider is not None or meter_provider is not None
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def configured(self) -> bool:
        """Whether anything would receive spans or metrics: providers given to ``configure``,
        or global ones the application set. Until then the API's proxies drop everything,
        and not making spans at all saves most of their cost."""
        if self.explicit:
            return True
        unset_tracer = isinstance(self.trace.get_tracer_provider(), self.trace.ProxyTracerProvider)
        # the API's placeholder meter provider has no public class to test against
        unset_meter = type(self.metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider"
        return not (unset_tracer and unset_meter)


_state: dict[str, _Otel | None] = {}


def _otel() -> _Otel | None:
    """The handles, or None when OpenTelemetry is not installed (checked once)."""
    try:
        return _state["otel"]
    except KeyError:
        pass
    try:
        installed = importlib.util.find_spec("opentelemetry.trace") is not None
    except ImportError:  # the parent namespace is missing
        installed = False
    _state["otel"] = _Otel() if installed else None
    return _state["otel"]


def configure(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Send reactchat's spans and metrics to these providers instead of the global ones.

    Not needed when the application set the global providers. Raises ``ImportError``
    (naming the extra) when OpenTelemetry is not installed.
    """
    try:
        _state["otel"] = _Otel(tracer_provider, meter_provider)
    except ImportError as exc:
        raise ImportError(f"tracing needs OpenTelemetry: pip install 'reactchat[otel]' ({exc})") from exc


# ------------------------------------------------------------------------ the traces


class TurnTrace:
    """The ``invoke_agent`` span of one run of a turn, and the factory of its children."""

    traceparent = ""

    def chat(self, request: Request) -> ChatTrace:
        """A ``chat`` span for one model call (use as a context manager)."""
        return _NO_CHAT

    def tool(self, name: str, call_id: str, arguments: Any) -> ToolTrace:
        """An ``execute_tool`` span for one tool call (use as a context manager)."""
        return _NO_TOOL

    def link_skipped(self, link: LinkSkippedEvent) -> None:
        """A ``link skipped`` event on the span: a link of the message was not read before the
        run (its address and the reason are the message's content: recorded only with capture on)."""

    def end(self, status: str, usages: Sequence[Usage] = (), error: BaseException | None = None) -> None:
        """Close the span: how the run ended (``done``, ``waiting``, ``stopped``, ``cancelled``...)
        and the usage of its model calls."""


class ChatTrace:
    """The ``chat`` span of one model call; ``finish(reply, usage)`` records what came back."""

    def __enter__(self) -> ChatTrace:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        return None

    def finish(self, reply: Reply, usage: Usage) -> None:
        """Record the reply's finish reason and token counts."""


class ToolTrace:
    """The ``execute_tool`` span of one call: ``failed(error)`` when the tool raised,
    ``result(text)`` for the observation (recorded only when capture is on)."""

    def __enter__(self) -> ToolTrace:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        return None

    def failed(self, error: BaseException) -> None:
        """The tool raised ``error`` (it becomes an error observation): record its type."""

    def result(self, text: str) -> None:
        """Record the observation the call produced."""


#: the trace of a run when OpenTelemetry is not installed: every hook does nothing
NO_TRACE = TurnTrace()
_NO_CHAT = ChatTrace()
_NO_TOOL = ToolTrace()


def start_turn(agent: str, session: str, model_name: str, resumes: Sequence[str] = ()) -> TurnTrace:
    """The ``invoke_agent`` span for a run of a turn (a no-op without OpenTelemetry).

    ``resumes`` are the ``traceparent`` of runs this one continues (a paused turn): the
    new span links to them. The span is not made current (the run is a generator that
    yields); its children name it as their parent.
    """
    otel = _otel()
    if otel is None or not otel.configured():
        return NO_TRACE
    return _Turn(otel, agent, session, model_name, resumes)


class _Turn(TurnTrace):
    def __init__(self, otel: _Otel, agent: str, session: str, model_name: str, resumes: Sequence[str]) -> None:
        trace = otel.trace
        self.otel = otel
        self.session = session
        self.provider, self.model = model_names(model_name)
        self.capture = capture_content()
        links = [trace.Link(context) for context in map(_span_context, resumes) if context is not None]
        self.span = otel.tracer.start_span(
            f"invoke_agent {agent}",
            kind=trace.SpanKind.INTERNAL,
            links=links,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": session,
                "gen_ai.provider.name": self.provider,
                "gen_ai.request.model": self.model,
            },
        )
        self.context = trace.set_span_in_context(self.span)
        span_context = self.span.get_span_context()
        if span_context.is_valid:
            self.traceparent = (
                f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"
            )

    def chat(self, request: Request) -> ChatTrace:
        return _Chat(self, request)

    def child(self, name: str, kind: Any, attributes: dict[str, Any]) -> tuple[Any, Any]:
        """A span under this run's, made current: ``(span, scope)``; ``scope.__exit__`` ends currency."""
        attributes["gen_ai.conversation.id"] = self.session
        span = self.otel.tracer.start_span(name, context=self.context, kind=kind, attributes=attributes)
        scope = _current(self.otel, span)
        scope.__enter__()
        return span, scope

    def tool(self, name: str, call_id: str, arguments: Any) -> ToolTrace:
        return _Tool(self, name, call_id, arguments)

    def link_skipped(self, link: LinkSkippedEvent) -> None:
        attributes: dict[str, Any] = {"reactchat.link.refused": link.refused}
        if self.capture:
            attributes |= {"url.full": link.url, "reactchat.link.reason": link.reason}
        self.span.add_event("link skipped", attributes)

    def end(self, status: str, usages: Sequence[Usage] = (), error: BaseException | None = None) -> None:
        span = self.span
        if span.is_recording():
            span.set_attribute("reactchat.turn.status", status)
            span.set_attribute("gen_ai.usage.input_tokens", sum(u.input_tokens for u in usages))
            span.set_attribute("gen_ai.usage.output_tokens", sum(u.output_tokens for u in usages))
            if error is not None:
                _fail(self.otel, span, error, self.capture)
        span.end()


def _span_context(traceparent: str) -> Any:
    # optional: the [otel] extra (only traced turns link spans)
    from opentelemetry.trace import SpanContext, TraceFlags

    try:
        _, trace_id, span_id, flags = traceparent.split("-")
        return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))
    except ValueError:
        return None


def _fail(otel: _Otel, span: Any, error: BaseException, capture: bool) -> None:
    """Mark a span failed: ``error.type`` always, the message only with capture on."""
    span.set_attribute("error.type", type(error).__qualname__)
    description = f"{type(error).__name__}: {error}" if capture else None
    span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR, description))
    if capture:
        span.record_exception(error)


@contextmanager
def _current(otel: _Otel, span: Any) -> Iterator[None]:
    """Make ``span`` current while the body runs (it holds no yield of the run's generator)."""
    with otel.trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
        yield


class _Chat(ChatTrace):
    def __init__(self, turn: _Turn, request: Request) -> None:
        self.turn = turn
        self.request = request
        self.started = 0.0
        self._scope: Any = None

    def __enter__(self) -> ChatTrace:
        turn = self.turn
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": turn.provider,
            "gen_ai.request.model": turn.model,
        }
        self.span, self._scope = turn.child(f"chat {turn.model}", turn.otel.trace.SpanKind.CLIENT, attributes)
        if self.span.is_recording():
            request = self.request
            if request.max_tokens:
                self.span.set_attribute("gen_ai.request.max_tokens", request.max_tokens)
            if request.stop:
                self.span.set_attribute("gen_ai.request.stop_sequences", list(request.stop))
            if turn.capture:
                self.span.set_attribute("gen_ai.input.messages", _messages_json(request))
        self.started = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        seconds = time.perf_counter() - self.started
        self._scope.__exit__(kind, error, tb)
        otel, turn = self.turn.otel, self.turn
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": turn.provider,
            "gen_ai.request.model": turn.model,
        }
        if error is not None:
            attributes["error.type"] = type(error).__qualname__
            if self.span.is_recording():
                _fail(otel, self.span, error, turn.capture)
        otel.duration.record(seconds, attributes)
        self.span.end()

    def finish(self, reply: Reply, usage: Usage) -> None:
        span, turn, otel = self.span, self.turn, self.turn.otel
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": turn.provider,
            "gen_ai.request.model": turn.model,
            "gen_ai.response.model": turn.model,
        }
        otel.tokens.record(usage.input_tokens, {**attributes, "gen_ai.token.type": "input"})
        otel.tokens.record(usage.output_tokens, {**attributes, "gen_ai.token.type": "output"})
        if not span.is_recording():
            return
        span.set_attribute("gen_ai.response.model", turn.model)
        span.set_attribute("gen_ai.response.finish_reasons", [_FINISH.get(reply.stop_reason, reply.stop_reason)])
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if usage.evaluated_tokens is not None:
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
        if usage.estimated:
            span.set_attribute("reactchat.usage.estimated", True)
        if turn.capture:
            span.set_attribute("gen_ai.output.messages", _reply_json(reply))


class _Tool(ToolTrace):
    def __init__(self, turn: _Turn, name: str, call_id: str, arguments: Any) -> None:
        self.turn = turn
        self.name = name
        self.call_id = call_id
        self.arguments = arguments
        self._scope: Any = None

    def __enter__(self) -> ToolTrace:
        turn = self.turn
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": self.name,
            "gen_ai.tool.call.id": self.call_id,
            "gen_ai.tool.type": "function",
        }
        self.span, self._scope = turn.child(f"execute_tool {self.name}", turn.otel.trace.SpanKind.INTERNAL, attributes)
        if turn.capture and self.span.is_recording():
            self.span.set_attribute("gen_ai.tool.call.arguments", _json(self.arguments))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        self._scope.__exit__(kind, error, tb)
        if error is not None and self.span.is_recording():
            if isinstance(error, PauseForUser):
                self.span.set_attribute("reactchat.tool.paused", True)
            else:
                _fail(self.turn.otel, self.span, error, self.turn.capture)
        self.span.end()

    def failed(self, error: BaseException) -> None:
        if self.span.is_recording():
            _fail(self.turn.otel, self.span, error, self.turn.capture)

    def result(self, text: str) -> None:
        if self.turn.capture and self.span.is_recording():
            self.span.set_attribute("gen_ai.tool.call.result", text)


# -------------------------------------------------------- content, when captured


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _parts(parts: Sequence[TextPart | ToolCallPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "content": part.text})
        else:
            out.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.input})
    return out


def _messages_json(request: Request) -> str:
    """The request's messages in the conventions' ``gen_ai.input.messages`` shape."""
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if message.role == "assistant":
            messages.append({"role": "assistant", "parts": _parts(message.parts)})
        elif message.role == "tool":
            part = {"type": "tool_call_response", "id": message.call_id, "response": message.content}
            messages.append({"role": "tool", "parts": [part]})
        else:
            messages.append({"role": message.role, "parts": [{"type": "text", "content": message.content}]})
    return json.dumps(messages, ensure_ascii=False)


def _reply_json(reply: Reply) -> str:
    finish = _FINISH.get(reply.stop_reason, reply.stop_reason)
    return json.dumps(
        [{"role": "assistant", "parts": _parts(reply.parts), "finish_reason": finish}], ensure_ascii=False
    )
