"""The activities behind the workflow's proxies (``_proxies``): one model call, one tool
call, one reconcile, one store call, each on the worker's real agent.

A store call is a local activity: a worker that died after running one but before its
workflow task was recorded leaves it to be run again by the worker that replays the
workflow; and the appends a model or tool activity carries are made again by its retry.
So an append first reads the log from the position it expects: the first of its events
that the log ends with (same kind, place, call and text) were made already and are not
made again; a lock read that finds its own opening event there takes it as its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from reactchat.agent import Agent
from reactchat.errors import ReactchatError
from reactchat.messages import Event, Request
from reactchat.messages.images import Observation
from reactchat.models import ContextTooLong, ModelError
from reactchat.store import Store
from reactchat.temporal._activities import HEARTBEAT
from reactchat.temporal._proxies import (
    ModelAnswer,
    ModelCall,
    StoreAnswer,
    StoreCall,
    ToolCall,
    ToolOutcome,
    event_json,
    find_agent,
    json_event,
)
from reactchat.tools import PauseForUser, RunContext, Tool, ToolTimeout, observation_text


@contextlib.asynccontextmanager
async def beating() -> AsyncIterator[None]:
    """Heartbeats while a call runs: a dead worker is noticed within the heartbeat timeout."""
    beat = asyncio.create_task(_heartbeats(activity.info().heartbeat_timeout))
    try:
        yield
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat


async def _heartbeats(timeout: timedelta | None) -> None:
    """Heartbeat a third of the timeout apart, at least every ``HEARTBEAT`` seconds; not at
    the start (the timeout counts from it): a call shorter than that sends none, one
    request to the server fewer."""
    seconds = min(timeout.total_seconds() / 3, HEARTBEAT) if timeout is not None else HEARTBEAT
    while True:
        await asyncio.sleep(seconds)
        activity.heartbeat()


class Calls:
    """The per-call activities, over one agent (its sub-agents are found by path)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def carried(self, call: StoreCall | None) -> list[int]:
        """Make the appends an activity carries (before its call), once; their seqs."""
        return [] if call is None else (await self.store(call)).seqs

    @activity.defn(name="reactchat.model")
    async def model(self, call: ModelCall) -> ModelAnswer:
        """One model call of the agent at ``call.path``, after the appends it carries."""
        model = find_agent(self.agent, call.path).model
        request = Request.model_validate_json(call.request)
        seqs = await self.carried(call.carried)
        async with beating():
            try:
                reply = await model.complete(request)
            except ContextTooLong as error:
                raise ApplicationError(str(error), type="ContextTooLong", non_retryable=True) from None
            except ModelError as error:
                raise ApplicationError(str(error), type="ModelError", non_retryable=True) from None
        return ModelAnswer(reply.model_dump_json(), seqs)

    @activity.defn(name="reactchat.tool")
    async def tool(self, call: ToolCall) -> ToolOutcome:
        """One tool call: what it returned, asked or raised (a tool's failure is the model's
        to route around, so it is an outcome, not a failed activity)."""
        agent, tool = self._tool(call)
        seqs = await self.carried(call.carried)  # an unsafe call's action is durable before it runs
        context = None
        if tool.context_params:
            store = self.agent.store
            context = RunContext(call.session, call.turn, call.call_id, store, agent.deps, agent.services,
                                 call.agent, call.run, message=call.message)  # fmt: skip
        async with beating():
            try:
                value = await tool.run(json.loads(call.arguments), context, agent.threads)
            except PauseForUser as pause:
                return ToolOutcome(pause=pause.question, kind=pause.kind, seqs=seqs)
            except ToolTimeout as error:
                return ToolOutcome(text=str(error), timeout=True, seqs=seqs)
            except Exception as error:
                return ToolOutcome(text=str(error), error=type(error).__name__, seqs=seqs)
        images = ""
        if isinstance(value, Observation) and value.images:
            images = json.dumps([i.model_dump(mode="json") for i in value.images])
        return ToolOutcome(text=observation_text(value), images=images, seqs=seqs)

    @activity.defn(name="reactchat.reconcile")
    async def reconcile(self, call: ToolCall) -> str | None:
        """The tool's ``reconcile`` for a call a crash cut off: its result, or None."""
        _, tool = self._tool(call)
        assert tool.reconcile is not None  # only a tool with one asks
        found = tool.reconcile(**json.loads(call.arguments))
        if asyncio.iscoroutine(found):
            found = await found
        return None if found is None else str(found)

    def _tool(self, call: ToolCall) -> tuple[Agent, Tool]:
        agent = find_agent(self.agent, call.path)
        return agent, next(t for t in agent.tools if t.name == call.tool)

    @activity.defn(name="reactchat.store")
    async def store(self, call: StoreCall) -> StoreAnswer:
        """One store call of the workflow's engine; a reactchat error is not retried."""
        try:
            return await store_call(self.agent.store, call)
        except ReactchatError as error:
            details = [getattr(error, name) for name in ("reply_to", "seq", "last") if hasattr(error, name)]
            raise ApplicationError(str(error), *details, type=type(error).__name__, non_retryable=True) from None


