"""The state of a session, derived from its events, and the result of a run.

``Outcome`` is the one place that says how a turn stands (done, stopped, cancelled,
waiting on a ``Pending`` item, or interrupted): the stored view (``Turn``), a running
``Run`` and the HTTP server all fold events through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

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
from reactchat.engine.usage import total

if TYPE_CHECKING:
    from reactchat.messages import PlanStep
    from reactchat.orchestration.reflexion import Trial

#: how a run ended, as ``RunResult.status`` says it
Status = Literal["done", "waiting", "stopped", "cancelled"]
#: how a turn stands: ``interrupted`` means it neither finished nor waits (a crash, a model error)
TurnStatus = Literal["done", "waiting", "stopped", "cancelled", "interrupted"]


@dataclass(frozen=True)
class Pending:
    """What a waiting session waits for: exactly one item, at whatever depth it was asked.

    ``kind`` is ``question`` (an ask_user question: the reply is the call's observation)
    or ``approval`` (whether call ``call_id`` of ``tool`` with ``input`` may run).
    ``run`` and ``agent`` say which run asked it (``""`` and the agent's name at the top).
    """

    kind: Literal["question", "approval"]
    call_id: str
    question: str
    tool: str
    input: ToolInput
    run: str = ""
    agent: str = ""
    step: int = 0


class Outcome:
    """How a turn stands, folded from its events in order (``add``).

    The rules: the top-level run's final answer ends the turn (``done``, ``stopped`` or
    ``cancelled``); a question or approval request that has no observation yet, and no
    user reply after it, is the pending item (``waiting``); a turn with neither is
    ``interrupted``. A user reply whose observation was not recorded (the process stopped
    in between) leaves the turn interrupted, not waiting: it is finished on the next run.
    """

    __slots__ = ("_actions", "answer", "pending")

    def __init__(self) -> None:
        self.answer: AnswerEvent | None = None
        self.pending: Pending | None = None
        self._actions: dict[tuple[str, str], ActionEvent] = {}

    def add(self, event: Event) -> None:
        """Fold one more event of the turn."""
        if self.answer is not None and self.answer.status == "cancelled":
            self.answer = None  # a cancelled turn the user resumed goes on
        if isinstance(event, ActionEvent):
            self._actions[event.run, event.call_id] = event
        elif isinstance(event, ObservationEvent):
            pending = self.pending
            if pending is not None and pending.call_id == event.call_id and pending.run == event.run:
                self.pending = None
        elif isinstance(event, QuestionEvent):
            action = self._actions.get((event.run, event.call_id))
            self.pending = Pending(
                kind=event.kind,
                call_id=event.call_id,
                question=event.question,
                tool=action.tool if action else "ask_user",
                input=action.input if action else {},
                run=event.run,
                agent=event.agent,
                step=event.step,
            )
        elif isinstance(event, UserEvent) and self.pending is not None and event.run == self.pending.run:
            self.pending = None  # a reply, stored in the run that asked: the pending item is answered
        elif isinstance(event, AnswerEvent) and not event.run:
            self.answer, self.pending = event, None

    def copy(self) -> Outcome:
        """An independent copy, to fold more events into."""
        other = Outcome()
        other.answer, other.pending, other._actions = self.answer, self.pending, dict(self._actions)
        return other

    @property
    def status(self) -> TurnStatus:
        """``done``, ``stopped``, ``cancelled``, ``waiting`` or ``interrupted``."""
        if self.answer is not None:
            return self.answer.status
        return "waiting" if self.pending is not None else "interrupted"


@dataclass
class Step:
    """One step of a turn as a user sees it.

    ``kind`` is ``action`` (``tool``, ``input``, ``observation`` set), ``final`` (the
    answer; ``tool`` is None), ``question`` (a call waiting for the user) or
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
    """One user message and everything the agent did for it (sub-agents included)."""

    index: int
    question: str
    events: list[Event] = field(default_factory=list)
    #: ``outcome`` as last folded: the list it was folded from and how many of its events
    _folded: tuple[Outcome, list[Event], int] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def outcome(self) -> Outcome:
        """How the turn stands (see ``Outcome``; not to be changed: ``copy()`` it to fold
        more). Folded once: events appended since are folded into it when asked again."""
        folded = self._folded
        if folded is not None and folded[1] is self.events and folded[2] <= len(self.events):
            outcome, _, done = folded
        else:
            outcome, done = Outcome(), 0
        for event in self.events[done:]:
            outcome.add(event)
        self._folded = (outcome, self.events, len(self.events))
        return outcome

    @property
    def answer(self) -> AnswerEvent | None:
        """The final answer event, once the turn is over."""
        return self.outcome.answer

    @property
    def pending(self) -> Pending | None:
        """The item the turn waits for, if it waits."""
        return self.outcome.pending

    @property
    def status(self) -> TurnStatus:
        """``done``, ``stopped``, ``cancelled``, ``waiting`` or ``interrupted``."""
        return self.outcome.status

    def steps(self) -> list[Step]:
        """The steps of the top-level run of this turn, in order."""
        return steps_of(self.events)

    @property
    def usage(self) -> Usage:
        """Tokens used by every model call of this turn, sub-agents included."""
        return usage_of(self.events)


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

    def history(self, before: int | None = None, budget: int | None = None) -> list[tuple[str, str]]:
        """Earlier questions and their final answers, without the steps in between.

        Only turns before turn ``before`` count; with a ``budget`` in characters, the
        newest turns that fit it are kept, whole (the oldest go first).
        """
        kept: list[tuple[str, str]] = []
        for turn in reversed(self.turns):
            answer = _remembered(turn.events)
            if answer is None or (before is not None and turn.index >= before):
                continue
            if budget is not None:
                cost = len(turn.question) + len(answer.text)
                if cost > budget:
                    break
                budget -= cost
            kept.append((turn.question, answer.text))
        kept.reverse()
        return kept


def _remembered(events: list[Event]) -> AnswerEvent | None:
    """A turn's final answer as the history keeps it: ``Outcome.answer`` unless it is None or
    cancelled (a cancelled turn has no answer to remember). That is the top-level answer
    recorded last, unless cancelled: found from the end (usually the last event) without
    folding the turn."""
    for event in reversed(events):
        if isinstance(event, AnswerEvent) and not event.run:
            return None if event.status == "cancelled" else event
    return None


def steps_of(events: list[Event], run: str = "") -> list[Step]:
    """The steps of one run (the top-level one unless ``run`` is given) from a turn's events."""
    steps: list[Step] = []
    thoughts: dict[int, str] = {}
    by_call: dict[str, Step] = {}
    for event in events:
        if event.run != run:
            continue
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
        elif isinstance(event, ErrorEvent) and event.correction:
            steps.append(Step(thought="", observation=event.message, kind="format_error", is_error=True))
        elif isinstance(event, AnswerEvent):
            steps.append(Step(thought=event.thought, kind="final", answer=event.text))
    return steps


def usage_of(events: list[Event]) -> Usage:
    """Tokens used by the model calls among ``events``."""
    # read as a dict: a missing attribute of a pydantic model is a slow AttributeError
    return Usage.sum(usage for event in events if (usage := event.__dict__.get("usage")) is not None)


@dataclass
class RunResult:
    """What ``Agent.run`` returns: the answer, or the item the agent is waiting on."""

    answer: str | None
    status: Status
    session: str
    turn: int
    steps: list[Step]
    #: the pending question (or approval request) when ``status == "waiting"``
    question: str | None = None
    #: why a stopped run stopped (``max_steps``, ``repeated_action``, ``context``)
    reason: str = ""
    events: list[Event] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    #: what the session waits for when ``status == "waiting"`` (the reply's ``reply_to`` is its ``call_id``)
    pending: Pending | None = None
    #: the validated final answer of an agent with an ``output_type`` (a model instance, or
    #: the parsed JSON of a schema); None otherwise, and when the answer never validated
    output: Any = None

    @property
    def plan(self) -> list[PlanStep]:
        """The plan of a plan-and-execute turn, its last version: each step's ``task``,
        ``status`` (``pending|done|failed|skipped``) and ``result``; empty otherwise."""
        plans = self.plans
        return plans[-1] if plans else []

    @property
    def plans(self) -> list[list[PlanStep]]:
        """Every version of the plan, the first one first (each as it ended)."""
        from reactchat.orchestration.plan_loop import plan_of

        return plan_of(self.events)

    @property
    def trials(self) -> list[Trial]:
        """The judged trials of a Reflexion turn: ``.answer``, ``.accepted``, ``.reflection``…"""
        from reactchat.orchestration.trials import trials_of

        return trials_of(self.events)

    @property
    def usage_by_agent(self) -> dict[str, Usage]:
        """Tokens used by the turn's model calls, by agent path (sub-agents included)."""
        from reactchat.orchestration.nested import usage_by_agent

        return usage_by_agent(self.events)

    @classmethod
    def of(cls, session: str, turn: int, events: list[Event], outcome: Outcome) -> RunResult | None:
        """The result of a run whose turn has ``events`` and stands at ``outcome``;
        None while the turn is interrupted (it has no result yet)."""
        status = outcome.status
        if status == "interrupted":
            return None
        answer, pending = outcome.answer, outcome.pending
        return cls(
            answer=answer.text if answer else None,
            status=status,
            session=session,
            turn=turn,
            steps=steps_of(events),
            question=pending.question if pending else None,
            reason=answer.reason if answer else "",
            events=events,
            usage=usage_of(events),
            pending=pending,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for ``reactchat ask --json`` and the HTTP API)."""
        return {
            "session": self.session,
            "turn": self.turn,
            "status": self.status,
            "answer": self.answer,
            "question": self.question,
            "reply_to": self.pending.call_id if self.pending else None,
            "reason": self.reason,
            "steps": [step.__dict__ for step in self.steps],
            # tokens, calls, seconds and cost of every model call of the turn (sub-agents' too)
            "usage": total(self.events).to_dict(),
        }
