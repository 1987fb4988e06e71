"""The state of a session, derived from its events, and the result of a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    QuestionEvent,
    ThoughtEvent,
    ToolInput,
    Usage,
    UserEvent,
)

Status = Literal["done", "waiting", "stopped"]


@dataclass
class Step:
    """One step of a turn as a user sees it.

    ``kind`` is ``action`` (``tool``, ``input``, ``observation`` set), ``final`` (the
    answer; ``tool`` is None), ``question`` (an ask_user call waiting for the user) or
    ``format_error`` (the model's output could not be read; ``observation`` holds the
    correction it was sent).
    """

    thought: str
    tool: str | None = None
    input: ToolInput | None = None
    observation: str | None = None
    kind: Literal["action", "final", "question", "format_error"] = "action"
    is_error: bool = False
    answer: str | None = None


@dataclass
class Turn:
    """One user question and everything the agent did for it."""

    index: int
    question: str
    events: list[Event] = field(default_factory=list)

    @property
    def answer(self) -> AnswerEvent | None:
        """The final answer event, once the turn is over."""
        last = self.events[-1] if self.events else None
        return last if isinstance(last, AnswerEvent) else None

    @property
    def pending(self) -> tuple[QuestionEvent, ActionEvent] | None:
        """The unanswered ask_user question and its call, if the turn waits for one."""
        if self.answer is not None:
            return None
        answered = {e.call_id for e in self.events if isinstance(e, ObservationEvent)}
        actions = {e.call_id: e for e in self.events if isinstance(e, ActionEvent)}
        for event in reversed(self.events):
            if isinstance(event, UserEvent) and event is not self.events[0]:
                return None  # answered, but the process stopped before the observation: interrupted
            if isinstance(event, QuestionEvent) and event.call_id not in answered:
                return event, actions[event.call_id]
        return None

    @property
    def status(self) -> Literal["done", "stopped", "waiting", "interrupted"]:
        """``interrupted`` means the turn neither finished nor waits: a crash or a model error."""
        answer = self.answer
        if answer is not None:
            return answer.status
        return "waiting" if self.pending else "interrupted"

    def steps(self) -> list[Step]:
        """The steps of this turn, in order."""
        return steps_of(self.events)

    @property
    def usage(self) -> Usage:
        """Tokens used by every model call of this turn."""
        total = Usage()
        for event in self.events:
            usage = getattr(event, "usage", None)
            if usage is not None:
                total = total + usage
        return total


@dataclass
class SessionState:
    """A session's turns, rebuilt from its events."""

    session: str
    turns: list[Turn] = field(default_factory=list)

    @classmethod
    def from_events(cls, session: str, events: list[Event]) -> SessionState:
        """Group events into turns."""
        state = cls(session)
        by_index: dict[int, Turn] = {}
        for event in events:
            turn = by_index.get(event.turn)
            if turn is None:
                text = event.text if isinstance(event, UserEvent) else ""
                turn = by_index[event.turn] = Turn(event.turn, text)
                state.turns.append(turn)
            turn.events.append(event)
        return state

    @property
    def last(self) -> Turn | None:
        """The most recent turn."""
        return self.turns[-1] if self.turns else None

    def history(self) -> list[tuple[str, str]]:
        """Earlier questions and final answers, without their scratchpads (seed 002)."""
        pairs = []
        for turn in self.turns:
            answer = turn.answer
            if answer is not None:
                pairs.append((turn.question, answer.text))
        return pairs


def steps_of(events: list[Event]) -> list[Step]:
    """Steps from the events of one turn."""
    steps: list[Step] = []
    thoughts: dict[int, str] = {}
    by_call: dict[str, Step] = {}
    for event in events:
        if isinstance(event, ThoughtEvent):
            thoughts[event.step] = event.text
        elif isinstance(event, ActionEvent):
            step = Step(thought=thoughts.get(event.step, ""), tool=event.tool, input=event.input)
            by_call[event.call_id] = step
            steps.append(step)
        elif isinstance(event, ObservationEvent) and event.call_id in by_call:
            by_call[event.call_id].observation = event.text
            by_call[event.call_id].is_error = event.is_error
            if by_call[event.call_id].kind == "question":
                by_call[event.call_id].kind = "action"
        elif isinstance(event, QuestionEvent) and event.call_id in by_call:
            by_call[event.call_id].kind = "question"
        elif isinstance(event, ErrorEvent) and event.kind == "format":
            steps.append(Step(thought="", observation=event.message, kind="format_error", is_error=True))
        elif isinstance(event, AnswerEvent):
            steps.append(Step(thought=event.thought, kind="final", answer=event.text))
    return steps


@dataclass
class RunResult:
    """What ``Agent.run`` returns: the answer, or the question the agent is waiting on."""

    answer: str | None
    status: Status
    session: str
    turn: int
    steps: list[Step]
    #: the pending ask_user question when ``status == "waiting"``
    question: str | None = None
    #: why a stopped run stopped (``max_steps``, ``repeated_action``, ``context``)
    reason: str = ""
    events: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for ``reactchat ask --json`` and the HTTP API)."""
        return {
            "session": self.session,
            "turn": self.turn,
            "status": self.status,
            "answer": self.answer,
            "question": self.question,
            "reason": self.reason,
            "steps": [step.__dict__ for step in self.steps],
            "usage": self.usage.model_dump(),
        }
