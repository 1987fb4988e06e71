"""Tools: plain Python functions the agent may call.

``@tool`` turns a function (sync or async) into a ``Tool``: its name is the
function's name, its description the docstring, its input schema comes from the
signature (via ``pydantic.create_model``). Arguments are validated by pydantic
before the call. A parameter annotated ``RunContext`` is injected by the engine and
never shown to the model.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, get_type_hints, overload, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from reactchat.messages import PauseKind, ToolInput, ToolSpec
from reactchat.messages.images import Observation
from reactchat.tools.threads import ToolThreads, shared_threads

if TYPE_CHECKING:
    from reactchat.messages import Event
    from reactchat.protocols.base import Call, ToolResult

F = TypeVar("F", bound=Callable[..., Any])

#: what a call of a tool does to the world, which decides what happens when a crash leaves
#: it without a result: ``read`` (no side effect: may run again, and a fork reuses its
#: result), ``idempotent`` (may run again), ``unsafe`` (never runs twice unless someone says so)
Effect = Literal["read", "idempotent", "unsafe"]
EFFECTS: tuple[Effect, ...] = ("read", "idempotent", "unsafe")
#: whether a call waits for a human's yes: always (True), never (False), or when the function of its arguments says so
Approval = bool | Callable[[dict[str, Any]], bool]
#: reconcile(**arguments) -> the call's result if its effect happened, None if it did not
Reconcile = Callable[..., "str | Awaitable[str | None] | None"]


@dataclass
class RunContext:
    """What the engine knows about the running turn, injected into tools that ask for it.

    Declare a parameter ``ctx: RunContext`` and it is filled in by the engine and hidden
    from the model's schema.
    """

    session: str
    turn: int
    call_id: str
    #: the session's store (see ``reactchat.store``)
    store: Any = None
    #: whatever the application passed as ``Agent(deps=...)``
    deps: Any = None
    #: extra per-session services (e.g. the file knowledge base), by name
    services: dict[str, Any] = field(default_factory=dict)
    #: the path of the agent making the call (``"boss"``, ``"boss/researcher"``)
    agent: str = ""
    #: the run making the call (``""`` for a turn's top-level run; see ``reactchat.engine.run``)
    run: str = ""
    #: the user's message that opened this turn
    message: str = ""


class PauseForUser(Exception):
    """Raised by a tool to end the turn and wait for the user's answer.

    The question is shown to the user; the session's next message becomes the
    observation of this tool call and the reasoning continues from there.
    """

    def __init__(self, question: str, kind: PauseKind = "question") -> None:
        super().__init__(question)
        self.question = question
        #: ``approval``: the engine asks whether a call may run (see ``reactchat.engine.approval``)
        self.kind = kind


class ToolInputError(Exception):
    """The model's arguments do not fit the tool: the message is shown to the model."""


