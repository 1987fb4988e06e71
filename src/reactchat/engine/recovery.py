"""After a crash: rebuild a run from its stored events (``replay``) and give every call that
started but never returned its observation (``finish_interrupted``). Mixed into ``Loop``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from reactchat.engine import approval
from reactchat.engine.calls import Calls
from reactchat.messages import ActionEvent, ErrorEvent, Event, ObservationEvent, QuestionEvent, ThoughtEvent, UserEvent
from reactchat.protocols.base import Call, ToolResult
from reactchat.tools import ToolInputError

#: the observation of a call a crash cut off (the event says so in ``interrupted``)
INTERRUPTED = (
    "This call was interrupted before it returned (the process running it stopped), so its "
    "effect is unknown and it was not run again. Check before relying on it."
)


class Recovery(Calls):
    """Replay a run's stored events and finish the calls a crash interrupted."""

    resumes: list[str]
    output_corrections: int

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
        fork = await self.forks.memory()  # a call a fork cut off never ran in it: made again
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
                if (tool is None or not tool.idempotent) and not fork.cut(event.run, call.call_id):
                    yield await self.observe(call, ToolResult(INTERRUPTED, is_error=True), interrupted=True)
                    continue
                # an idempotent tool runs again; a sub-agent continues its nested run where it was;
                # a question the tool asks was never stored, so never seen: it is asked now
                async for item in self.complete(call):
                    yield item


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
