"""The Reflexion loop of one run (``Agent(reflect=Reflexion(...))``).

    trial 1 (a nested run) ─► evaluator ─► accepted: answer
                                       └─► rejected: reflection (one model call) ─► TrialEvent ─► trial 2 …

Each trial is a nested run started by an ``ActionEvent`` with call id ``trial-K`` (its
input holds the task and the lessons its prompt carries, so a resumed trial sees the
same prompt) and finished by its ``ObservationEvent``; each judged trial is a
``TrialEvent``. After ``max_trials`` rejections the turn stops (reason ``max_trials``)
with the last answer.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from reactchat.engine.session import Step, steps_of
from reactchat.engine.spec import AgentSpec
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    Event,
    ObservationEvent,
    Reply,
    Request,
    TrialEvent,
    Usage,
)
from reactchat.orchestration.nested import NestedTurn, delegate
from reactchat.orchestration.reflexion import (
    ReflectionMemory,
    Reflexion,
    evaluate,
    fingerprint,
    lessons,
    reflection_request,
)
from reactchat.protocols.base import Call, ToolResult

if TYPE_CHECKING:
    from reactchat.engine.loop import Loop

TRIAL = "trial-"


class TrialLoop(NestedTurn):
    """Reflexion for one run, with the ways in of ``Loop`` (``start``, ``recover``)."""

    def __init__(self, agent: AgentSpec, loop: Loop, question: str, reflexion: Reflexion) -> None:
        self.agent = agent
        self.loop = loop
        self.question = question
        self.reflexion = reflexion
        self.memory = ReflectionMemory(loop.store, reflexion)
        self.key = fingerprint(agent.name, question)
        #: the nested runs' events seen by this process (the stored ones are in ``loop.stored``)
        self.seen: list[Event] = []

    async def go_on(self, events: list[Event]) -> AsyncIterator[Event]:
        """Go on from this run's stored ``events``."""
        started = {e.call_id: e for e in events if isinstance(e, ActionEvent) and e.call_id.startswith(TRIAL)}
        answers = {e.call_id: e for e in events if isinstance(e, ObservationEvent) and e.call_id.startswith(TRIAL)}
        judged = [e for e in events if isinstance(e, TrialEvent)]
        carried: list[str] = []
        answer = judged[-1].answer if judged else ""
        if judged:
            if judged[-1].accepted:  # judged, then the process stopped before the answer
                yield await self.loop.emit(AnswerEvent(text=answer))
                return
            carried = self._next_lessons(started[f"{TRIAL}{judged[-1].trial}"], judged[-1])
        for number in range(len(judged) + 1, self.reflexion.max_trials + 1):
            call_id = f"{TRIAL}{number}"
            action = started.get(call_id)
            if action is None:
                if number == 1:
                    carried = (await self.memory.recall(self.key))[-self.reflexion.window :]
                action = ActionEvent(
                    call_id=call_id, tool=self.agent.name, input={"task": self.question, "lessons": carried}
                )
                yield await self.loop.emit(action)
            observation = answers.get(call_id)
            if observation is None:
                async for item in self._trial(action, number):
                    if isinstance(item, ObservationEvent) and item.run == self.loop.run:
                        observation = item  # the trial's own observation, not one of its run's
                    yield item
                if observation is None:
                    return  # the trial waits for the user
            answer = observation.text
            verdict = await self._judge(number, answer)
            yield await self.loop.emit(verdict)
            if verdict.accepted:
                yield await self.loop.emit(AnswerEvent(text=answer))
                return
            await self.memory.keep(self.key, verdict.reflection)
            carried = self._next_lessons(action, verdict)
        yield await self.loop.emit(AnswerEvent(text=answer, status="stopped", reason="max_trials"))

    def _next_lessons(self, action: ActionEvent, judged: TrialEvent) -> list[str]:
        """The lessons the trial after ``action`` carries: its own, then its reflection, the last ``window``."""
        before = action.input.get("lessons", []) if isinstance(action.input, dict) else []
        window = self.reflexion.window
        return [*before, judged.reflection][-window:] if window else []

    async def _trial(self, action: ActionEvent, number: int) -> AsyncIterator[Event]:
        """Run (or continue) one trial as a nested run; its observation (the answer) when it ends."""
        carried = action.input.get("lessons", []) if isinstance(action.input, dict) else []
        agent = self.agent
        system = "\n\n".join(part for part in (agent.system, lessons(agent.pack, carried)) if part) or None
        call = Call(action.call_id, action.tool, action.input)
        path = f"{self.loop.agent}/trial {number}"
        result: ToolResult | None = None
        async for item in delegate(
            self.loop, agent, call, path, self.question, system=system, mode="plan" if agent.plan else "react"
        ):
            if isinstance(item, ToolResult):
                result = item
            else:
                self.seen.append(item)
                yield item
        if result is not None:
            yield await self.loop.emit(
                ObservationEvent(call_id=call.call_id, tool=call.tool, text=result.text, is_error=result.is_error)
            )

    async def _judge(self, number: int, answer: str) -> TrialEvent:
        """The evaluator's verdict on a trial's answer and, when it is rejected, a reflection."""
        started = time.perf_counter()
        agent = self.agent
        verdict = await evaluate(self.reflexion, answer, self.question, self._complete, agent.pack)
        usage = verdict.usage
        reflection = ""
        if not verdict.accepted:
            trial_run = f"{self.loop.run}/{TRIAL}{number}" if self.loop.run else f"{TRIAL}{number}"
            events = [*self.loop.stored, *self.seen]
            steps = "\n".join(_step_line(step) for step in steps_of(events, run=trial_run) if step.tool)
            request = reflection_request(agent.pack, self.question, steps, answer, verdict.feedback)
            self.loop.begin_step()
            reply, _ = await self.loop.call_model(request)
            reflection = reply.text.strip()
            if reply.usage is not None:
                usage = (usage or Usage()) + reply.usage
        return TrialEvent(
            trial=number,
            answer=answer,
            accepted=verdict.accepted,
            feedback=verdict.feedback,
            reflection=reflection,
            evaluator=self.reflexion.kind,
            usage=usage,
            seconds=time.perf_counter() - started,
        )

    async def _complete(self, request: Request) -> Reply:
        """One call of the agent's model for the judge, through the loop (recorded if it fails)."""
        self.loop.begin_step()
        reply, _ = await self.loop.call_model(request)
        return reply


def _step_line(step: Step) -> str:
    return f"{step.tool} {step.input} → {step.observation}"


__all__ = ["TrialLoop"]
