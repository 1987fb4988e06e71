"""After a crash: rebuild a run from its stored events (``replay``) and give every call that
started but never returned its observation (``finish_interrupted``). Mixed into ``Loop``."""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator
from typing import Literal

from reactchat.engine import approval
from reactchat.engine.calls import Calls
from reactchat.messages import (
    ActionEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    QuestionEvent,
    StartedEvent,
    ThoughtEvent,
    UserEvent,
)
from reactchat.protocols.base import Call, ToolResult
from reactchat.tools import Tool, ToolInputError

log = logging.getLogger("reactchat")

#: the observation of a call a crash cut off (the event says so in ``interrupted``)
INTERRUPTED = (
    "This call was interrupted before it returned (the process running it stopped), so its "
    "effect is unknown and it was not run again. Check before relying on it."
)


class Recovery(Calls):
    """Replay a run's stored events and finish the calls a crash interrupted."""

    resumes: list[str]
    output_corrections: int
    #: what a crash's unsafe call without a reconcile check becomes: a question (``ask``) or a
    #: note to the model (``tell_model``)
    in_doubt: Literal["ask", "tell_model"]
    replayed: list[Event]

    def replay(self, events: list[Event]) -> None:
        """Rebuild the transcript and the guards from this run's stored events."""
        self.replayed = events
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
            elif isinstance(event, CompactionEvent) and event.covers == "steps":
                self.transcript.fold(event.through_step, event.summary)
            elif isinstance(event, ObservationEvent):
                self.transcript.add_observation(event.call_id, event.text, event.is_error, event.images)
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

        The tool's effect class decides (``interrupted``); a user's reply that is durable
        but whose observation was lost is taken again. Stops at the first question asked
        (a call in doubt): the run waits, and goes on from here once it is answered.
        """
        answered = {e.call_id for e in events if isinstance(e, ObservationEvent)}
        asked = {e.call_id: e.kind for e in events if isinstance(e, QuestionEvent)}
        started: set[str] = set()  # calls that began to run after their last question
        for event in events:
            if isinstance(event, QuestionEvent):
                started.discard(event.call_id)
            elif isinstance(event, StartedEvent):
                started.add(event.call_id)
        replies = _unrecorded_replies(events, answered)
        for event in events:
            if not isinstance(event, ActionEvent) or event.call_id in answered:
                continue
            call = Call(event.call_id, event.tool, event.input)
            self.step = max(self.step, event.step)
            if call.call_id in replies:
                outcome = self.replied(call, asked[call.call_id], replies[call.call_id], call.call_id in started)
            elif call.call_id not in asked:
                outcome = self.interrupted(call)
            else:
                continue  # a question still unanswered: the run waits on it
            async for item in outcome:
                yield item
                if isinstance(item, QuestionEvent):
                    return

    async def replied(self, call: Call, kind: str, reply: str, started: bool) -> AsyncIterator[Event]:
        """A call whose question the user answered: the reply is durable, the observation is
        not. An approval (or a retry) not yet ``started`` runs now; one that started when the
        process stopped may have had its effect: its effect class decides. An answer to an
        ask_user question, a refusal or a skip is simply recorded."""
        if kind == "approval":
            verdict = approval.decide(reply, call.input)
            if not verdict.approved:
                yield await self.observe(call, ToolResult(approval.refusal(verdict)))
                return
            call = Call(call.call_id, call.tool, verdict.arguments)
        elif kind == "in_doubt" and approval.settled(reply) != "retry":
            yield await self.observe(call, self.settle(reply))
            return
        elif kind != "in_doubt":
            yield await self.observe(call, ToolResult(reply))
            return
        if started:
            outcome = self.interrupted(call, approved=True)
        elif self.streams(call):
            await self.emit(StartedEvent(call_id=call.call_id))
            outcome = self.complete(call, approved=True)
        else:
            outcome = _just(await self.observe(call, await self.approved_run(call)))
        async for item in outcome:
            yield item

    async def interrupted(self, call: Call, approved: bool = False) -> AsyncIterator[Event]:
        """A call a crash left without a result, by its tool's effect class: a ``read`` or
        ``idempotent`` call runs again (a sub-agent continues its nested run where it was); an
        ``unsafe`` one asks its ``reconcile`` check whether the effect happened, and with none it
        is in doubt: the user decides (``in_doubt="tell_model"``: the model is told instead)."""
        tool = self.tools.get(call.tool)
        if tool is None:
            yield await self.observe(call, ToolResult(INTERRUPTED, is_error=True), interrupted=True)
            return
        cut = (await self.forks.memory()).cut(self.run, call.call_id)  # never ran in this fork: not in doubt
        if tool.effect == "unsafe" and not cut:
            result = await self.reconciled(tool, call)
            if result is not None:
                yield await self.observe(call, ToolResult(result))
                return
            if tool.reconcile is None:
                if self.in_doubt == "tell_model":
                    yield await self.observe(call, ToolResult(INTERRUPTED, is_error=True), interrupted=True)
                else:
                    question = approval.in_doubt(call.tool, call.input)
                    yield await self.emit(QuestionEvent(call_id=call.call_id, question=question, kind="in_doubt"))
                return
        # runs again; a question the tool asks was never stored, so never seen: it is asked now
        if approved and not tool.streams:
            yield await self.observe(call, await self.approved_run(call))
            return
        async for item in self.complete(call, approved=approved):
            yield item

    async def reconciled(self, tool: Tool, call: Call) -> str | None:
        """What the tool's ``reconcile`` check says of an interrupted call: its result if the
        effect happened, None if it did not (or there is no check). A check that fails says
        nothing: the call stays in doubt."""
        check = tool.reconcile
        if check is None:
            return None
        arguments = call.input if isinstance(call.input, dict) else {}
        try:
            with contextlib.suppress(ToolInputError):
                arguments = tool.validate(call.input)
            found = check(**arguments)
            if inspect.isawaitable(found):
                found = await found
        except Exception:
            log.exception("the reconcile check of %s failed; the call stays in doubt", tool.name)
            return None
        return None if found is None else str(found)

    def settle(self, reply: str) -> ToolResult:
        """The observation of a call in doubt that the user did not run again."""
        if approval.settled(reply) == "skip":
            return ToolResult(approval.SKIPPED, is_error=True)
        return ToolResult(reply)


async def _just(*events: Event) -> AsyncIterator[Event]:
    for event in events:
        yield event


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


__all__ = ["INTERRUPTED", "Recovery"]
