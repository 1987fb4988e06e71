"""The tool calls of a run: admit a call past its guards, have a human approve it, execute
it, and record what it observed. ``Loop`` is made of these (``Calls``) and of the recovery
after a crash (``reactchat.engine.recovery``).

``execute`` is the one place a tool runs; ``complete`` takes one call to its observation,
whatever the tool is (a plain function, a sub-agent that streams the events of its run,
a tool that asks the user).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from reactchat.engine import approval
from reactchat.engine.approval import Policy
from reactchat.engine.budget import Spending
from reactchat.engine.forks import ForkLookup
from reactchat.engine.guards import RepeatGuard, truncate, unknown_tool
from reactchat.engine.images import kept_images
from reactchat.engine.tracing import TurnTrace
from reactchat.messages import Event, ImagePart, ObservationEvent, QuestionEvent, StartedEvent
from reactchat.messages._fast import place
from reactchat.messages.images import Observation
from reactchat.protocols.base import Call, ToolResult, Transcript
from reactchat.store import Store
from reactchat.tools import PauseForUser, RunContext, Tool, ToolInputError, ToolTimeout, observation_text
from reactchat.tools.threads import ToolThreads

#: a call that passed its guards: the tool, its validated arguments, its repeat-guard key
Admitted = tuple[Tool, dict[str, Any], tuple[str, str]]
ONE_QUESTION = "Ask one question at a time; ask this one after the answer."
#: the observation of a call made once the turn's tool calls are spent
SPENT = "Not run: this turn has used its budget of tool calls. Answer with what you have."


class Calls:
    """Admit, approve, execute and observe the tool calls of one run (mixed into ``Loop``,
    which holds every field named here)."""

    session: str
    turn: int
    step: int
    agent: str
    run: str
    store: Store
    tools: dict[str, Tool]
    transcript: Transcript
    repeats: RepeatGuard
    max_observation: int
    threads: ToolThreads | None
    approval: Policy | None
    trace: TurnTrace
    deps: Any
    services: dict[str, Any]
    message: str
    forks: ForkLookup
    #: what the turn has spent of its budget (shared by every run of the turn), if it has one
    spending: Spending | None

    # ------------------------------------------------------------------ events

    async def emit(self, event: Event) -> Event:
        """Place an event in the session and make it durable."""
        return (await self.record(event))[0]

    async def record(self, *events: Event) -> tuple[Event, ...]:
        """Place events in the session and make them durable together (one store transaction)."""
        for event in events:
            self.place(event)
        await self.store.append(*events)
        if self.spending is not None:
            for event in events:
                self.spending.add(event)
        return events

    def place(self, event: Event) -> Event:
        """Give ``event`` its place: this run's session, turn, step, agent path and run id."""
        place(event, self.session, self.turn, self.step, self.agent, self.run)
        return event

    async def observe(self, call: Call, result: ToolResult, seconds: float = 0.0, interrupted: bool = False) -> Event:
        """Record an observation and show it to the model."""
        self.transcript.add_observation(call.call_id, result.text, result.is_error, result.images)
        return await self.emit(
            ObservationEvent.built(
                call_id=call.call_id,
                tool=call.tool,
                text=result.text,
                is_error=result.is_error,
                truncated=result.cut,
                interrupted=interrupted,
                seconds=seconds,
                images=result.images,
            )
        )

    # ------------------------------------------------------------------ one call

    def streams(self, call: Call) -> bool:
        """Whether the call runs another agent (its events are yielded as they come)."""
        tool = self.tools.get(call.tool)
        return tool is not None and tool.streams

    async def complete(self, call: Call, may_ask: bool = True, approved: bool = False) -> AsyncIterator[Event]:
        """Take one call to its observation: the events of the run it starts (a sub-agent),
        then its ``ObservationEvent``. When the tool asks the user (or a human must approve
        the call first, unless ``approved``), its ``QuestionEvent`` instead (``may_ask``;
        otherwise the tool is told to ask one question at a time); nothing more when the
        nested run it started waits for the user."""
        if not self.streams(call):
            yield await self.finish(call, may_ask, approved)
            return
        started = time.perf_counter()
        result: ToolResult | None = None
        try:
            async for item in self.run_call(call, approved):
                if isinstance(item, ToolResult):
                    result = item
                else:
                    yield item
        except PauseForUser as pause:
            if may_ask:
                yield await self.ask(call, pause)
                return  # the observation is the user's answer, recorded on resume
            result = ToolResult(ONE_QUESTION, is_error=True)
        if result is not None:
            yield await self.observe(call, result, time.perf_counter() - started)

    async def finish(self, call: Call, may_ask: bool = True, approved: bool = False) -> Event:
        """``complete`` for a call of a plain tool (or one its guards refuse), awaited with no
        generator in between: its ``ObservationEvent``, or its ``QuestionEvent`` when the tool
        asks the user or a human must approve the call first (see ``complete``)."""
        started = time.perf_counter()
        try:
            result = await self.execute(call, approved=approved)
        except PauseForUser as pause:
            if may_ask:
                return await self.ask(call, pause)  # the observation is the user's answer, recorded on resume
            result = ToolResult(ONE_QUESTION, is_error=True)
        return await self.observe(call, result, time.perf_counter() - started)

    async def ask(self, call: Call, pause: PauseForUser) -> Event:
        """Record the question a call asks the user (linked to this run's span for its resumption)."""
        question = QuestionEvent(
            call_id=call.call_id, question=pause.question, kind=pause.kind, trace=self.trace.traceparent
        )
        return await self.emit(question)

    async def run_call(self, call: Call, approved: bool = False) -> AsyncIterator[Event | ToolResult]:
        """Run one call: its ``ToolResult``, after the events of the run it starts when the tool
        runs another agent (a sub-agent: ``Tool.streams``; a call to it is approved like any
        other's). No result: that run waits for the user."""
        admitted = self.admit(call)
        if isinstance(admitted, ToolResult):
            yield admitted
            return
        tool, arguments, key = admitted
        if not tool.streams:
            yield await self.execute(call, admitted, approved)
            return
        if not approved and self.needs_approval(tool, arguments):
            raise PauseForUser(approval.question(call.tool, arguments, self.agent), kind="approval")
        async for item in tool.stream(call, self, arguments):
            if isinstance(item, ToolResult):
                self.repeats.remember(key, item.text, tool.effect)
            yield item

    def admit(self, call: Call) -> Admitted | ToolResult:
        """The tool, the validated arguments and the repeat key of a call, or why it does not run.

        An identical call made earlier in the run is not run again, whether it worked or
        failed: a model that calls a broken tool over and over (the hallucination spiral)
        is told the earlier result instead.
        """
        name, value = call.tool, call.input
        tool = self.tools.get(name)
        try:
            if tool is None:
                raise ToolInputError(unknown_tool(name, list(self.tools)))
            arguments = tool.validate(value)
        except ToolInputError as error:
            key = self.repeats.key(name, value)
            previous = self.repeats.previous(key)
            if previous is not None:
                return ToolResult(self.repeats.refuse(name, previous), is_error=True)
            self.repeats.remember(key, str(error))
            return ToolResult(str(error), is_error=True)
        key = self.repeats.key(name, arguments)
        previous = None if tool.volatile else self.repeats.previous(key)
        if previous is not None:
            return ToolResult(self.repeats.refuse(name, previous), is_error=True)
        return tool, arguments, key

    async def execute(self, call: Call, admitted: Admitted | None = None, approved: bool = False) -> ToolResult:
        """Run one call of a plain tool (raises ``PauseForUser``, also to ask a human to approve
        the call unless ``approved``); see ``admit`` for the guards (``admitted``: what
        ``admit`` already said about this call)."""
        checked = admitted or self.admit(call)
        if isinstance(checked, ToolResult):
            return checked
        tool, arguments, key = checked
        name = call.tool
        if self.spending is not None and not self.spending.calls_left(self.run, call.call_id):
            return ToolResult(SPENT, is_error=True)
        fork = await self.forks.memory()  # a forked session reuses or asks (engine/forks.py)
        if not approved and (self.needs_approval(tool, arguments) or fork.must_approve(tool, arguments)):
            raise PauseForUser(approval.question(name, arguments, self.agent), kind="approval")
        if (reused := fork.reused(tool, arguments)) is not None:
            self.repeats.remember(key, reused, tool.effect)
            return ToolResult(reused)
        context = self.context(call.call_id) if tool.context_params else None
        images: tuple[ImagePart, ...] = ()
        with self.trace.tool(name, call.call_id, arguments) as span:
            try:
                value = await tool.run(arguments, context, self.threads)
                if isinstance(value, Observation):
                    images = value.images
                output = observation_text(value)
                is_error = False
            except PauseForUser:
                raise
            except ToolTimeout as error:
                span.failed(error)
                output, is_error = f"Error: {error}. Try a simpler request or another tool.", True
            except Exception as error:  # a tool's failure is the model's problem to route around
                span.failed(error)
                output, is_error = f"Error: {name} raised {type(error).__name__}: {error}", True
            text, cut = truncate(output, tool.max_chars or self.max_observation)
            span.result(text)
        self.repeats.remember(key, text, tool.effect)
        kept = await kept_images(self.store, self.session, images) if images else ()
        return ToolResult(text, is_error, cut, kept)

    def context(self, call_id: str) -> RunContext:
        """What a tool that asks for it (a ``RunContext`` parameter) is told about call ``call_id``."""
        return RunContext(
            self.session,
            self.turn,
            call_id,
            self.store,
            self.deps,
            self.services,
            self.agent,
            self.run,
            message=self.message,
        )

    # ------------------------------------------------------------------ approval

    async def approved_run(self, call: Call) -> ToolResult:
        """Run a call a human approved (or asked to run again after a crash), recorded as
        started first (``StartedEvent``)."""
        await self.emit(StartedEvent(call_id=call.call_id))
        try:
            return await self.execute(call, approved=True)
        except PauseForUser:
            return ToolResult(ONE_QUESTION, is_error=True)

    def needs_approval(self, tool: Tool, arguments: dict[str, Any]) -> bool:
        """Whether a human must approve this call before it runs (the tool's or the agent's rule)."""
        rule = tool.approval
        if rule is True or (callable(rule) and rule(arguments)):
            return True
        return self.approval is not None and self.approval(tool.name, arguments)

    async def decide(self, call: Call, reply: str) -> ToolResult:
        """Run, run with edited arguments, or refuse a call that waited for approval."""
        verdict = approval.decide(reply, call.input)
        if not verdict.approved:
            return ToolResult(approval.refusal(verdict))
        result = await self.approved_run(Call(call.call_id, call.tool, verdict.arguments))
        if verdict.edited:
            result = ToolResult(approval.edited_note(verdict.arguments) + result.text, result.is_error, result.cut)
        return result


__all__ = ["ONE_QUESTION", "Admitted", "Calls"]
