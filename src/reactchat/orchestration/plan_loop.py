"""The plan-and-execute loop of one run (``Agent(plan=True)``).

    planner ─► PlanEvent v1 ─► step 1 (a nested ReAct run) ─► replanner ─► continue | revise | answer
                                 ▲                                            │
                                 └──────────── next pending step ◄────────────┘

Every planner call is recorded (a ``PlanEvent``: the plan it wrote or revised, or its
decision to go on), and every step is a nested run started by an ``ActionEvent`` with
call id ``step-N`` and finished by its ``ObservationEvent``, exactly like a delegation
to a sub-agent (``reactchat.orchestration.nested``), so a plan resumes after a question or a crash
at any point: ``PlanState`` folds the run's events back into where it was.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TypeVar

from reactchat.engine.session import PlanState, step_call
from reactchat.engine.spec import AgentSpec
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    AssistantMessage,
    Event,
    ObservationEvent,
    PlanEvent,
    PlanStep,
    Request,
    TextPart,
    Usage,
    UserMessage,
)
from reactchat.orchestration.nested import NestedTurn, SubAgent, delegate
from reactchat.orchestration.plan import (
    PLANNER_RETRIES,
    PlanError,
    Replan,
    describe_executors,
    planner_request,
    read_plan,
    read_replan,
    replanner_request,
    step_task,
    words,
)
from reactchat.protocols.base import Call, ToolResult

if TYPE_CHECKING:
    from reactchat.engine.loop import Loop

T = TypeVar("T")


class PlanLoop(NestedTurn):
    """Plan-and-execute for one run, with the ways in of ``Loop`` (``start``, ``recover``)."""

    def __init__(self, agent: AgentSpec, loop: Loop, question: str, history: list[tuple[str, str]]) -> None:
        self.agent = agent
        self.loop = loop
        self.question = question
        self.history = history
        tools = [t.spec for t in loop.tools.values()]
        self.subagents = {t.name: t for t in loop.tools.values() if isinstance(t, SubAgent)}
        agents = [t.spec for t in self.subagents.values()]
        self.executors = describe_executors(agent.pack, tools, agents)

    async def go_on(self, events: list[Event]) -> AsyncIterator[Event]:
        """Go on from this run's stored ``events`` (none: plan first)."""
        state = PlanState.of(events)
        if not state.plans:
            yield await self._record(state, await self._plan())
        while True:
            if state.open is not None:
                finished = None
                async for item in self._run_step(state, state.open):
                    if isinstance(item, ObservationEvent) and item.run == self.loop.run:
                        finished = item  # the step's own observation, not one of its run's
                    yield item
                if finished is None:
                    return  # the step waits for the user: so does the plan
            if not state.decided:
                decision = await self._replan(state)
                if isinstance(decision, AnswerEvent):
                    yield await self._record(state, decision)
                    return
                yield await self._record(state, decision)
            number = state.next_pending()
            if number is None or state.executed >= self.agent.max_plan_steps:
                yield await self._record(state, await self._final(state))
                return
            step = state.steps[number - 1]
            tool = step.agent or self.agent.name
            yield await self._record(
                state, ActionEvent(call_id=step_call(number), tool=tool, input={"task": step.task})
            )

    async def _record(self, state: PlanState, event: Event) -> Event:
        state.add(await self.loop.emit(event))
        return event

    async def _run_step(self, state: PlanState, number: int) -> AsyncIterator[Event]:
        """Run (or continue) step ``number`` as a nested run; its observation when it ends."""
        step = state.steps[number - 1]
        call = Call(step_call(number), step.agent or self.agent.name, {"task": step.task})
        task = step_task(self.agent.pack, state.steps, number)
        path = f"{self.loop.agent}/step {number}"
        sub = self.subagents.get(step.agent or "")
        if sub is not None:
            runs = delegate(self.loop, sub.agent, call, f"{path}/{sub.name}", task, memory=sub.memory)
        else:
            runs = delegate(self.loop, self.agent, call, path, task, mode="react")
        result: ToolResult | None = None
        async for item in runs:
            if isinstance(item, ToolResult):
                result = item
            else:
                yield item
        if result is not None:
            observation = ObservationEvent(
                call_id=call.call_id, tool=call.tool, text=result.text, is_error=result.is_error
            )
            yield await self._record(state, observation)

    async def _plan(self) -> PlanEvent:
        """The first plan: the planner's, or the question as one step if it cannot write one."""
        agent = self.agent
        request = planner_request(agent.pack, self.question, self.history, self.executors, agent.max_plan_steps)
        steps, usage, seconds = await self._ask(
            request, lambda text: read_plan(agent.pack, text, set(self.subagents), agent.max_plan_steps)
        )
        plan = steps or [PlanStep(task=self.question)]
        return PlanEvent(version=1, decision="plan", steps=plan, usage=usage, seconds=seconds)

    async def _replan(self, state: PlanState) -> PlanEvent | AnswerEvent:
        """After a step: go on, revise the pending steps, or answer."""
        agent = self.agent
        steps_left = agent.max_plan_steps - state.executed
        replans_left = max(0, agent.max_replans - state.revisions)
        pending = state.next_pending() is not None
        if steps_left <= 0 or (not pending and replans_left == 0):
            return await self._final(state)
        request = replanner_request(agent.pack, self.question, state.steps, self.executors, replans_left, steps_left)
        decision, usage, seconds = await self._ask(
            request, lambda text: read_replan(agent.pack, text, set(self.subagents), steps_left)
        )
        if decision is not None and decision.action == "answer":
            return AnswerEvent(text=decision.answer, usage=usage, seconds=seconds)
        steps, version, kind = [s.model_copy() for s in state.steps], len(state.plans), "continue"
        if decision is not None and decision.action == "revise" and replans_left > 0:
            done = [s for s in steps if s.status in ("done", "failed")]
            steps, version, kind = done + decision.steps, version + 1, "revise"
        return PlanEvent(version=version, decision=kind, steps=steps, usage=usage, seconds=seconds)  # type: ignore[arg-type]

    async def _final(self, state: PlanState) -> AnswerEvent:
        """The answer when no step can run any more: the replanner's, else the last result."""
        agent = self.agent
        request = replanner_request(agent.pack, self.question, state.steps, self.executors, 0, 0)

        def answer_only(text: str) -> Replan:
            decision = read_replan(agent.pack, text, set(self.subagents), 0)
            if decision.action != "answer":
                raise PlanError(words(agent.pack).answer_now.format())
            return decision

        decision, usage, seconds = await self._ask(request, answer_only)
        if decision is not None:
            return AnswerEvent(text=decision.answer, usage=usage, seconds=seconds)
        results = [s.result for s in state.steps if s.result]
        reason = "max_plan_steps" if state.executed >= agent.max_plan_steps else "no_answer"
        text = results[-1] if results else ""
        return AnswerEvent(text=text, status="stopped", reason=reason, usage=usage, seconds=seconds)

    async def _ask(self, request: Request, read: Callable[[str], T]) -> tuple[T | None, Usage, float]:
        """One planner call, and up to ``PLANNER_RETRIES`` more with the correction of the last."""
        usage, seconds = Usage(), 0.0
        for _ in range(PLANNER_RETRIES + 1):
            self.loop.begin_step()
            reply, took = await self.loop.call_model(request)
            seconds += took
            usage = usage + reply.usage if reply.usage is not None else usage
            try:
                return read(reply.text), usage, seconds
            except PlanError as error:
                correction = [AssistantMessage(parts=[TextPart(text=reply.text)]), UserMessage(content=str(error))]
                request = request.model_copy(update={"messages": [*request.messages, *correction]})
        return None, usage, seconds


__all__ = ["PlanLoop"]
