"""Agents as tools: an ``Agent`` in another agent's ``tools=`` is a sub-agent.

The parent calls it like a tool whose input is ``{"task": "..."}``; the sub-agent runs
its own ReAct loop *inside that tool call*, in the same session and the same turn, and
its final answer is the parent's observation. Its events go to the session's one log
with ``agent`` = the path of agents (``"boss/researcher"``) and ``run`` = the id of the
nested run (the parent's call id, prefixed by the parent's own run id when the parent
is nested too), and they stream out live, in order, with the parent's.

A nested run is rebuilt from its own events like any turn, so it is as durable as one:
a question asked inside it makes the whole turn wait; after a crash or an answer the
turn resumes from the top and each open delegation continues its nested run instead of
running it again (``SubAgent`` is ``idempotent`` in that sense). See docs/agents.md.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from reactchat.engine.approval import Policy
from reactchat.engine.budget import Spending
from reactchat.engine.build import make_loop
from reactchat.engine.spec import AgentSpec, Mode
from reactchat.messages import AnswerEvent, Event, LinkSkippedEvent, UserEvent
from reactchat.models import ModelError
from reactchat.protocols.base import Call, ToolResult
from reactchat.store import Store
from reactchat.tools import Approval, Tool

if TYPE_CHECKING:
    from reactchat.engine.loop import Loop, Runners


class Delegator(Protocol):
    """What a delegation reads of the run that delegates (a ``Loop``; a Temporal child
    workflow stands in for its parent's loop with the same fields)."""

    @property
    def session(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def agent(self) -> str: ...
    @property
    def run(self) -> str: ...
    @property
    def max_depth(self) -> int: ...
    @property
    def stored(self) -> list[Event]: ...
    @property
    def runners(self) -> Runners: ...
    @property
    def store(self) -> Store: ...
    @property
    def on_delta(self) -> Callable[[str], Any] | None: ...
    @property
    def spending(self) -> Spending | None: ...
    @property
    def approval(self) -> Policy | None: ...


class NestedTurn(ABC):
    """A run made of nested runs over ``loop`` (plan-and-execute, Reflexion), with the ways
    in of ``Loop``: ``start`` and ``recover``; a subclass says how it goes on (``go_on``)."""

    loop: Loop

    async def start(self, message: str, skipped: Sequence[LinkSkippedEvent] = ()) -> AsyncIterator[Event]:
        """Record ``message``, then the links of it that were ``skipped``, and run a new turn for it
        (no span records the links: a nested turn has none of its own)."""
        for event in await self.loop.record(UserEvent(text=message), *skipped):  # durable together
            yield event
        async for event in self.recover([]):
            yield event

    def recover(self, events: list[Event]) -> AsyncIterator[Event]:
        """Go on from this run's stored ``events`` (a turn the caller stops is recorded as cancelled)."""
        return self.loop.stoppable(self.go_on(events))

    @abstractmethod
    def go_on(self, events: list[Event]) -> AsyncIterator[Event]:
        """The run's events from its stored ``events`` on (none: from the start)."""


class SubAgent(Tool):
    """A sub-agent as its parent sees it: a tool named after the agent, input ``{"task": ...}``.

    ``memory``: whether the sub-agent sees its earlier tasks and answers of the same
    session (across calls and turns); by default every call starts afresh. ``approval``:
    as ``@tool(approval=...)``, a human approves each delegation first (True), or those
    for which ``approval(arguments)`` is true; a refused one never starts the sub-agent.
    """

    def __init__(self, agent: AgentSpec, *, memory: bool = False, approval: Approval = False) -> None:
        def delegate(task: str) -> str:
            """Args:
            task: everything the agent needs to know to do the task, in one message.
            """
            raise TypeError("a sub-agent runs inside its parent's loop (SubAgent.stream), not as a function")

        description = agent.description or f"The agent {agent.name}: give it a task, it answers."
        super().__init__(
            delegate, name=agent.name, description=description, timeout=None, effect="idempotent", approval=approval
        )
        self.agent = agent
        self.memory = memory
        #: the loop runs this tool through ``stream`` (its events are the parent's to yield)
        self.streams = True

    def stream(self, call: Call, parent: Loop, arguments: dict[str, Any]) -> AsyncIterator[Event | ToolResult]:
        """Run (or continue) the sub-agent for ``call``: its events, then the parent's ``ToolResult``.

        Ends without a ``ToolResult`` when the sub-agent waits for the user.
        """
        path = f"{parent.agent}/{self.agent.name}"
        return delegate(parent, self.agent, call, path, str(arguments["task"]), memory=self.memory)


def run_id(parent: Delegator, call_id: str) -> str:
    """The id of the run started by ``call_id`` of ``parent``."""
    return f"{parent.run}/{call_id}" if parent.run else call_id


def refusal(parent: Delegator, child: AgentSpec, path: str, nested: str) -> str | None:
    """Why a delegation must not run (too deep, or back to an agent already on the path)."""
    if nested.count("/") + 1 > parent.max_depth:
        return (
            f"Error: {child.name} cannot be called here: sub-agents may nest {parent.max_depth} levels deep "
            "and this call would go deeper. Do this part yourself."
        )
    *names, last = path.split("/")
    if last in names:
        return (
            f"Error: {child.name} is already working further up ({'/'.join(names)}): delegating back to it would "
            "loop. Do this part yourself or give it to another agent."
        )
    return None


async def delegate(
    parent: Delegator,
    child: AgentSpec,
    call: Call,
    path: str,
    task: str,
    *,
    memory: bool = False,
    system: str | None = None,
    mode: Mode | None = None,
) -> AsyncIterator[Event | ToolResult]:
    """The nested run of ``child`` for ``call`` of ``parent``: its events, then its result.

    A run with stored events continues from them (after a crash, or once the user answered
    its question); one that already answered gives that answer again. A sub-agent that
    fails (its model raises) or is stopped by a guard gives an error observation: the
    parent decides what to do about it. No ``ToolResult`` at the end: the run waits.
    """
    nested = run_id(parent, call.call_id)
    refused = refusal(parent, child, path, nested)
    if refused is not None:
        yield ToolResult(refused, is_error=True)
        return
    stored = [e for e in parent.stored if e.run == nested or e.run.startswith(nested + "/")]
    mine = [e for e in stored if e.run == nested]
    answer = next((e for e in mine if isinstance(e, AnswerEvent)), None)
    if answer is None:
        history = await _history(parent, path, nested) if memory else []
        loop = await make_loop(
            child,
            parent.session,
            parent.turn,
            task,
            history,
            path=path,
            run=nested,
            runners=parent.runners,
            system=system,
            store=parent.store,
            stored=stored,
            on_delta=parent.on_delta,
            max_depth=parent.max_depth,
            spending=parent.spending,
            approval_above=parent.approval,
        )
        runner = parent.runners(child, loop, task, history, mine, mode)
        events = runner.recover(mine) if mine else runner.start(task)
        try:
            async for event in events:
                if isinstance(event, AnswerEvent) and event.run == nested:
                    answer = event
                yield event
        except ModelError as error:
            yield ToolResult(f"Error: {child.name} failed: {type(error).__name__}: {error}", is_error=True)
            return
    if answer is None:
        return  # it asked the user: the parent waits too
    if answer.status == "done":
        yield ToolResult(answer.text)
    else:
        reason = answer.reason or answer.status
        yield ToolResult(f"{child.name} stopped before finishing ({reason}); its best answer: {answer.text}", True)


async def _history(parent: Delegator, path: str, nested: str) -> list[tuple[str, str]]:
    """The earlier tasks and answers of the agent at ``path`` in this session (its memory)."""
    tasks: dict[tuple[int, str], str] = {}
    pairs: list[tuple[str, str]] = []
    for event in await parent.store.events(parent.session):
        if event.agent != path or event.run == nested:
            continue
        key = (event.turn, event.run)
        if isinstance(event, UserEvent) and key not in tasks:
            tasks[key] = event.text
        elif isinstance(event, AnswerEvent) and key in tasks:
            pairs.append((tasks[key], event.text))
    return pairs


__all__ = ["Delegator", "SubAgent", "delegate"]
