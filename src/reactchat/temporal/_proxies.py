"""The parts of an agent as its turn's workflow sees them: each a call of an activity.

The engine's loop runs inside the workflow (``reactchat.temporal._inflow``); what it
reaches of the world goes through these proxies, so that Temporal records each result
and a replay on another worker gets the same ones without calling anything again:

- ``ModelProxy``: each model call is the activity ``reactchat.model``, retried by
  Temporal (a worker that dies mid-call stops heartbeating; another worker calls again).
- ``ActivityTool``: each tool call is the activity ``reactchat.tool`` with the retries of
  the tool's effect class: a ``read`` or ``idempotent`` call is retried by Temporal, an
  ``unsafe`` one has one attempt, and its loss raises ``CallLost`` for the engine's
  recovery to put the call in doubt. A ``reconcile`` is the activity ``reactchat.reconcile``.
- ``StoreProxy``: each store call is the local activity ``reactchat.store`` (in the same
  worker, its result recorded with the workflow's next task); a local activity a dead
  worker ran without recording is run again, so appends carry the log position they
  expect and one that finds its events there already does not append them again.

Only agents whose every part reactchat can proxy run this way (``proxiable``): no MCP
toolsets, no hooks (knowledge, memory, ``session_tools``, ``on_turn_end``).
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError

from reactchat.agent import Agent
from reactchat.errors import AlreadyAnswered, ConfigError, NoSuchEvent, ReactchatError, SessionBusy, SessionNotFound
from reactchat.messages import Event, ImagePart, Reply, Request, stored_event, stored_json
from reactchat.messages.images import Observation
from reactchat.models import ContextTooLong, Model, ModelError
from reactchat.orchestration.nested import SubAgent
from reactchat.tools import PauseForUser, RunContext, Tool, ToolTimeout
from reactchat.tools.threads import ToolThreads

#: errors a retry cannot mend: the operator must (a model's key, a bad configuration)
PERMANENT = ["ModelError", "ConfigError", "TurnFailed", "ContextTooLong"]


class CallLost(BaseException):
    """The activity of an ``unsafe`` tool call was lost (its worker died): whether its effect
    happened is unknown. Not an ``Exception``: the engine must not make it the call's
    observation; the turn ends here and its recovery puts the call in doubt."""


def retries(attempts: int = 0) -> RetryPolicy:
    """Retried without limit (``attempts`` 0) or at most ``attempts`` times, except what the
    operator must mend (``PERMANENT``)."""
    return RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=attempts,
        non_retryable_error_types=PERMANENT,
    )


# ---------------------------------------------------------------------- what activities take


@dataclass
class ModelCall:
    """A model call of the agent at ``path``: its request as JSON, and the appends the
    workflow made since its last store call (``carried``), made first."""

    path: str
    request: str
    carried: StoreCall | None = None


@dataclass
class ModelAnswer:
    """A model call's reply as JSON, and the seqs the carried appends got."""

    reply: str
    seqs: list[int] = field(default_factory=list)


@dataclass
class ToolCall:
    """A tool call of the agent at ``path``: the tool, its validated arguments as JSON, and
    what its ``RunContext`` says (the worker adds the store, deps and services)."""

    path: str
    tool: str
    arguments: str
    session: str = ""
    turn: int = 0
    call_id: str = ""
    agent: str = ""
    run: str = ""
    message: str = ""
    carried: StoreCall | None = None


@dataclass
class ToolOutcome:
    """What a tool call came to: its text (and images as JSON), or the question it asks
    (``pause``, of ``kind``), or the exception it raised (``error``: its type's name)."""

    text: str = ""
    images: str = ""
    pause: str | None = None
    kind: str = "question"
    error: str | None = None
    timeout: bool = False
    #: the seqs the carried appends got
    seqs: list[int] = field(default_factory=list)


@dataclass
class StoreCall:
    """A store call: the method, its plain arguments, its events (stored JSON), and for an
    append the log length it expects before its events (None: unknown)."""

    method: str
    session: str
    args: list[Any] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    expected: int | None = None


@dataclass
class StoreAnswer:
    """A store call's answer: plain ``value``, or ``events`` (stored JSON with their seq),
    ``none`` when the answer is None; ``seqs``: the seqs the call gave its events."""

    value: Any = None
    events: list[str] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    none: bool = False


def event_json(event: Event) -> str:
    """An event with its seq, for an activity's input or result."""
    return json.dumps([event.seq, stored_json(event)])


