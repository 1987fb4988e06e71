"""The agent loop: one run, from a message to an answer or a question.

    prompt ─► model ─► parse ─► (format error ─► correction) | final answer
                               | actions ─► guards ─► tools ─► observations ─► loop

Every event is appended to the store before the next thing happens, so a run can be
resumed from its last durable event by any process (``replay`` rebuilds the
``Transcript`` and the guards: ``reactchat.engine.recovery``). Errors the model can fix
become observations; errors the operator must fix raise. ``call_model`` is the one place
a model is called; the tool calls are ``reactchat.engine.calls``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from reactchat.engine import approval, tokens
from reactchat.engine.approval import Policy
from reactchat.engine.budget import Spending
from reactchat.engine.calls import ONE_QUESTION
from reactchat.engine.compaction import compact_steps, steps_due
from reactchat.engine.forks import ForkLookup
from reactchat.engine.guards import RepeatGuard
from reactchat.engine.images import shown_images
from reactchat.engine.output import Output, OutputInvalid
from reactchat.engine.recovery import Recovery
from reactchat.engine.session import Pending
from reactchat.engine.spec import AgentSpec, Mode
from reactchat.engine.tracing import NO_TRACE, TurnTrace, start_turn
from reactchat.engine.usage import measured
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    ErrorEvent,
    Event,
    ImagePart,
    LinkSkippedEvent,
    ObservationEvent,
    QuestionEvent,
    Reply,
    Request,
    StartedEvent,
    ThoughtEvent,
    Usage,
    UserEvent,
)
from reactchat.models import ContextTooLong, Model, ModelError
from reactchat.protocols.base import Call, FormatError, ToolResult, Transcript
from reactchat.store import Store
from reactchat.tools import PauseForUser, Tool
from reactchat.tools.threads import ToolThreads

#: the message of a cancellation that stops a run because its process shuts down
#: (``task.cancel(SHUTDOWN)``): the turn is left interrupted, not recorded as cancelled
SHUTDOWN = "reactchat: shutting down"


class Runner(Protocol):
    """What runs one run: the ReAct ``Loop``, or a plan-and-execute or Reflexion loop around it."""

    def start(self, message: str, skipped: Sequence[LinkSkippedEvent] = ()) -> AsyncIterator[Event]:
        """Run a new turn for ``message``; the links of it that were ``skipped`` are recorded after it."""
        ...

    def recover(self, events: list[Event]) -> AsyncIterator[Event]:
        """Go on from this run's stored ``events``."""
        ...


class Runners(Protocol):
    """Picks what runs one run of an agent over its loop (``reactchat.orchestration.runners``)."""

    def __call__(
        self,
        agent: AgentSpec,
        loop: Loop,
        question: str,
        history: list[tuple[str, str]],
        events: list[Event],
        mode: Mode | None = None,
    ) -> Runner:
        """The runner of ``agent``'s run over ``loop`` (``mode`` overrides the agent's own)."""
        ...


