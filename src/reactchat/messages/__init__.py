"""Typed messages, model replies and the events of a run.

Three families, all pydantic models with a ``Literal`` discriminator:

* **messages** (``SystemMessage``, ``UserMessage``, ``AssistantMessage``,
  ``ToolResultMessage``): what a protocol sends to a model; a user message and a tool
  result may carry images (``ImagePart``);
* **replies** (``Reply`` with ``TextPart`` / ``ToolCallPart`` parts): what a model
  sends back, with its ``stop_reason`` and ``usage``;
* **events** (``UserEvent``, ``ThoughtEvent``, ``ActionEvent``, ``ObservationEvent``,
  ``QuestionEvent``, ``AnswerEvent``, ``ErrorEvent``): what a run streams to callers
  *and* what a store persists. The state of a session is derived from its events.
  ``LinkSkippedEvent`` says a link of the message was not read before the turn ran.
  ``DeltaEvent`` (streamed model text) is streamed only, never stored.

``EVENTS`` is the one JSON adapter for events (``EVENTS.validate_json(...)``,
``EVENTS.dump_json(...)``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from reactchat.messages._fast import numbered, trusted

ToolInput = dict[str, Any] | str
#: what a waiting turn waits for: an ask_user question, an approval, a call a crash left in
#: doubt, or more budget
PauseKind = Literal["question", "approval", "in_doubt", "budget"]
StopReason = Literal["end", "tool_use", "stop_sequence", "max_tokens", "error"]


class _Model(BaseModel):
    # schemas are built on first use, which keeps `import reactchat` fast
    model_config = ConfigDict(extra="forbid", defer_build=True)


# --------------------------------------------------------------------- model I/O


class Usage(_Model):
    """Token counts reported by a model for one call."""

    input_tokens: int = 0
    output_tokens: int = 0
    #: prompt tokens actually evaluated (the rest came from a prefix cache), when known
    evaluated_tokens: int | None = None
    #: the model that reported these counts (``Model.name``: ``openai:gpt-4o-mini``), to price them
    model: str = ""
    #: the server reported no usage: reactchat counted the text's characters instead
    estimated: bool = False

    @property
    def cache_read_tokens(self) -> int:
        """Prompt tokens served from the provider's (or llama.cpp's) prefix cache."""
        return max(0, self.input_tokens - _evaluated(self))

    def __add__(self, other: Usage) -> Usage:
        return Usage.sum((self, other))

    @classmethod
    def sum(cls, usages: Iterable[Usage]) -> Usage:
        """The counts of several calls added up; ``model`` is kept when they all name the same one."""
        input_tokens = output_tokens = evaluated = 0
        cached, estimated, models = False, False, set()
        for usage in usages:
            input_tokens += usage.input_tokens
            output_tokens += usage.output_tokens
            # a call that reported no cache evaluated its whole prompt
            evaluated += _evaluated(usage)
            cached = cached or usage.evaluated_tokens is not None
            estimated = estimated or usage.estimated
            models.add(usage.model)
        models.discard("")
        # sums of validated counts: not validated again (once per run, and per ``+``)
        values = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "evaluated_tokens": evaluated if cached else None,
            "model": models.pop() if len(models) == 1 else "",
            "estimated": estimated,
        }
        return trusted(cls, values)

    def stamped(self, model: str) -> Usage:
        """These counts, named as the model ``model``'s (a copy; these are unchanged)."""
        return trusted(Usage, {**self.__dict__, "model": model})


def _evaluated(usage: Usage) -> int:
    return usage.input_tokens if usage.evaluated_tokens is None else usage.evaluated_tokens


class TextPart(_Model):
    """A run of text in a model reply."""

    kind: Literal["text"] = "text"
    text: str


class ToolCallPart(_Model):
    """A native tool call in a model reply."""

    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    #: parsed arguments, or the raw string when the model sent invalid JSON
    input: ToolInput = Field(default_factory=dict)


Part = Annotated[TextPart | ToolCallPart, Field(discriminator="kind")]


class Reply(_Model):
    """One model reply: its parts in order, why it stopped, and what it cost."""

    parts: list[Part] = Field(default_factory=list)
    stop_reason: StopReason = "end"
    usage: Usage | None = None

    @property
    def text(self) -> str:
        """All text parts joined: a reply may start with a tool call, and a text part may follow it."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The native tool calls of this reply, in order."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]


ImageType = Literal["image/png", "image/jpeg", "image/webp"]


class ImagePart(_Model):
    """An image in a user message or an observation: what it is and, when it is sent, its bytes.

    The bytes stay out of the JSON: a stored event names the session's artifact that holds
    them (``name``), and they are read back from the store when a model that sees images
    is sent the image again. ``reactchat.messages.images.checked`` makes one from bytes.
    """

    kind: Literal["image"] = "image"
    #: the session's artifact that holds the bytes
    name: str
    media_type: ImageType
    width: int
    height: int
    #: bytes of the image
    size: int
    data: bytes = Field(default=b"", exclude=True, repr=False)

    @property
    def note(self) -> str:
        """What a model that cannot see images is told in the image's place."""
        kind = self.media_type.removeprefix("image/").upper()
        size = f"{self.width}x{self.height}, {self.size} bytes"
        return f"[image {self.name}: {kind}, {size}; this model cannot see images]"