async def store_call(store: Store, call: StoreCall) -> StoreAnswer:
    """Make ``call`` on ``store``; appends once (see the module's docstring)."""
    session, args = call.session, call.args
    events = [json_event(e) for e in call.events]
    if call.method == "create_session":
        if not await store.exists(session):
            await store.create_session(session)
        return StoreAnswer()
    if call.method == "exists":
        return StoreAnswer(value=await store.exists(session))
    if call.method in ("events", "turn_events"):
        read = await (store.events(session, int(args[0])) if call.method == "events" else store.turn_events(session))
        return StoreAnswer(events=[event_json(e) for e in read])
    if call.method in ("append", "append_unlock"):
        return await _append(store, call, events)
    if call.method == "try_lock":
        return StoreAnswer(value=await store.try_lock(session, str(args[0]), float(args[1])))
    if call.method == "try_lock_read":
        return await _lock_read(store, call, events)
    if call.method == "unlock":
        await store.unlock(session, str(args[0]))
        return StoreAnswer()
    if call.method == "origin":
        origin = await store.origin(session)
        return StoreAnswer(value=list(origin) if origin is not None else None)
    raise ValueError(f"no store call {call.method!r}")


async def _append(store: Store, call: StoreCall, events: list[Event]) -> StoreAnswer:
    made: list[Event] = []
    if call.expected is not None:
        # made before, by a worker that died unrecorded, or by an activity that carried them
        # and failed: the log ends with them (all, or the first of them)
        there = await store.events(call.session, since=call.expected)
        made = there[len(there) - overlap(there, events) :] if there else []
    rest = events[len(made) :]
    if call.method == "append" and rest:
        await store.append(*rest)
    elif call.method == "append_unlock":
        owner = str(call.args[0])
        await (store.append_unlock(owner, *rest) if rest else store.unlock(call.session, owner))
    return StoreAnswer(seqs=[e.seq for e in [*made, *rest]])


def overlap(there: Sequence[Event], events: Sequence[Event]) -> int:
    """How many of the first ``events`` the stored events ``there`` end with."""
    for count in range(min(len(there), len(events)), 0, -1):
        if ours(there[len(there) - count :], events[:count]):
            return count
    return 0


async def _lock_read(store: Store, call: StoreCall, then: list[Event]) -> StoreAnswer:
    owner, ttl, since = str(call.args[0]), float(call.args[1]), call.args[2]
    read = await store.try_lock_read(call.session, owner, ttl, None if since is None else int(since), tuple(then))
    if read is None:
        return StoreAnswer(none=True)
    if not read:  # nothing newer: ``then`` was appended now
        return StoreAnswer(seqs=[e.seq for e in then])
    if then and ours(read[: len(then)], then):  # appended before, by a worker that died unrecorded
        return StoreAnswer(events=[event_json(e) for e in read[len(then) :]], seqs=[e.seq for e in read[: len(then)]])
    return StoreAnswer(events=[event_json(e) for e in read])


def ours(there: Sequence[Event], events: Sequence[Event]) -> bool:
    """Whether the stored events ``there`` are ``events`` (made again on a replay: the same
    kind, place, call and text; only their times differ)."""
    return len(there) == len(events) > 0 and all(_key(a) == _key(b) for a, b in zip(there, events, strict=True))


def _key(event: Event) -> tuple[Any, ...]:
    return (type(event).__name__, event.session, event.turn, event.step, event.agent, event.run,
            getattr(event, "call_id", None), getattr(event, "text", None))  # fmt: skip


__all__ = ["Calls", "ours", "store_call"]