@dataclass
class Loop(Recovery):
    """The ReAct loop of one run: one agent, in one turn of one session, made whole by
    ``reactchat.engine.build.make_loop``.

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
    #: what runs the nested runs this one starts (a sub-agent's, a plan step's)
    runners: Runners
    #: in a forked session, the original's calls to reuse or to approve again (``engine/forks.py``)
    forks: ForkLookup
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
    #: the turn's events when this loop was made, every run's (nested runs continue from theirs)
    stored: list[Event] = field(default_factory=list)
    #: how many levels of nested runs (sub-agents, plan steps, trials) may sit below the top
    max_depth: int = 3
    #: what the final answer must be (``Agent(output_type=...)``)
    output: Output | None = None
    #: the user's message that opened the turn (tools see it as ``RunContext.message``)
    message: str = ""
    #: the owner of the turn's lock when this run's final answer ends the turn: the lock
    #: then ends in the answer's own store transaction (``conclude``)
    release: str | None = None
    #: what an unsafe call a crash cut off becomes: a question for the user, or a note to the model
    in_doubt: Literal["ask", "tell_model"] = "ask"
    #: how many tool calls of one reply run at once
    parallel_tools: int = 8
    #: what the turn has spent of its budget (one for every run of the turn), if it has one
    spending: Spending | None = None
    #: the share of ``context_chars`` past which the oldest steps are summarised (None: never)
    compact_at: float | None = None
    #: False once a summary of this run's steps failed: old observations are elided instead
    compacting: bool = field(default=True, init=False)
    step: int = field(default=0, init=False)
    #: the OpenTelemetry span of this run (``tracing.NO_TRACE`` when not traced)
    trace: TurnTrace = field(default=NO_TRACE, init=False)
    #: traceparents of earlier runs of this turn that paused on a question (for span links)
    resumes: list[str] = field(default_factory=list, init=False)
    #: corrections of a typed answer sent so far
    output_corrections: int = field(default=0, init=False)
    #: this run's stored events, as ``replay`` rebuilt it from them
    replayed: list[Event] = field(default_factory=list, init=False)

    # ------------------------------------------------------------------ ways in

    def start(
        self,
        message: str,
        skipped: Sequence[LinkSkippedEvent] = (),
        opening: UserEvent | None = None,
        images: tuple[ImagePart, ...] = (),
    ) -> AsyncIterator[Event]:
        """Run a new turn for ``message`` (sent with ``images``); ``opening`` is its event when
        already recorded (``Run`` records it with the turn's lock, in one store transaction).
        The links of the message that were ``skipped`` are recorded after it, and on the span."""
        opened = opening or UserEvent(text=message, images=images)
        return self.invoke(opened, recorded=opening is not None, skipped=skipped)

    async def resume(self, pending: Pending, reply: str) -> AsyncIterator[Event]:
        """Continue a run that waits on ``pending`` with the user's ``reply`` as its observation.

        For an approval request (``pending.kind == "approval"``) the reply decides the
        call instead: it runs as it is, runs with the user's arguments, or is refused
        with the user's reason as its observation (``reactchat.engine.approval``). For a call
        a crash left in doubt (``in_doubt``), ``retry`` runs it again, ``skip`` records it as
        not run, anything else is its result. Other calls of the same step a crash left
        without a result are finished before the run goes on.
        """
        self.step = max(self.step, pending.step)
        answer = await self.emit(UserEvent(text=reply))
        yield answer
        if pending.kind == "budget":
            async for event in self.after_budget(reply):
                yield event
            return
        call = Call(pending.call_id, pending.tool, pending.input)
        started = time.perf_counter()
        if pending.kind == "approval" and self.streams(call):
            async for event in self.approve_nested(call, reply):
                yield event
            return
        if pending.kind == "approval":
            result = await self.decide(call, reply)
        elif pending.kind == "in_doubt":
            retry = approval.settled(reply) == "retry"
            result = await self.approved_run(call) if retry else self.settle(reply)
        else:
            result = ToolResult(reply)
        observed = await self.observe(call, result, time.perf_counter() - started)
        yield observed
        async for event in self.recover([*self.replayed, answer, observed]):
            yield event

    async def approve_nested(self, call: Call, reply: str) -> AsyncIterator[Event]:
        """The reply to a request to approve a call to a sub-agent: refused, it is the call's
        observation; approved, the sub-agent runs (it may ask in turn: the run then waits)."""
        verdict = approval.decide(reply, call.input)
        events: list[Event] = []
        if verdict.approved:
            events.append(await self.emit(StartedEvent(call_id=call.call_id)))
            async for event in self.complete(Call(call.call_id, call.tool, verdict.arguments), approved=True):
                events.append(event)
                yield event
        else:
            events.append(await self.observe(call, ToolResult(approval.refusal(verdict))))
            yield events[-1]
        if any(isinstance(e, ObservationEvent) and e.run == self.run and e.call_id == call.call_id for e in events):
            async for event in self.recover([*self.replayed, *events]):
                yield event

    async def recover(self, events: list[Event]) -> AsyncIterator[Event]:
        """Finish a run a crash or a model error interrupted, from its last durable event (or
        go on after the reply to its budget question, stored by a run above it)."""
        reply = _budget_reply(events)
        if reply is not None:
            async for event in self.after_budget(reply):
                yield event
            return
        asked = False
        async for event in self.finish_interrupted(events):
            asked = asked or isinstance(event, QuestionEvent)
            yield event
        if not asked:  # else the run waits for the user, like any ask_user step
            async for event in self.invoke():
                yield event

    # ------------------------------------------------------------------ the loop

    async def invoke(
        self, opening: Event | None = None, recorded: bool = False, skipped: Sequence[LinkSkippedEvent] = ()
    ) -> AsyncIterator[Event]:
        """``steps``, traced as one ``invoke_agent`` span when OpenTelemetry is installed;
        ``opening`` (a new turn's message) is recorded first, unless it is ``recorded`` already,
        before the span starts (one generator per turn fewer than a ``start`` of its own around this
        one), then the links of it that were ``skipped``, each an event of the span too."""
        if opening is not None:
            unrecorded = skipped if recorded else (opening, *skipped)
            if unrecorded:  # the message and its skipped links are durable together
                await self.record(*unrecorded)
            yield opening
        self.trace = start_turn(self.agent.rsplit("/", 1)[-1], self.session, self.model.name, self.resumes)
        for link in skipped:
            self.trace.link_skipped(link)
            yield link
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

    async def after_budget(self, reply: str) -> AsyncIterator[Event]:
        """Go on after the reply to a budget question: ``yes`` granted as much again (the reply,
        durable, counts as the grant); anything else asks for the best answer so far."""
        if approval.is_yes(reply):
            async for event in self.invoke():
                yield event
        else:
            yield await self.best_effort("budget")

    async def over_budget(self) -> Event | None:
        """Before a model call: the budget question when a limit of the turn's is reached, or the
        best answer so far when the user refused more (None: within budget, or none)."""
        spending = self.spending
        if spending is None:
            return None
        if spending.refused:
            return await self.best_effort("budget")
        spent = spending.over()
        if spent is None:
            return None
        question = QuestionEvent(call_id=spending.next_call_id(), question=spending.question(spent), kind="budget")
        return await self.emit(question)

    async def steps(self) -> AsyncIterator[Event]:
        """Step until a final answer, a question for the user, or a guard stops the run."""
        while True:
            paused = await self.over_budget() if self.spending is not None else None
            if paused is not None:
                yield paused
                return
            if self.step >= self.max_steps:
                yield await self.best_effort("max_steps")
                return
            if self.repeats.exhausted:
                yield await self.best_effort("repeated_action")
                return
            through = steps_due(self) if self.compacting else 0
            if through:
                compacted = await compact_steps(self, through)
                self.compacting = compacted is not None  # a failed summary is not asked again in this run
                if compacted is not None:
                    yield compacted
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

    def begin_step(self) -> None:
        """Start this run's next step: the events recorded from here on carry its number (a
        planner's or a judge's model call is a step of its run too)."""
        self.step += 1

    async def call_model(self, request: Request, retrying: bool = False) -> tuple[Reply, float]:
        """One model call; a failure is recorded, then raised for the operator (except a
        ``ContextTooLong`` the caller is ``retrying`` after shrinking the prompt)."""
        if self.transcript.images:
            request = await shown_images(request, self.model, self.store, self.session)
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
        await tokens.learn(self.store, self.model, request, reply.usage)
        return reply, time.perf_counter() - started

    async def run_calls(self, calls: list[Call], thought: ThoughtEvent) -> AsyncIterator[Event]:
        """Run a step's tool calls; each gets exactly one observation, recorded in call order.

        Several calls of plain tools run at once (at most ``parallel_tools``); calls that
        run another agent run one after the other. When every call has its observation and
        one of them is ``return_direct``, its output is the answer.
        """
        observed: dict[str, ObservationEvent] = {}
        if len(calls) == 1 and not self.streams(calls[0]):
            # the common step, one call of a plain tool: awaited here, with no generator per call
            call = calls[0]
            for event in await self.record(
                thought, ActionEvent.built(call_id=call.call_id, tool=call.tool, input=call.input)
            ):
                yield event
            outcome = await self.finish(call)
            if isinstance(outcome, ObservationEvent):
                observed[call.call_id] = outcome
            yield outcome
        else:
            concurrent = len(calls) > 1 and self.parallel_tools > 1 and not any(self.streams(c) for c in calls)
            async for event in self.concurrently(calls, thought) if concurrent else self.one_by_one(calls, thought):
                if isinstance(event, ObservationEvent) and event.run == self.run:
                    observed[event.call_id] = event
                yield event
        if len(observed) < len(calls):
            return  # a call asked the user, or the nested run it started waits: so does this run
        for call in calls:
            tool, observation = self.tools.get(call.tool), observed[call.call_id]
            if tool is not None and tool.return_direct and not observation.is_error:
                # "intent recognition + direct tool output": no summarising model call
                yield await self.conclude(AnswerEvent(text=observation.text, thought=thought.text))
                return

    async def one_by_one(self, calls: list[Call], thought: ThoughtEvent) -> AsyncIterator[Event]:
        """Each call recorded (the first with the thought: one store transaction fewer), then run
        to its observation before the next one starts."""
        if not calls:
            yield await self.emit(thought)
            return
        pending: tuple[Event, ...] = (thought,)
        asked = False
        for call in calls:
            action = ActionEvent.built(call_id=call.call_id, tool=call.tool, input=call.input)
            for event in await self.record(*pending, action):
                yield event
            pending = ()
            done = False
            async for event in self.complete(call, may_ask=not asked):
                done = done or (isinstance(event, ObservationEvent) and event.call_id == call.call_id)
                yield event
            asked = asked or not done

    async def concurrently(self, calls: list[Call], thought: ThoughtEvent) -> AsyncIterator[Event]:
        """The thought and every action recorded together, then the calls run at once (at most
        ``parallel_tools``); each observation is recorded in call order, as soon as its call and
        those before it are done. The first call that asks the user asks; the others are told
        to ask one question at a time."""
        for event in await self.record(
            thought, *(ActionEvent.built(call_id=c.call_id, tool=c.tool, input=c.input) for c in calls)
        ):
            yield event
        gate = asyncio.Semaphore(self.parallel_tools)

        async def run(call: Call) -> tuple[ToolResult | PauseForUser, float]:
            async with gate:
                started = time.perf_counter()
                try:
                    return await self.execute(call), time.perf_counter() - started
                except PauseForUser as pause:
                    return pause, 0.0

        tasks = [asyncio.ensure_future(run(call)) for call in calls]
        asked = False
        try:
            for call, task in zip(calls, tasks, strict=True):
                outcome, seconds = await task
                if isinstance(outcome, ToolResult):
                    yield await self.observe(call, outcome, seconds)
                elif not asked:
                    asked = True
                    yield await self.ask(call, outcome)
                else:
                    yield await self.observe(call, ToolResult(ONE_QUESTION, is_error=True))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

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

    async def conclude(self, answer: AnswerEvent) -> Event:
        """Record this run's final answer; with ``release``, the turn's lock ends in the same
        store transaction (one commit fewer per turn)."""
        if self.release is None:
            return await self.emit(answer)
        await self.store.append_unlock(self.release, self.place(answer))
        return answer


def _budget_reply(events: list[Event]) -> str | None:
    """The reply to the run's budget question when it is the run's last event (a run above
    stored it), else None."""
    if len(events) >= 2 and isinstance(events[-1], UserEvent):
        question = events[-2]
        if isinstance(question, QuestionEvent) and question.kind == "budget":
            return events[-1].text
    return None


__all__ = ["SHUTDOWN", "Loop", "Runner", "Runners"]