class SystemMessage(_Model):
    """Instructions for the model."""

    role: Literal["system"] = "system"
    content: str


class UserMessage(_Model):
    """A message from the user (or an observation in text protocols), with its images."""

    role: Literal["user"] = "user"
    content: str
    images: tuple[ImagePart, ...] = ()


class AssistantMessage(_Model):
    """A message from the model.

    ``prefill=True`` marks a partial assistant message that the model must
    *continue* (the ReAct scratchpad after ``Thought:``) rather than answer.
    """

    role: Literal["assistant"] = "assistant"
    parts: list[Part] = Field(default_factory=list)
    prefill: bool = False

    @property
    def text(self) -> str:
        """All text parts joined."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @classmethod
    def prefilled(cls, text: str) -> AssistantMessage:
        """The partial message ``text`` for the model to continue (built on every text ReAct step)."""
        part = trusted(TextPart, {"kind": "text", "text": text})
        return trusted(cls, {"role": "assistant", "parts": [part], "prefill": True})


class ToolResultMessage(_Model):
    """The result of one native tool call, paired with it by ``call_id``."""

    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: str
    is_error: bool = False
    #: images the tool gave (an MCP image, a chart run_python drew)
    images: tuple[ImagePart, ...] = ()


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
    Field(discriminator="role"),
]


class ToolSpec(_Model):
    """What a model is told about a tool: its name, description and input schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ReactLabels(_Model):
    """The labels of a text ReAct prompt pack, for models that constrain their output."""

    thought: str = "Thought"
    action: str = "Action"
    action_input: str = "Action Input"
    observation: str = "Observation"
    final_answer: str = "Final Answer"


class Request(_Model):
    """Everything a model needs for one call."""

    messages: list[Message]
    #: tools offered for *native* tool calling; empty for the text protocol
    tools: list[ToolSpec] = Field(default_factory=list)
    stop: list[str] = Field(default_factory=list)
    #: set by the text ReAct protocol: the labels and the tools a step may name,
    #: so a model that supports grammars can constrain each step to a valid one
    react: ReactLabels | None = None
    react_tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int | None = None
    #: the JSON schema a final answer must match (``Agent(output_type=...)``): a model that
    #: constrains its output (the local one) decodes the answer under it
    output_schema: dict[str, Any] | None = None
    #: where a streaming model sends its text as it comes (set by the engine when the
    #: caller asked for deltas); not part of what is sent
    on_delta: Callable[[str], Any] | None = Field(default=None, exclude=True, repr=False)

    @classmethod
    def built(cls, messages: list[Message], **fields: Any) -> Request:
        """A request from parts that are already valid models, not validated again (it is
        built on every step); the fields not given take their defaults."""
        values: dict[str, Any] = {
            "messages": messages,
            "tools": [],
            "stop": [],
            "react": None,
            "react_tools": [],
            "max_tokens": None,
            "output_schema": None,
            "on_delta": None,
        }
        values.update(fields)
        return trusted(cls, values)


# ------------------------------------------------------------------------ plans


class PlanStep(_Model):
    """One step of a plan: a task for an executor (``agent``: a sub-agent's name, or None
    for the planning agent's own tools), its status and, once run, its result."""

    task: str
    agent: str | None = None
    status: Literal["pending", "done", "failed", "skipped"] = "pending"
    result: str | None = None


# ------------------------------------------------------------------------ events


def _now() -> float:
    return time.time()


class _Event(_Model):
    session: str = ""
    turn: int = 0
    #: index of the model call within the run that produced this event
    step: int = 0
    at: float = Field(default_factory=_now)
    #: the event's place in the session's log (1, 2, 3…), set by the store when it is
    #: appended; 0 until then and for events that are never stored (``DeltaEvent``)
    seq: int = 0
    #: the path of the agent that produced it: ``"boss"``, ``"boss/researcher"``
    #: (``""`` in sessions stored before agents had names: the top-level agent)
    agent: str = ""
    #: which run of the turn produced it: ``""`` for the top-level run; a run started by a
    #: tool call of another run is ``call_id`` (or ``PARENT_RUN/call_id`` deeper down)
    run: str = ""

    @classmethod
    def built(cls, **fields: Any) -> Self:
        """An event the engine makes on every step from values it made itself, not validated
        again (``trusted``); the fields not given take their defaults, ``at`` is now."""
        defaults, required = _template(cls)
        values = dict(defaults)
        values["at"] = time.time()
        values.update(fields)
        if len(values) != len(defaults) or not required <= fields.keys():
            raise TypeError(f"{cls.__name__}.built({', '.join(fields)}): a field is missing or unknown")
        return trusted(cls, values)