def json_event(text: str) -> Event:
    """An event written by ``event_json``."""
    seq, body = json.loads(text)
    return stored_event(int(seq), body)


# ---------------------------------------------------------------------- the model


class ModelProxy:
    """The model of the agent at ``path``, each call an activity; its capabilities are the
    real model's, read when the workflow's agent is made."""

    def __init__(self, real: Model, path: str, heartbeat: float, store: StoreProxy) -> None:
        self.path, self.heartbeat, self.store = path, heartbeat, store
        self.name = real.name
        self.supports_tools = real.supports_tools
        self.context_tokens = real.context_tokens
        self.supports_images = bool(getattr(real, "supports_images", False))

    async def complete(self, request: Request) -> Reply:
        """One call of the activity ``reactchat.model``, retried by Temporal."""
        try:
            answer: ModelAnswer = await workflow.execute_activity(
                "reactchat.model",
                ModelCall(self.path, request.model_dump_json(), self.store.carry()),
                result_type=ModelAnswer,
                start_to_close_timeout=timedelta(hours=1),
                heartbeat_timeout=timedelta(seconds=self.heartbeat),
                retry_policy=retries(),
            )
        except ActivityError as error:
            self.store.lost()
            raise _model_error(error) from None
        self.store.landed(answer.seqs)
        return Reply.model_validate_json(answer.reply)


def cancelled(error: ActivityError) -> BaseException:
    """A call cancelled because its workflow was (``TurnWorkflow``'s cancel) is the engine's
    ``asyncio.CancelledError``: it records the turn as cancelled, as under ``reactchat serve``."""
    return asyncio.CancelledError() if isinstance(error.cause, CancelledError) else error


