"""The state of a session, derived from its events, and the result of a run.

``Outcome`` is the one place that says how a turn stands (done, stopped, cancelled,
waiting on a ``Pending`` item, or interrupted): the stored view (``Turn``), a running
``Run`` and the HTTP server all fold events through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from reactchat.engine.usage import total
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    ImagePart,
    ObservationEvent,
    PauseKind,
    PlanEvent,
    PlanStep,
    QuestionEvent,
    ThoughtEvent,
    ToolInput,
    TrialEvent,
    Usage,
    UserEvent,
    event_usage,
)

#: how a run ended, as ``RunResult.status`` says it
Status = Literal["done", "waiting", "stopped", "cancelled"]
#: how a turn stands: ``interrupted`` means it neither finished nor waits (a crash, a model error)
TurnStatus = Literal["done", "waiting", "stopped", "cancelled", "interrupted"]


#: who judged a Reflexion trial: a function, a tool, a command, or the model itself
EvaluatorKind = Literal["function", "tool", "command", "model"]


@dataclass
class Trial:
    """One attempt at a task under Reflexion, as ``result.trials`` shows it."""

    number: int
    answer: str
    accepted: bool
    #: why the evaluator rejected the answer (empty when accepted)
    feedback: str = ""
    #: what the model wrote after the rejection, carried into the next trials
    reflection: str = ""
    #: ``function``, ``tool``, ``command`` or ``model`` (the model judged its own answer)
    evaluator: EvaluatorKind = "function"


#: the call id prefix of a plan step's nested run (``step-1``, ``step-2``...)
STEP = "step-"


def step_call(number: int) -> str:
    """The call id of plan step ``number`` (its nested run's id)."""
    return f"{STEP}{number}"


@dataclass
class PlanState:
    """Where a plan-and-execute run stands, folded from its events (``add``)."""

    #: every version of the plan, each as it stands now
    plans: list[list[PlanStep]] = field(default_factory=list)
    #: the step started and not finished, if any
    open: int | None = None
    executed: int = 0
    revisions: int = 0
    #: False right after a step finished: the replanner has not decided yet
    decided: bool = True

    @classmethod
    def of(cls, events: list[Event]) -> PlanState:
        """The state after ``events`` (one run's)."""
        state = cls()
        for event in events:
            state.add(event)
        return state

    @property
    def steps(self) -> list[PlanStep]:
        """The current version of the plan."""
        return self.plans[-1] if self.plans else []

    def add(self, event: Event) -> None:
        """Fold one more event of the run."""
        if isinstance(event, PlanEvent):
            if event.decision != "continue":
                self._skip_pending()
                self.plans.append([step.model_copy() for step in event.steps])
                self.revisions += event.decision == "revise"
            self.decided = True
        elif isinstance(event, ActionEvent) and event.call_id.startswith(STEP):
            self.open = int(event.call_id[len(STEP) :])
            self.executed += 1
        elif isinstance(event, ObservationEvent) and event.call_id.startswith(STEP):
            step = self.steps[int(event.call_id[len(STEP) :]) - 1]
            step.status, step.result = ("failed" if event.is_error else "done"), event.text
            self.open, self.decided = None, False
        elif isinstance(event, AnswerEvent):
            self._skip_pending()

    def _skip_pending(self) -> None:
        for step in self.steps:
            if step.status == "pending":
                step.status = "skipped"

    def next_pending(self) -> int | None:
        """The number of the next step to run."""
        return next((i for i, step in enumerate(self.steps, start=1) if step.status == "pending"), None)


def plan_of(events: list[Event]) -> list[list[PlanStep]]:
    """Every version of the plan of a turn's top-level run (empty when it did not plan)."""
    return PlanState.of([e for e in events if not e.run]).plans


def trials_of(events: list[Event]) -> list[Trial]:
    """The judged trials of a turn's top-level run, in order."""
    return [
        Trial(e.trial, e.answer, e.accepted, e.feedback, e.reflection, e.evaluator)
        for e in events
        if isinstance(e, TrialEvent) and not e.run
    ]


def usage_by_agent(events: list[Event]) -> dict[str, Usage]:
    """Tokens used by the model calls among ``events``, by agent path."""
    totals: dict[str, Usage] = {}
    for event in events:
        usage = event_usage(event)
        if usage is not None:
            totals[event.agent] = totals.get(event.agent, Usage()) + usage
    return totals


@dataclass(frozen=True)
class Pending:
    """What a waiting session waits for: exactly one item, at whatever depth it was asked.

    ``kind`` is ``question`` (an ask_user question: the reply is the call's observation)
    or ``approval`` (whether call ``call_id`` of ``tool`` with ``input`` may run) or
    ``in_doubt`` (a crash cut that call off: ``retry``, ``skip`` or its result) or ``budget``
    (a limit was reached: ``yes`` grants as much again, ``no`` asks for the best answer).
    ``run`` and ``agent`` say which run asked it (``""`` and the agent's name at the top).
    """

    kind: PauseKind
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
    #: the images sent with the question
    images: tuple[ImagePart, ...] = ()
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
                text, images = (event.text, event.images) if isinstance(event, UserEvent) else ("", ())
                turn = by_index[event.turn] = Turn(event.turn, text, images=images)
                state.turns.append(turn)
            elif not turn.question and isinstance(event, UserEvent) and not event.run:
                turn.question = event.text  # a summary made before the message was recorded
            turn.events.append(event)
        return state

    @property
    def last(self) -> Turn | None:
        """The most recent turn."""
        return self.turns[-1] if self.turns else None

    def history(self, before: int | None = None, budget: int | None = None, after: int = 0) -> list[tuple[str, str]]:
        """Earlier questions and their final answers, without the steps in between.

        Only turns after turn ``after`` (what a summary covers) and before turn ``before``
        count; with a ``budget`` in characters, the newest turns that fit it are kept, whole
        (the oldest go first).
        """
        return [(question, answer) for _, question, answer in self.answered(before, budget, after)]

    def answered(
        self, before: int | None = None, budget: int | None = None, after: int = 0
    ) -> list[tuple[int, str, str]]:
        """``history`` with each turn's index: ``(index, question, answer)``."""
        kept: list[tuple[int, str, str]] = []
        for turn in reversed(self.turns):
            if turn.index <= after:
                break
            answer = _remembered(turn.events)
            if answer is None or (before is not None and turn.index >= before):
                continue
            if budget is not None:
                cost = len(turn.question) + len(answer.text)
                if cost > budget:
                    break
                budget -= cost
            kept.append((turn.index, turn.question, answer.text))
        kept.reverse()
        return kept

    def compaction(self, before: int | None = None) -> CompactionEvent | None:
        """The latest summary of whole turns a run of turn ``before`` may carry (the one that
        covers the most turns before it), or None."""
        latest: CompactionEvent | None = None
        for turn in self.turns:
            if before is not None and turn.index > before:
                break
            for event in turn.events:
                if (
                    isinstance(event, CompactionEvent)
                    and event.covers == "turns"
                    and (before is None or event.through_turn < before)
                    and (latest is None or event.through_turn >= latest.through_turn)
                ):
                    latest = event
        return latest


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
    return Usage.sum(usage for event in events if (usage := event_usage(event)) is not None)


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
        return plan_of(self.events)

    @property
    def trials(self) -> list[Trial]:
        """The judged trials of a Reflexion turn: ``.answer``, ``.accepted``, ``.reflection``…"""
        return trials_of(self.events)

    @property
    def usage_by_agent(self) -> dict[str, Usage]:
        """Tokens used by the turn's model calls, by agent path (sub-agents included)."""
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