@functools.cache
def _template(cls: type[_Event]) -> tuple[dict[str, Any], frozenset[str]]:
    """Every field of an event class in order with its (immutable) default, and the names
    of those ``built`` must be given (no default; ``at``, which ``built`` sets, aside)."""
    fields = cls.model_fields
    given = {name for name, info in fields.items() if info.is_required() or info.default_factory}
    defaults = {name: None if name in given else info.default for name, info in fields.items()}
    return defaults, frozenset(given - {"at"})


def _none(images: tuple[ImagePart, ...]) -> bool:
    """An event without images is stored as it was before events had them."""
    return not images


class UserEvent(_Event):
    """A user message that starts a turn (or answers a pending question)."""

    type: Literal["user"] = "user"
    text: str
    #: images sent with the message, kept as the session's artifacts (their bytes are not in the event)
    images: tuple[ImagePart, ...] = Field(default=(), exclude_if=_none)


class ThoughtEvent(_Event):
    """The reasoning of one model call (text protocol: the Thought; native: the text)."""

    type: Literal["thought"] = "thought"
    text: str
    #: the model's raw output for this step, so a scratchpad can be rebuilt verbatim
    raw: str = ""
    seconds: float = 0.0
    usage: Usage | None = None


class ActionEvent(_Event):
    """A tool call the model asked for. Recorded *before* the tool runs."""

    type: Literal["action"] = "action"
    call_id: str
    tool: str
    input: ToolInput


class ObservationEvent(_Event):
    """What a tool call returned (errors included), paired with its action by ``call_id``."""

    type: Literal["observation"] = "observation"
    call_id: str
    tool: str
    text: str
    is_error: bool = False
    #: characters cut from the tool's output to keep the context small
    truncated: int = 0
    #: the call was cut off by a crash and not run again, so its effect is unknown
    interrupted: bool = False
    seconds: float = 0.0
    #: images the tool gave, kept as the session's artifacts (their bytes are not in the event)
    images: tuple[ImagePart, ...] = Field(default=(), exclude_if=_none)


class StartedEvent(_Event):
    """A call that waited for the user (an approval, a retry of a call in doubt) began to run:
    recorded before it runs, so that a crash from here on leaves it in doubt, and a crash
    before it leaves it simply not run yet."""

    type: Literal["started"] = "started"
    call_id: str


class QuestionEvent(_Event):
    """The turn waits for the user: a question (``ask_user``) or, for ``kind="approval"``,
    whether the call ``call_id`` may run. The reply resumes the call it belongs to."""

    type: Literal["question"] = "question"
    call_id: str
    question: str
    kind: PauseKind = "question"
    #: W3C traceparent of the traced run that asked, so that its resumption links to it
    trace: str = ""


class AnswerEvent(_Event):
    """The final answer of a turn.

    ``status`` is ``done`` for a normal answer, ``stopped`` when a guard ended the run
    (``best_effort`` then says the answer was asked for from what was observed) and
    ``cancelled`` when the caller cancelled it (``text`` is what it had by then).
    """

    type: Literal["answer"] = "answer"
    text: str
    #: the reasoning the model wrote before its final answer
    thought: str = ""
    status: Literal["done", "stopped", "cancelled"] = "done"
    reason: str = ""
    best_effort: bool = False
    seconds: float = 0.0
    usage: Usage | None = None


class ErrorEvent(_Event):
    """Something went wrong. ``kind="format"`` (a step that could not be read) and
    ``kind="output"`` (a final answer that does not validate against the agent's
    ``output_type``) are sent back to the model as corrections."""

    type: Literal["error"] = "error"
    kind: Literal["format", "output", "model", "guard", "internal"]
    message: str
    #: the model output that was refused, for corrections
    raw: str = ""
    seconds: float = 0.0
    usage: Usage | None = None

    @property
    def correction(self) -> bool:
        """Whether ``message`` went back to the model as a correction."""
        return self.kind in ("format", "output")


class DeltaEvent(_Event):
    """Text a streaming model is writing, before it becomes a step: shown live, never stored.

    Only ``Agent.stream(..., deltas=True)`` yields these; the step's events replace them.
    """

    type: Literal["delta"] = "delta"
    text: str