class ToolTimeout(Exception):
    """A tool did not return within its timeout."""


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$", re.IGNORECASE)
_ARG_LINE = re.compile(r"^\s+(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Description and per-argument descriptions from a Google-style docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    in_args = False
    last: str | None = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            in_args = True
            continue
        if in_args:
            match = _ARG_LINE.match("    " + line if not line.startswith(" ") else line)
            if match and (line.startswith(" ") or ":" in line):
                last = match.group(1)
                args[last] = match.group(2).strip()
                continue
            if line.strip() and last and line.startswith(" " * 8):
                args[last] += " " + line.strip()
                continue
            if not line.strip():
                continue
            in_args = False
        description.append(line)
    return "\n".join(description).strip(), args


class Tool:
    """A callable the agent can use. Build one with ``@tool``."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        return_direct: bool = False,
        timeout: float | None = 30.0,
        volatile: bool = False,
        idempotent: bool = False,
        effect: Effect | None = None,
        reconcile: Reconcile | None = None,
        max_chars: int | None = None,
        approval: Approval = False,
    ) -> None:
        if effect is not None and effect not in EFFECTS:
            raise ValueError(f"effect must be one of {', '.join(EFFECTS)}, not {effect!r}")
        self.fn = fn
        self.name = name or fn.__name__
        doc_description, arg_docs = _split_docstring(fn.__doc__ or "")
        self.description = description or doc_description or self.name
        #: the tool's output is the final answer (no summarising model call)
        self.return_direct = return_direct
        #: seconds before the call is abandoned (None: no limit, sync tools run inline)
        self.timeout = timeout
        #: the result changes over time, so repeating the same call is legitimate
        self.volatile = volatile
        #: what a call does to the world (``idempotent=True`` means ``effect="idempotent"``)
        self.effect: Effect = effect or ("idempotent" if idempotent else "unsafe")
        #: after a crash, whether an interrupted call's effect happened (its result, or None)
        self.reconcile = reconcile
        #: per-tool observation limit in characters (None: the agent's default)
        self.max_chars = max_chars
        #: a human approves each call first (True), or those for which ``approval(arguments)`` is true
        self.approval = approval
        self.is_async = inspect.iscoroutinefunction(fn)
        #: the loop runs it through ``stream`` (a sub-agent: its events are the caller's to yield)
        self.streams = False

        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        self.context_params: list[str] = []
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name}: *args/**kwargs cannot be described to a model")
            annotation = hints.get(param.name, Any)
            if annotation is RunContext:
                self.context_params.append(param.name)
                continue
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, Field(default, description=arg_docs.get(param.name)))
        self.args_model: type[BaseModel] = create_model(
            f"{self.name}_args",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.input_schema: dict[str, Any] = schema
        self.params = list(fields)
        #: every parameter is a str, int, float or bool: a validated model's fields are its dump
        self._scalars = all(annotation in (str, int, float, bool) for annotation, _ in fields.values())

    @property
    def idempotent(self) -> bool:
        """Whether a call may run again after a crash interrupted it (``read`` or ``idempotent``)."""
        return self.effect != "unsafe"

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def stream(self, call: Call, loop: Any, arguments: dict[str, Any]) -> AsyncIterator[Event | ToolResult]:
        """For a tool that ``streams`` (one that runs another agent): the events of the run it
        starts inside ``loop``'s call (the engine's ``Loop``, which sits above tools), as they
        become durable, then its ``ToolResult`` (none when that run waits for the user). See
        ``reactchat.orchestration.nested.SubAgent``."""
        raise TypeError(f"tool {self.name} does not stream; call run() instead")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (tools stay usable as functions)."""
        return self.fn(*args, **kwargs)

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about this tool: made once (every turn asks for it), and
        made again if the tool's name, description or schema was replaced since."""
        spec: ToolSpec | None = self.__dict__.get("_spec")
        if (
            spec is None
            or spec.name != self.name
            or spec.description != self.description
            or self.__dict__.get("_spec_schema") is not self.input_schema
        ):
            spec = ToolSpec(name=self.name, description=self.description, input_schema=self.input_schema)
            self.__dict__.update(_spec=spec, _spec_schema=self.input_schema)
        return spec

    def validate(self, input: ToolInput) -> dict[str, Any]:
        """Turn the model's Action Input into validated keyword arguments.

        A plain string is accepted for a tool with exactly one parameter (``Search[x]``,
        ``Action Input: 80.16 * 1.15``); an empty input for a tool without required ones.
        Raises ``ToolInputError`` with a message for the model.
        """
        if isinstance(input, str):
            text = input.strip()
            if text[:1] in "{[" and text:
                try:
                    json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ToolInputError(
                        f"Action Input is not valid JSON ({exc.msg} at line {exc.lineno} column "
                        f"{exc.colno}). Write a JSON object matching this schema: {self.schema_json()}"
                    ) from None
                raise ToolInputError(f"Action Input must be a JSON object matching: {self.schema_json()}")
            required = self.input_schema.get("required", [])
            if not text and not required:
                input = {}
            elif len(self.params) == 1:
                input = {self.params[0]: _unquote(text)}
            else:
                raise ToolInputError(f"{self.name} takes a JSON object, not plain text. Schema: {self.schema_json()}")
        return self.check(input)

    def check(self, arguments: Any) -> dict[str, Any]:
        """Validate arguments given as an object; a tool described by a JSON schema
        instead of a signature (MCP, LangChain) overrides this."""
        try:
            valid = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolInputError(
                f"Invalid arguments for {self.name}: {validation_problems(exc)}. Schema: {self.schema_json()}"
            ) from None
        return dict(iter(valid)) if self._scalars else valid.model_dump()

    def schema_json(self) -> str:
        """The input schema as compact JSON, for prompts and error messages."""
        return json.dumps(self.input_schema, ensure_ascii=False, separators=(",", ":"))

    async def run(
        self, arguments: dict[str, Any], context: RunContext | None = None, threads: ToolThreads | None = None
    ) -> Any:
        """Call the tool with validated arguments, applying its timeout; a sync tool with a
        timeout runs on one of ``threads`` (the agent's pool; a shared one when None)."""
        kwargs = {**arguments, **dict.fromkeys(self.context_params, context)} if self.context_params else arguments
        if self.is_async:
            coro: Awaitable[Any] = self.fn(**kwargs)
            if self.timeout is None:
                return await coro
            deadline = asyncio.timeout(self.timeout)
            try:
                async with deadline:
                    return await coro
            except TimeoutError:
                if deadline.expired():  # not a TimeoutError the tool itself raised
                    raise self.expired() from None
                raise
        if self.timeout is None:
            return self.fn(**kwargs)
        # on a worker thread, so that a hang cannot block the agent (see reactchat.tools.threads)
        call = (threads or shared_threads()).start(lambda: self.fn(**kwargs))
        return await call.settled(self.timeout, self.expired)

    def expired(self) -> ToolTimeout:
        """The error of a call that did not return within the tool's timeout."""
        return ToolTimeout(f"{self.name} did not return within {self.timeout:g} s")


