"""Sub-agents as child workflows: a call of a sub-agent in the workflow's engine starts the
workflow ``reactchat.nested``, which runs the sub-agent's nested run (its model and tool
calls activities again, its own sub-agents children again) and answers with what the
run yielded and its result.

The nested run is the engine's own (``reactchat.orchestration.nested.delegate``), over
the same session and turn: it reads the turn's events from the store, continues from
those of its run (after a question, a crash or a reply) and writes its own. A question
at any depth ends the child with no result: the parent's run then waits, like the turn.
An ``unsafe`` call lost in a child ends the child ``lost`` and the parent's stretch too,
for the engine's recovery to put the call in doubt.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import workflow
from temporalio.exceptions import CancelledError, ChildWorkflowError

from reactchat.agent import Agent
from reactchat.engine.approval import Policy
from reactchat.engine.budget import Budget, Spending
from reactchat.engine.loop import Runners
from reactchat.engine.spec import Hooks
from reactchat.messages import Event
from reactchat.orchestration.nested import SubAgent, delegate
from reactchat.orchestration.runners import runner
from reactchat.protocols.base import Call, ToolResult
from reactchat.store import Store
from reactchat.temporal._proxies import (
    AGENTS,
    ActivityTool,
    CallLost,
    ModelProxy,
    StoreProxy,
    event_json,
    find_agent,
    json_event,
)
from reactchat.tools import Approval, Tool


@dataclass
class Delegation:
    """What a child workflow runs: the call of the sub-agent ``tool`` made by the run
    ``run`` of the agent at ``agent``, in ``session``'s turn ``turn``."""

    session: str
    turn: int
    agent: str
    run: str
    call_id: str
    tool: str
    task: str
    memory: bool
    max_depth: int
    heartbeat: float
    budget: dict[str, Any] | None = None


@dataclass
class Delegated:
    """What the child's run yielded (events as JSON, stored already), then its result
    (``text``; None: it waits for the user); ``lost``: an unsafe call of it was lost."""

    events: list[str] = field(default_factory=list)
    text: str | None = None
    is_error: bool = False
    lost: bool = False


class ChildAgent(SubAgent):
    """A sub-agent whose runs are child workflows (see the module's docstring)."""

    def __init__(self, agent: Agent, memory: bool, heartbeat: float, approval: Approval) -> None:
        super().__init__(agent, memory=memory, approval=approval)
        self.heartbeat = heartbeat

    def stream(self, call: Call, parent: Any, arguments: dict[str, Any]) -> AsyncIterator[Event | ToolResult]:
        """The child workflow's events, then the parent's ``ToolResult`` (none: it waits)."""
        return self._child(call, parent, str(arguments["task"]))

    async def _child(self, call: Call, parent: Any, task: str) -> AsyncIterator[Event | ToolResult]:
        spending: Spending | None = parent.spending
        budget = vars(spending.budget) if spending is not None else None
        delegation = Delegation(parent.session, parent.turn, parent.agent, parent.run, call.call_id, self.name, task,
                                self.memory, parent.max_depth, self.heartbeat, budget)  # fmt: skip
        nested = f"{parent.run}/{call.call_id}" if parent.run else call.call_id
        store: StoreProxy = parent.store
        await store.flush()  # the child reads the turn's events from the store
        try:
            done: Delegated = await workflow.execute_child_workflow(
                "reactchat.nested",
                delegation,
                id=f"{workflow.info().workflow_id}/{nested}/{workflow.uuid4().hex[:8]}",
                result_type=Delegated,
                task_queue=workflow.info().task_queue,
            )
        except ChildWorkflowError as error:
            if isinstance(error.cause, CancelledError):  # cancelled with its parent
                raise asyncio.CancelledError() from None
            raise
        for text in done.events:
            event = json_event(text)
            store.saw(event.session, event.seq)
            if spending is not None:
                spending.add(event)
            yield event
        if done.lost:
            raise CallLost(self.name)
        if done.text is not None:
            yield ToolResult(done.text, done.is_error)


@dataclass
class Above:
    """The delegating run as a child workflow sees it (``Delegator``): its place, its rules
    and the turn's events so far."""

    session: str
    turn: int
    agent: str
    run: str
    max_depth: int
    stored: list[Event]
    runners: Runners
    store: Store
    spending: Spending | None
    approval: Policy | None
    on_delta: Callable[[str], Any] | None = None


@workflow.defn(name="reactchat.nested")
class NestedWorkflow:
    """One call of a sub-agent: its nested run, to its answer or its question."""

    @workflow.run
    async def run(self, delegation: Delegation) -> Delegated:
        """Run (or continue) the sub-agent's nested run; answer what it yielded."""
        root = AGENTS[workflow.info().task_queue]
        parent = find_agent(root, delegation.agent)
        child = find_agent(root, f"{delegation.agent}/{delegation.tool}")
        store = StoreProxy(root.store.url, owner=f"temporal-{workflow.info().run_id}")
        inflow = proxied(child, store, delegation.heartbeat, delegation.agent + "/")
        stored = [e for e in await store.events(delegation.session) if e.turn == delegation.turn]
        budget = Budget(**delegation.budget) if delegation.budget is not None else None
        spending = Spending.of(budget, stored) if budget is not None else None
        above = Above(delegation.session, delegation.turn, delegation.agent, delegation.run, delegation.max_depth,
                      stored, runner, store, spending, parent.approval)  # fmt: skip
        call = Call(delegation.call_id, delegation.tool, {"task": delegation.task})
        path = f"{delegation.agent}/{child.name}"
        done = Delegated()
        try:
            async for item in delegate(above, inflow, call, path, delegation.task, memory=delegation.memory):
                if isinstance(item, ToolResult):
                    done.text, done.is_error = item.text, item.is_error
                else:
                    done.events.append(event_json(item))
        except CallLost:
            done.lost = True
        await store.flush()  # what the run appended last (its question, its answer)
        return done


def proxiable(agent: Agent) -> bool:
    """Whether every part of ``agent`` (and of its sub-agents) can be proxied: no MCP
    toolsets, no hooks, no memory (they reach the store and the world on their own)."""
    hooks = agent.hooks
    if agent.toolsets or agent.memory is not None or agent.plan or agent.reflect is not None:
        return False
    if hooks.session_tools or hooks.turn_end or hooks.new_message or hooks.instructions:
        return False
    return all(proxiable(t.agent) for t in agent.tools if isinstance(t, SubAgent) and isinstance(t.agent, Agent))


def proxied(agent: Agent, store: StoreProxy, heartbeat: float, prefix: str = "") -> Agent:
    """A copy of ``agent`` whose model, tools and store (its sub-agents' too) are proxies."""
    path = f"{prefix}{agent.name}"
    inflow = copy.copy(agent)
    inflow._model = ModelProxy(agent.model, path, heartbeat, store)
    inflow._store = store
    inflow.tools = [_proxied_tool(t, store, heartbeat, path) for t in agent.tools]
    inflow.hooks = Hooks(lambda: store)
    return inflow


def _proxied_tool(tool: Tool, store: StoreProxy, heartbeat: float, path: str) -> Tool:
    if isinstance(tool, SubAgent) and isinstance(tool.agent, Agent):
        return ChildAgent(tool.agent, tool.memory, heartbeat, tool.approval)
    return ActivityTool(tool, path, heartbeat, store)


__all__ = ["ChildAgent", "Delegated", "Delegation", "NestedWorkflow", "proxiable", "proxied"]