def _model_error(error: ActivityError) -> BaseException:
    """The engine's exception for a failed model activity (it records ``ModelError``s)."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type == "ContextTooLong":
        return ContextTooLong(cause.message)
    if isinstance(cause, ApplicationError) and cause.type in PERMANENT:
        return ModelError(f"{cause.type}: {cause.message}" if cause.type != "ModelError" else cause.message)
    return cancelled(error)


# ---------------------------------------------------------------------- tools


class ActivityTool(Tool):
    """A tool as the workflow's engine sees it: the real tool's name, schema, effect and
    rules, each call the activity ``reactchat.tool`` (see the module's docstring)."""

    def __init__(self, real: Tool, path: str, heartbeat: float, store: StoreProxy) -> None:
        # the same schema and checks as the real tool: validation happens in the workflow
        vars(self).update(copy.copy(vars(real)))
        self.real_type = type(real)
        self.path, self.heartbeat, self.store = path, heartbeat, store
        self.timeout = None  # the real tool's own timeout applies in the activity
        if real.reconcile is not None:
            self.reconcile = self._reconcile

    def check(self, arguments: Any) -> dict[str, Any]:
        """The real tool's validation (an MCP tool's JSON schema, a signature's model)."""
        return self.real_type.check(self, arguments)

    async def run(
        self, arguments: dict[str, Any], context: RunContext | None = None, threads: ToolThreads | None = None
    ) -> Any:
        """One call of the activity ``reactchat.tool`` with the retries of its effect class."""
        call = ToolCall(self.path, self.name, json.dumps(arguments))
        if context is not None:
            call.session, call.turn, call.call_id = context.session, context.turn, context.call_id
            call.agent, call.run, call.message = context.agent, context.run, context.message
        unsafe = self.effect == "unsafe"
        call.carried = self.store.carry()  # an unsafe call's action is durable before it runs
        try:
            outcome: ToolOutcome = await workflow.execute_activity(
                "reactchat.tool",
                call,
                result_type=ToolOutcome,
                start_to_close_timeout=timedelta(hours=1),
                heartbeat_timeout=timedelta(seconds=self.heartbeat),
                retry_policy=retries(1 if unsafe else 0),
            )
        except ActivityError as error:
            self.store.lost()
            if unsafe and isinstance(error.cause, TimeoutError):
                raise CallLost(self.name) from None
            raise cancelled(error) from None
        self.store.landed(outcome.seqs)
        return _outcome(outcome)

    async def _reconcile(self, **arguments: Any) -> str | None:
        """The real tool's ``reconcile``, as the activity ``reactchat.reconcile``."""
        found: str | None = await workflow.execute_activity(
            "reactchat.reconcile",
            ToolCall(self.path, self.name, json.dumps(arguments)),
            result_type=str | None,  # type: ignore[arg-type]
            start_to_close_timeout=timedelta(minutes=10),
            retry_policy=retries(),
        )
        return found


#: the exception types tools raised in activities, rebuilt by name so that the observation
#: reads as it would without Temporal ("Error: bump raised ValueError: ...")
_RAISED: dict[str, type[Exception]] = {}


def _outcome(outcome: ToolOutcome) -> Any:
    """What ``Tool.run`` returns or raises for a tool activity's outcome."""
    if outcome.pause is not None:
        raise PauseForUser(outcome.pause, kind=outcome.kind)  # type: ignore[arg-type]
    if outcome.timeout:
        raise ToolTimeout(outcome.text)
    if outcome.error is not None:
        kind = _RAISED.setdefault(outcome.error, type(outcome.error, (Exception,), {}))
        raise kind(outcome.text)
    if outcome.images:
        return Observation(outcome.text, tuple(ImagePart.model_validate(i) for i in json.loads(outcome.images)))
    return outcome.text


# ---------------------------------------------------------------------- the store


class StoreProxy:
    """The agent's store as the workflow sees it: each call a local activity, except appends.

    An append waits for the workflow's next activity and is made by it first, before its
    model or tool call (``carry``): a step's events cost no call of their own. Any other
    store call makes the waiting appends first (a turn ends with one: its unlock), and so
    does a child workflow before it starts. Every turn lock this workflow takes is held by
    one owner, the workflow's own run id, whatever owner the engine names: the engine's is
    random, and a replay on another worker must release the lock the first worker took.
    """

    def __init__(self, url: str, owner: str) -> None:
        self.url, self.owner = url, owner
        #: each session's log length as this workflow last saw it: what an append expects
        self.length: dict[str, int] = {}
        #: appends not made yet, and those an activity in flight makes
        self.pending: list[Event] = []
        self.carried: list[Event] = []

    def carry(self) -> StoreCall | None:
        """The waiting appends, for the activity about to be scheduled to make first."""
        if not self.pending:
            return None
        self.carried, self.pending = self.pending, []
        session = self.carried[0].session
        return StoreCall("append", session, [], [event_json(e) for e in self.carried], self.length.get(session))

    def landed(self, seqs: list[int]) -> None:
        """The carried appends were made, at ``seqs``."""
        for event, seq in zip(self.carried, seqs, strict=True):
            event.seq = seq
            self.saw(event.session, seq)
        self.carried = []

    def lost(self) -> None:
        """The activity that carried appends failed: they wait again (if it made them before
        failing, the next append finds them at the end of the log and skips them)."""
        self.pending, self.carried = [*self.carried, *self.pending], []

    async def flush(self) -> None:
        """Make the waiting appends now (a local activity), if any."""
        if self.pending:
            events, self.pending = self.pending, []
            await self._write("append", (), tuple(events))

    async def _call(self, call: StoreCall) -> StoreAnswer:
        if call.method not in ("append", "append_unlock"):
            await self.flush()
        try:
            answer: StoreAnswer = await workflow.execute_local_activity(
                "reactchat.store",
                call,
                result_type=StoreAnswer,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=100),
                    maximum_interval=timedelta(seconds=5),
                    non_retryable_error_types=list(_STORE_ERRORS),
                ),
            )
        except ActivityError as error:
            raise _store_error(error, call.session) from None
        self._saw(call.session, answer)
        return answer

    def _saw(self, session: str, answer: StoreAnswer) -> None:
        seqs = answer.seqs or [json.loads(e)[0] for e in answer.events]
        if seqs:
            self.length[session] = max(self.length.get(session, 0), *seqs)

    def saw(self, session: str, seq: int) -> None:
        """An event of ``session`` at ``seq`` was stored by another workflow (a child's)."""
        self.length[session] = max(self.length.get(session, 0), seq)

    def _events(self, answer: StoreAnswer) -> list[Event]:
        return [json_event(e) for e in answer.events]

    async def create_session(self, session_id: str | None = None) -> str:
        """Create the session (a new workflow-made id unless given)."""
        session = session_id or workflow.uuid4().hex
        await self._call(StoreCall("create_session", session))
        self.length[session] = 0
        return session

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        return bool((await self._call(StoreCall("exists", session_id))).value)

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events after the first ``since``."""
        return self._events(await self._call(StoreCall("events", session_id, [since])))

    async def turn_events(self, session_id: str) -> list[Event]:
        """What a new turn reads of the session."""
        answer = await self._call(StoreCall("turn_events", session_id))
        self.length.setdefault(session_id, 0)
        return self._events(answer)

    async def append(self, *events: Event) -> None:
        """Append ``events`` with the workflow's next activity or store call (``carry``); their
        seqs until then are where they would go."""
        session = events[0].session
        for event in events:
            event.seq = self.length.get(session, 0) + len(self.pending) + 1
            self.pending.append(event)

    async def append_unlock(self, owner: str, *events: Event) -> None:
        """Append the waiting events and ``events`` once, then release this workflow's lock."""
        waiting, self.pending = self.pending, []
        await self._write("append_unlock", (self.owner,), (*waiting, *events))

    async def _write(self, method: str, args: tuple[Any, ...], events: tuple[Event, ...]) -> None:
        session = events[0].session
        call = StoreCall(method, session, list(args), [event_json(e) for e in events], self.length.get(session))
        answer = await self._call(call)
        for event, seq in zip(events, answer.seqs, strict=True):
            event.seq = seq

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's turn lock for this workflow."""
        return bool((await self._call(StoreCall("try_lock", session_id, [self.owner, ttl]))).value)

    async def try_lock_read(
        self, session_id: str, owner: str, ttl: float, since: int | None, then: tuple[Event, ...] = ()
    ) -> list[Event] | None:
        """Take the lock for this workflow, read what came after ``since``; ``then`` appended
        once if nothing did."""
        expected = self.length.get(session_id) if since is None else since
        call = StoreCall("try_lock_read", session_id, [self.owner, ttl, since], [event_json(e) for e in then], expected)
        answer = await self._call(call)
        if answer.none:
            return None
        for event, seq in zip(then, answer.seqs, strict=False):
            event.seq = seq
        return self._events(answer)

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release this workflow's lock (after the waiting appends, in one call)."""
        if self.pending:
            await self.append_unlock(owner)
        else:
            await self._call(StoreCall("unlock", session_id, [self.owner]))

    async def origin(self, session_id: str) -> tuple[str, int] | None:
        """Where a forked session came from."""
        value = (await self._call(StoreCall("origin", session_id))).value
        return None if value is None else (str(value[0]), int(value[1]))

    async def put_artifact(self, session_id: str, name: str, data: bytes, at: float) -> Any:
        """Keep an image a tool returned or a message carried."""
        raise ConfigError(
            "images are not kept when each call is a Temporal activity: run the workers with "
            "reactchat worker --stretches for an agent whose tools return images"
        )

    def __getattr__(self, name: str) -> Any:
        # what a turn never calls (listing, deleting, forking sessions) is not proxied
        raise AttributeError(f"the workflow's store does not do {name}: a turn never calls it")