def validation_problems(exc: ValidationError) -> str:
    """A pydantic validation error as one line for the model: ``where: what; ...``."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in exc.errors())


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


@overload
def tool(fn: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    timeout: float | None = 30.0,
    volatile: bool = False,
    idempotent: bool = False,
    effect: Effect | None = None,
    reconcile: Reconcile | None = None,
    max_chars: int | None = None,
    approval: Approval = False,
) -> Callable[[F], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Tool | Callable[[F], Tool]:
    """Make a ``Tool`` of a function: ``@tool`` or ``@tool(return_direct=True, timeout=5)``.

    Options: ``name``, ``description`` (default: the docstring), ``return_direct`` (the
    output is the final answer), ``timeout`` in seconds, ``volatile`` (the result changes
    over time, so identical calls may repeat), ``effect`` (``read``, ``idempotent`` or the
    default ``unsafe``: what happens to a call a crash interrupted; ``idempotent=True`` means
    ``effect="idempotent"``), ``reconcile`` (``check(**arguments)``: after a crash, the
    call's result if its effect happened, None if it did not), ``max_chars`` (observation
    limit for this tool), ``approval`` (True, or a function of the arguments: the run waits
    for a human's yes before the call runs).
    """
    if fn is not None:
        return Tool(fn, **options)

    def decorate(f: F) -> Tool:
        return Tool(f, **options)

    return decorate


@runtime_checkable
class Toolset(Protocol):
    """Tools known only once running, such as an MCP server's: ``Agent(tools=[toolset])``."""

    name: str

    async def list_tools(self) -> Sequence[Tool]:
        """The tools, asked for at the start of each turn (a toolset may cache them)."""
        ...


async def toolset_tools(toolsets: Iterable[Toolset], taken: set[str]) -> list[Tool]:
    """The toolsets' tools; a name that is ``taken`` or offered by two toolsets becomes
    ``toolset__name``, so that every tool keeps one stable name."""
    listed = [(toolset, list(await toolset.list_tools())) for toolset in toolsets]
    counts: dict[str, int] = {}
    for _, tools in listed:
        for t in tools:
            counts[t.name] = counts.get(t.name, 0) + 1
    named = []
    for toolset, tools in listed:
        for t in tools:
            if t.name in taken or counts[t.name] > 1:
                t = copy.copy(t)
                t.name = f"{toolset.name}__{t.name}"
            named.append(t)
    return named


def observation_text(value: Any) -> str:
    """Render a tool's return value as observation text (an ``Observation``'s text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Observation):
        return value.text
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)
