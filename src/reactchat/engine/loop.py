"""The agent loop: one run, from a message to an answer or a question.

    prompt ─► model ─► parse ─► (format error ─► correction) | final answer
                               | actions ─► guards ─► tools ─► observations ─► loop

Every event is appended to the store before the next thing happens, so a run can be
resumed from its last durable event by any process (``replay`` rebuilds the
``Transcript`` and the guards). Errors the model can fix become observations; errors
the operator must fix raise. ``call_model`` is the one place a model is called and
``execute`` the one place a tool runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from reactchat.engine import approval
from reactchat.engine.approval import Policy
from reactchat.protocols.base import Call, FormatError, ToolResult, Transcript
from reactchat.engine.guards import RepeatGuard, truncate, unknown_tool
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    QuestionEvent,
    Reply,
    Request,
    ThoughtEvent,
    Usage,
    UserEvent,
)
from reactchat.models import ContextTooLong, Model, ModelError
from reactchat.engine.output import Output, OutputInvalid
from reactchat.engine.session import Pending
from reactchat.store import Store, append_and_unlock
from reactchat.engine.threads import ToolThreads
from reactchat.tools import PauseForUser, RunContext, Tool, ToolInputError, ToolTimeout, observation_text
from reactchat.engine.tracing import NO_TRACE, TurnTrace, start_turn
from reactchat.engine.usage import measured

#: the observation of a call a crash cut off (the event says so in ``interrupted``)
INTERRUPTED = (
    "This call was interrupted before it returned (the process running it stopped), so its "
    "effect is unknown and it was not run again. Check before relying on it."
)
#: a call that passed its guards: the tool, its validated arguments, its repeat-guard key
Admitted = tuple[Tool, dict[str, Any], tuple[str, str]]
ONE_QUESTION = "Ask one question at a time; ask this one after the answer."


#: the message of a cancellation that stops a run because its process shuts down
#: (``task.cancel(SHUTDOWN)``): the turn is left interrupted, not recorded as cancelled
SHUTDOWN = "reactchat: shutting down"


@dataclass
class Loop:
    """The ReAct loop of one run: one agent, in one turn of one session.

    A turn's top-level run has ``run=""``; a run started by a tool call of another run
    (a sub-agent) has its own ``run`` id and ``agent`` path, and its events go to the
    same session's log, told apart by those two fields.
    """

    session: str
    turn: int
    model: Model
    store: Store
    tools: dict[str, Tool]
    transcript: Transcript
    max_steps: int
    max_observation: int
    context_chars: int
    repeats: RepeatGuard
    agent: str = ""
    run: str = ""
    deps: Any = None
    services: dict[str, Any] = field(default_factory=dict)
    #: the threads sync tools run on (the agent's)
    threads: ToolThreads | None = None
    #: where a streaming model's text goes as it comes (``Agent.stream(deltas=True)``)
    on_delta: Callable[[str], Any] | None = None
    #: ``Agent(approval=...)``: policy(tool name, arguments) -> whether a human approves the call first
    approval: Policy | None = None
    step: int = 0
    #: the OpenTelemetry span of this run (``tracing.NO_TRACE`` when not traced)
    trace: TurnTrace = NO_TRACE
    #: traceparents of earlier runs of this turn that paused on a question (for span links)
    resumes: list[str] = field(default_factory=list)
    #: the turn's events when this loop was made, every run's (nested runs continue from theirs)
    stored: list[Event] = field(default_factory=list)
    #: how many levels of nested runs (sub-agents, plan steps, trials) may sit below the top
    max_depth: int = 3
    #: what the final answer must be (``Agent(output_type=...)``), and corrections sent so far
    output: Output | None = None
    output_corrections: int = 0
    #: the user's message that opened the turn (tools see it as ``RunContext.message``)
    message: str = ""
    #: the owner of the turn's lock when this run's final answer ends the turn (``Run`` sets it):
    #: the lock then ends in the answer's own store transaction, and ``released`` says it did
    release: str | None = None
    released: bool = False

    # ------------------------------------------------------------------ ways in

    def start(self, message: str, opening: UserEvent | None = None) -> AsyncIterator[Event]:
        """Run a new turn for ``message``; ``opening`` is its event when already recorded (``Run``
        records it with the turn's lock, in one store transaction)."""
        return self.invoke(opening or UserEvent(text=message), recorded=opening is not None)

    async def resume(self, pending: Pending, reply: str) -> AsyncIterator[Event]:
        """Continue a run that waits on ``pending`` with the user's ``reply`` as its observation.

        For an approval request (``pending.kind == "approval"``) the reply decides the
        call instead: it runs as it is, runs with the user's arguments, or is refused
        with the user's reason as its observation (``reactchat.engine.approval``).
        """
        self.step = max(self.step, pending.step)
        yield await self.emit(UserEvent(text=reply))
        call = Call(pending.call_id, pending.tool, pending.input)
        started = time.perf_counter()
        result = await self.decide(call, reply) if pending.kind == "approval" else ToolResult(reply)
        yield await self.observe(call, result, time.perf_counter() - started)
        async for event in self.invoke():
            yield event

    async def recover(self, events: list[Event]) -> AsyncIterator[Event]:
        """Finish a run a crash or a model error interrupted, from its last durable event."""
        asked = False
        async for event in self.finish_interrupted(events):
            asked = asked or isinstance(event, QuestionEvent)
            yield event
        if not asked:  # else the run waits for the user, like any ask_user step
            async for event in self.invoke():
                yield event

    # ------------------------------------------------------------------ the loop

    async def invoke(self, opening: Event | None = None, recorded: bool = False) -> AsyncIterator[Event]:
        """``steps``, traced as one ``invoke_agent`` span when OpenTelemetry is installed;
        ``opening`` (a new turn's message) is recorded first, unless it is ``recorded`` already,
        before the span starts (one generator per turn fewer than a ``start`` of its own around this one)."""
        if opening is not None:
            yield opening if recorded else await self.emit(opening)
        self.trace = start_turn(self.agent.rsplit("/", 1)[-1], self.session, self.model.name, self.resumes)
        status: str = "interrupted"
        failure: BaseException | None = None
        usages: list[Usage] = []
        traced = self.trace is not NO_TRACE  # the span's token counts; nothing to count without one
        try:
            async for event in self.steps():
                if traced and isinstance(event, ThoughtEvent | AnswerEvent | ErrorEvent) and event.usage is not None:
                    usages.append(event.usage)
                if isinstance(event, QuestionEvent) or (isinstance(event, AnswerEvent) and event.run == self.run):
                    status = event.status if isinstance(event, AnswerEvent) else "waiting"
                yield event
        except asyncio.CancelledError as error:
            failure = error
            if await self.stopped(error):
                status = "cancelled"
            raise
        except BaseException as error:
            failure = error
            raise
        finally:
            self.trace.end(status, usages, failure)

    async def stopped(self, error: asyncio.CancelledError) -> bool:
        """Record that the caller stopped the run (a stop button, Ctrl-C, ``task.cancel()``);
        the caller lets the cancellation go on. The model call in flight was closed by the
        cancellation; the run ends here, with everything it had observed. A process shutting
        down (``SHUTDOWN``) records nothing: the turn stays interrupted and the next run
        finishes it. Whether a cancelled answer was recorded."""
        if error.args[:1] == (SHUTDOWN,):
            return False
        await self.emit(AnswerEvent(text="", status="cancelled", reason="cancelled"))
        return True

    async def stoppable(self, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """``events`` of a run that does not go through ``invoke`` (plan-and-execute,
        Reflexion), recorded as cancelled like ``invoke``'s if the caller stops them."""
        try:
            async for event in events:
                yield event
        except asyncio.CancelledError as error:
            await self.stopped(error)
            raise

    async def steps(self) -> AsyncIterator[Event]:
        """Step until a final answer, a question for the user, or a guard stops the run."""
        while True:
            if self.step >= self.max_steps:
                yield await self.best_effort("max_steps")
                return
            if self.repeats.exhausted:
                yield await self.best_effort("repeated_action")
                return
            request = self.fit_context()
            if request is None:
                yield await self.best_effort("context")
                return
            self.step += 1
            try:
                reply, seconds = await self.call_model(request, retrying=True)
            except ContextTooLong as error:
                # elide old observations and try once more; only a second failure is recorded
                request = self.shrink_context()
                if request is None:
                    await self.emit(ErrorEvent(kind="model", message=f"{type(error).__name__}: {error}"))
                    raise
                reply, seconds = await self.call_model(request)
            try:
                decision = self.transcript.read(reply)
            except FormatError as error:
                yield await self.emit(
                    ErrorEvent(kind="format", message=str(error), raw=reply.text, seconds=seconds, usage=reply.usage)
                )
                self.transcript.add_correction(reply.text, str(error))
                continue
            if decision.answer is not None:
                answer = AnswerEvent(text=decision.answer, thought=decision.thought, seconds=seconds, usage=reply.usage)
                refused = self.typed(answer, reply.text)
                if refused is not None:
                    yield await self.emit(refused)
                    self.transcript.add_correction(reply.text, refused.message)
                    continue
                yield await self.conclude(answer)
                return
            # the events of every step are built from values made here: not validated again
            thought = ThoughtEvent.built(text=decision.thought, raw=decision.raw, seconds=seconds, usage=reply.usage)
            calls = [
                Call(call_id or f"call_{self.turn}_{self.step}_{i}", tool, value)
                for i, (call_id, tool, value) in enumerate(decision.calls)
            ]
            self.transcript.add_step(decision.raw, decision.thought, calls)
            finished = False
            async for event in self.run_calls(calls, thought):
                yield event
                # a question at any depth ends this run too (it waits); an answer only if it is its own
                finished = (
                    finished
                    or isinstance(event, QuestionEvent)
                    or (isinstance(event, AnswerEvent) and event.run == self.run)
                )
            if finished:
                return

    def typed(self, answer: AnswerEvent, raw: str) -> ErrorEvent | None:
        """Hold a final answer to the agent's ``output_type``: its text becomes the validated
        JSON, or the correction to send back (``None`` when there is nothing to correct).
        Past ``output.retries`` corrections the answer stands, ``stopped`` for ``invalid_output``."""
        if self.output is None:
            return None
        try:
            answer.text = self.output.dump(self.output.validate(answer.text))
        except OutputInvalid as invalid:
            if self.output_corrections >= self.output.retries:
                answer.status, answer.reason = "stopped", "invalid_output"
                return None
            self.output_corrections += 1
            return ErrorEvent(kind="output", message=str(invalid), raw=raw, seconds=answer.seconds, usage=answer.usage)
        return None

    async def call_model(self, request: Request, retrying: bool = False) -> tuple[Reply, float]:
        """One model call; a failure is recorded, then raised for the operator (except a
        ``ContextTooLong`` the caller is ``retrying`` after shrinking the prompt)."""
        if self.on_delta is not None:
            request.on_delta = self.on_delta
        if self.output is not None:
            request.output_schema = self.output.schema
        started = time.perf_counter()
        try:
            with self.trace.chat(request) as span:
                reply = await self.model.complete(request)
                # stored usage names its model (for prices) and is estimated where the server gave none
                reply.usage = measured(self.model.name, request, reply)
                span.finish(reply, reply.usage)
        except Exception as exc:
            if not (retrying and isinstance(exc, ContextTooLong)):
                await self.emit(ErrorEvent(kind="model", message=f"{type(exc).__name__}: {exc}"))
            raise
        return reply, time.perf_counter() - started

    async def run_calls(self, calls: list[Call], thought: ThoughtEvent) -> AsyncIterator[Event]:
        """Run a step's tool calls in order; each gets exactly one observation.

        The thought is recorded with the first action (one store transaction fewer per
        step); every action is durable before its tool runs.
        """
        question: QuestionEvent | None = None
        waiting = False
        direct: str | None = None
        pending: tuple[Event, ...] = (thought,)
        if not calls:
            yield await self.emit(thought)
        for call in calls:
            action = ActionEvent.built(call_id=call.call_id, tool=call.tool, input=call.input)
            for event in await self.record(*pending, action):
                yield event
            pending = ()
            started = time.perf_counter()
            result: ToolResult | None = None
            tool = self.tools.get(call.tool)
            try:
                if tool is None or not tool.streams:
                    # a plain tool (or a call its guards refuse): awaited, no generator in between
                    result = await self.execute(call)
                else:
                    async for item in self.run_call(call):
                        if isinstance(item, ToolResult):
                            result = item
                        else:
                            yield item
            except PauseForUser as pause:
                if question is None and not waiting:
                    question = QuestionEvent(
                        call_id=call.call_id, question=pause.question, kind=pause.kind, trace=self.trace.traceparent
                    )
                    yield await self.emit(question)
                    continue  # the observation is the user's answer, recorded on resume
                result = ToolResult(ONE_QUESTION, is_error=True)
            if result is None:
                waiting = True  # the nested run it started waits for the user: so does this one
                continue
            yield await self.observe(call, result, time.perf_counter() - started)
            if tool is not None and tool.return_direct and not result.is_error and direct is None:
                direct = result.text
        if question is None and not waiting and direct is not None:
            # "intent recognition + direct tool output": no summarising model call
            yield await self.conclude(AnswerEvent(text=direct, thought=thought.text))

    def question(self, call: Call, text: str) -> QuestionEvent:
        """The question ``call`` asks the user (linked to this run's span for its resumption)."""
        return QuestionEvent(call_id=call.call_id, question=text, trace=self.trace.traceparent)

    async def observe(self, call: Call, result: ToolResult, seconds: float = 0.0, interrupted: bool = False) -> Event:
        """Record an observation and show it to the model."""
        self.transcript.add_observation(call.call_id, result.text, result.is_error)
        return await self.emit(
            ObservationEvent.built(
                call_id=call.call_id,
                tool=call.tool,
                text=result.text,
                is_error=result.is_error,
                truncated=result.cut,
                interrupted=interrupted,
                seconds=seconds,
            )
        )

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
        try:
            result = await self.execute(Call(call.call_id, call.tool, verdict.arguments), approved=True)
        except PauseForUser:
            result = ToolResult(ONE_QUESTION, is_error=True)
        if verdict.edited:
            result = ToolResult(approval.edited_note(verdict.arguments) + result.text, result.is_error, result.cut)
        return result

    async def run_call(self, call: Call) -> AsyncIterator[Event | ToolResult]:
        """Run one call: its ``ToolResult``, after the events of the run it starts when the tool
        runs another agent (a sub-agent: ``Tool.streams``). No result: that run waits for the user."""
        admitted = self.admit(call)
        if isinstance(admitted, ToolResult):
            yield admitted
            return
        tool, arguments, key = admitted
        if not tool.streams:
            yield await self.execute(call, admitted)
            return
        async for item in tool.stream(call, self, arguments):
            if isinstance(item, ToolResult):
                self.repeats.remember(key, item.text)
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
        if not approved and self.needs_approval(tool, arguments):
            raise PauseForUser(approval.question(name, arguments), kind="approval")
        context = self.context(call.call_id) if tool.context_params else None
        with self.trace.tool(name, call.call_id, arguments) as span:
            try:
                output = observation_text(await tool.run(arguments, context, self.threads))
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
        self.repeats.remember(key, text)
        return ToolResult(text, is_error, cut)

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

    # ------------------------------------------------------------------ the context budget

    def fit_context(self) -> Request | None:
        """The next request, with old observations elided if the context budget demands it."""
        while self.transcript.size > self.context_chars:
            if not self.transcript.elide_oldest():
                return None
        return self.transcript.request()

    def shrink_context(self) -> Request | None:
        """After the model said the prompt does not fit: lower the budget below what was
        sent and elide old observations to fit it; None when nothing could be elided."""
        before = self.transcript.size
        self.context_chars = min(self.context_chars, before * 3 // 4)
        while self.transcript.size > self.context_chars and self.transcript.elide_oldest():
            pass
        return self.transcript.request() if self.transcript.size < before else None

    async def best_effort(self, reason: str) -> Event:
        """End a run that a guard stopped: one last call asks for the best answer so far.

        If that call fails too, the run still ends (stopped, with the error as its text):
        a turn left open would make every later message of the session replay the failure.
        """
        while self.transcript.size > self.context_chars and self.transcript.elide_oldest():
            pass
        try:
            reply, seconds = await self.call_model(self.transcript.request(final=True))
        except ModelError as error:
            text = f"The run stopped ({reason}) and the model could not give a final answer: {error}"
            return await self.conclude(AnswerEvent(text=text, status="stopped", reason=reason))
        return await self.conclude(
            AnswerEvent(
                text=self.transcript.read_final(reply),
                status="stopped",
                reason=reason,
                best_effort=True,
                seconds=seconds,
                usage=reply.usage,
            )
        )

    # ------------------------------------------------------------------ events

    async def emit(self, event: Event) -> Event:
        """Stamp an event with its place in the session and make it durable."""
        return (await self.record(event))[0]

    async def conclude(self, answer: AnswerEvent) -> Event:
        """Record this run's final answer; with ``release``, the turn's lock ends in the same
        store transaction (one commit fewer per turn)."""
        if self.release is None:
            return await self.emit(answer)
        answer.__dict__.update(session=self.session, turn=self.turn, step=self.step, agent=self.agent, run=self.run)
        await append_and_unlock(self.store, self.release, answer)
        self.released = True
        return answer

    async def record(self, *events: Event) -> tuple[Event, ...]:
        """Stamp events and make them durable together (one store transaction)."""
        for event in events:
            # plain dict update: pydantic's __setattr__ is a measurable part of a step's cost
            event.__dict__.update(session=self.session, turn=self.turn, step=self.step, agent=self.agent, run=self.run)
        await self.store.append(*events)
        return events

    # ------------------------------------------------------------------ after a crash

    def replay(self, events: list[Event]) -> None:
        """Rebuild the transcript and the guards from this run's stored events."""
        actions: dict[int, list[ActionEvent]] = {}
        for event in events:
            if isinstance(event, ActionEvent):
                actions.setdefault(event.step, []).append(event)
        for event in events:
            self.step = max(self.step, event.step)
            if isinstance(event, QuestionEvent) and event.trace:
                self.resumes.append(event.trace)
            if isinstance(event, ThoughtEvent) and event.step in actions:
                calls = [Call(a.call_id, a.tool, a.input) for a in actions[event.step]]
                self.transcript.add_step(event.raw, event.text, calls)
            elif isinstance(event, ErrorEvent) and event.correction:
                self.transcript.add_correction(event.raw, event.message)
                self.output_corrections += event.kind == "output"
            elif isinstance(event, ObservationEvent):
                self.transcript.add_observation(event.call_id, event.text, event.is_error)
                action = next((a for a in actions.get(event.step, []) if a.call_id == event.call_id), None)
                if action is not None and not event.interrupted:
                    self._remember(action, event)

    def _remember(self, action: ActionEvent, observation: ObservationEvent) -> None:
        """Count a replayed call for the repeat guard (a refused repeat counts as one)."""
        tool = self.tools.get(action.tool)
        if tool is not None and tool.volatile:
            return
        arguments = action.input
        if tool is not None:
            with contextlib.suppress(ToolInputError):
                arguments = tool.validate(action.input)
        key = self.repeats.key(action.tool, arguments)
        if self.repeats.previous(key) is None:
            self.repeats.remember(key, observation.text)
        else:
            self.repeats.repeats += 1

    async def finish_interrupted(self, events: list[Event]) -> AsyncIterator[Event]:
        """After a crash: give every call that started but never returned its observation.

        Idempotent tools run again; any other call is reported to the model as
        interrupted (``ObservationEvent.interrupted``), never silently re-run.
        """
        answered = {e.call_id for e in events if isinstance(e, ObservationEvent)}
        asked = {e.call_id: e.kind for e in events if isinstance(e, QuestionEvent)}
        replies = _unrecorded_replies(events, answered)
        for event in events:
            if not isinstance(event, ActionEvent):
                continue
            call = Call(event.call_id, event.tool, event.input)
            if call.call_id in replies and asked[call.call_id] == "approval":
                # the decision is durable, the call's effect is not known: decide again, but
                # run it only if it is safe to run twice
                self.step = max(self.step, event.step)
                tool = self.tools.get(call.tool)
                verdict = approval.decide(replies[call.call_id], call.input)
                if verdict.approved and (tool is None or not tool.idempotent):
                    yield await self.observe(call, ToolResult(INTERRUPTED, is_error=True), interrupted=True)
                else:
                    yield await self.observe(call, await self.decide(call, replies[call.call_id]))
            elif call.call_id in replies:
                # the user's answer is durable; only its observation was lost
                self.step = max(self.step, event.step)
                yield await self.observe(call, ToolResult(replies[call.call_id]))
            elif call.call_id not in answered | asked.keys():
                self.step = event.step
                tool = self.tools.get(call.tool)
                if tool is None or not tool.idempotent:
                    yield await self.observe(call, ToolResult(INTERRUPTED, is_error=True), interrupted=True)
                    continue
                # an idempotent tool runs again; a sub-agent continues its nested run where it was
                result: ToolResult | None = None
                try:
                    async for item in self.run_call(call):
                        if isinstance(item, ToolResult):
                            result = item
                        else:
                            yield item
                except PauseForUser as pause:
                    # the question was never stored, so never seen: ask it now; the run waits
                    question = QuestionEvent(
                        call_id=call.call_id, question=pause.question, kind=pause.kind, trace=self.trace.traceparent
                    )
                    yield await self.emit(question)
                    continue
                if result is not None:
                    yield await self.observe(call, result)


def _unrecorded_replies(events: list[Event], answered: set[str]) -> dict[str, str]:
    """Answers to questions whose observation was never recorded (call id → text)."""
    replies: dict[str, str] = {}
    question: str | None = None
    for event in events:
        if isinstance(event, QuestionEvent) and event.call_id not in answered:
            question = event.call_id
        elif isinstance(event, UserEvent) and question is not None:
            replies[question], question = event.text, None
    return replies