#: the reactchat errors a store call raises, rebuilt in the workflow from their type's name
_STORE_ERRORS = {"SessionNotFound", "SessionBusy", "AlreadyAnswered", "NoSuchEvent"}


def _store_error(error: ActivityError, session: str) -> BaseException:
    cause = error.cause
    if not isinstance(cause, ApplicationError):
        return cancelled(error)
    details = list(cause.details)
    if cause.type == "SessionNotFound":
        return SessionNotFound(session)
    if cause.type == "SessionBusy":
        return SessionBusy(session)
    if cause.type == "AlreadyAnswered":
        return AlreadyAnswered(session, str(details[0]) if details else "")
    if cause.type == "NoSuchEvent" and len(details) == 2:
        return NoSuchEvent(session, int(details[0]), int(details[1]))
    return ReactchatError(f"{cause.type}: {cause.message}")


# ---------------------------------------------------------------------- the agents

#: the agent of each task queue this process runs a worker for (``make_worker`` sets it):
#: what the workflows of that queue run
AGENTS: dict[str, Agent] = {}


def find_agent(root: Agent, path: str) -> Agent:
    """The agent at ``path`` (``boss/researcher``) of the tree under ``root``."""
    first, *rest = path.split("/")
    if first != root.name:
        raise LookupError(f"no agent {path!r} under {root.name!r}")
    agent = root
    for name in rest:
        subs = [t.agent for t in agent.tools if isinstance(t, SubAgent) and isinstance(t.agent, Agent)]
        agent = next(a for a in subs if a.name == name)
    return agent


__all__ = [
    "AGENTS",
    "ActivityTool",
    "CallLost",
    "ModelProxy",
    "StoreProxy",
    "find_agent",
]