class PlanEvent(_Event):
    """A planner call of a plan-and-execute run: the plan it wrote or revised, or its decision
    to go on. ``steps`` is the whole plan at that moment (each step's status and result);
    ``version`` counts the plans written (1 for the first, +1 per revision)."""

    type: Literal["plan"] = "plan"
    version: int
    decision: Literal["plan", "continue", "revise"] = "plan"
    steps: list[PlanStep]
    seconds: float = 0.0
    usage: Usage | None = None


class TrialEvent(_Event):
    """A judged Reflexion trial: its answer, the evaluator's verdict and, when rejected,
    the reflection the model wrote on it (carried into the next trials' prompts)."""

    type: Literal["trial"] = "trial"
    trial: int
    answer: str
    accepted: bool
    feedback: str = ""
    reflection: str = ""
    #: ``function``, ``tool``, ``command`` or ``model`` (the model judged its own answer)
    evaluator: Literal["function", "tool", "command", "model"] = "function"
    seconds: float = 0.0
    usage: Usage | None = None


class CompactionEvent(_Event):
    """A summary that later prompts carry in place of what it covers, made by one model call.

    ``covers="turns"``: turns 1 to ``through_turn`` (the history of every later turn);
    ``covers="steps"``: steps 1 to ``through_step`` of run ``run`` of this turn (the
    transcript of that run). Each summary includes the one before it, so the latest is the
    one a prompt carries. Nothing it covers is deleted from the store.
    """

    type: Literal["compaction"] = "compaction"
    summary: str
    covers: Literal["turns", "steps"] = "turns"
    through_turn: int = 0
    through_step: int = 0
    seconds: float = 0.0
    usage: Usage | None = None


class LinkSkippedEvent(_Event):
    """A link of the message that starts a turn that was not read into the session's files
    before the turn ran (``reactchat.toolbox.read_links_in_messages``): ``refused`` by the
    fetch policy or the file limits (a private address, a URL that cannot be parsed, too
    large), or failed otherwise. Recorded right after the message, for people: the model's
    prompt does not carry it (it can still try ``fetch_url``)."""

    type: Literal["link_skipped"] = "link_skipped"
    url: str
    #: why, in words (the refusal's or the failure's message)
    reason: str
    refused: bool = True


Event = Annotated[
    UserEvent
    | ThoughtEvent
    | ActionEvent
    | ObservationEvent
    | QuestionEvent
    | StartedEvent
    | AnswerEvent
    | ErrorEvent
    | PlanEvent
    | TrialEvent
    | CompactionEvent
    | LinkSkippedEvent
    | DeltaEvent,
    Field(discriminator="type"),
]

#: the events that record a model call's usage, and those that record how long they took
_WITH_USAGE = (ThoughtEvent, AnswerEvent, ErrorEvent, PlanEvent, TrialEvent, CompactionEvent)
_WITH_SECONDS = (*_WITH_USAGE, ObservationEvent)


def event_usage(event: Event) -> Usage | None:
    """The usage of the model call an event records, if it records one."""
    return event.usage if isinstance(event, _WITH_USAGE) else None


def event_seconds(event: Event) -> float:
    """How long the model or tool call an event records took (0 for other events)."""
    return event.seconds if isinstance(event, _WITH_SECONDS) else 0.0


_ADAPTERS: dict[str, Any] = {}
_NOT_STORED = {"seq"}


def _events() -> TypeAdapter[Event]:
    """``EVENTS``, looked up without ``__getattr__`` once built (stores call this per event)."""
    adapter: TypeAdapter[Event] = _ADAPTERS.get("EVENTS") or __getattr__("EVENTS")
    return adapter


def stored_json(event: Event) -> str:
    """The event as a store keeps it: its JSON without ``seq``, which is its place in the log.

    Its own model's serializer writes it: the same JSON as ``EVENTS.dump_json``, which
    first tries the union's members in turn (two to three times the cost, per event)."""
    return event.model_dump_json(exclude=_NOT_STORED)


def stored_event(seq: int, body: str | bytes) -> Event:
    """An event read back from a store: its JSON, and its place in the session's log."""
    return numbered(_events().validate_json(body), seq)


def __getattr__(name: str) -> Any:
    """``EVENTS`` (the one JSON adapter for events: ``EVENTS.validate_json(b)``,
    ``EVENTS.dump_json(e)``), ``EVENT_LIST`` and ``MESSAGES``, built on first use."""
    types: dict[str, Any] = {"EVENTS": Event, "EVENT_LIST": list[Event], "MESSAGES": list[Message]}
    if name not in types:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _ADAPTERS:
        _ADAPTERS[name] = TypeAdapter(types[name])
    return _ADAPTERS[name]


if TYPE_CHECKING:
    EVENTS: TypeAdapter[Event]
    EVENT_LIST: TypeAdapter[list[Event]]
    MESSAGES: TypeAdapter[list[Message]]
