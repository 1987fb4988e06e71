"""What a recorded session's model said and its tools returned, served again in order.

A stored session keeps every model reply as events (a step's ``ThoughtEvent`` with its raw
text and its ``ActionEvent``s, an ``AnswerEvent``, a planner's ``PlanEvent``, a model
judge's verdict and a rejected trial's reflection in its ``TrialEvent``, a compaction's
summary, a refused step's ``ErrorEvent``), not the replies themselves: ``recorded_replies``
rebuilds each reply in the form today's protocol reads (text for the text protocol, tool
calls for the native one, JSON for a planner), which it learns from the request it answers.
Tool results are served the same way (``RecordedResults``, ``answering``), failures as
failures.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any

from reactchat.errors import Diverged
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    PlanEvent,
    Reply,
    Request,
    TextPart,
    ThoughtEvent,
    ToolCallPart,
    TrialEvent,
    Usage,
    event_usage,
)
from reactchat.models import Model
from reactchat.orchestration.reflexion import MODEL_JUDGE
from reactchat.tools import Tool, ToolTimeout


@dataclass(frozen=True)
class RecordedReply:
    """One model call of the record: the event it produced and, for a step, its tool calls."""

    event: Event
    actions: tuple[ActionEvent, ...] = ()
    #: the top-level answer of a planning turn: the planner wrote it, as JSON
    planner: bool = False
    #: a trial's verdict from the model judge (``Reflexion(evaluator="model")``), the call
    #: before its reflection
    judge: bool = False


def recorded_replies(events: list[Event]) -> list[RecordedReply]:
    """The model calls of a recorded session, in the order they were made."""
    actions: dict[tuple[int, str, int], list[ActionEvent]] = defaultdict(list)
    planning = {(e.turn, e.run) for e in events if isinstance(e, PlanEvent)}
    for event in events:
        if isinstance(event, ActionEvent):
            actions[(event.turn, event.run, event.step)].append(event)
    replies: list[RecordedReply] = []
    for event in events:
        if isinstance(event, ThoughtEvent):
            replies.append(RecordedReply(event, tuple(actions[(event.turn, event.run, event.step)])))
        elif isinstance(event, PlanEvent) and event.usage is not None:
            replies.append(RecordedReply(event))
        elif isinstance(event, TrialEvent):
            if event.evaluator == MODEL_JUDGE:  # the judge's call, then (rejected) the reflection's
                replies.append(RecordedReply(event, judge=True))
            if not event.accepted and event.usage is not None:
                replies.append(RecordedReply(event))
        elif isinstance(event, AnswerEvent) and event.usage is not None:
            replies.append(RecordedReply(event, planner=(event.turn, event.run) in planning))
        elif isinstance(event, ErrorEvent) and event.correction:
            replies.append(RecordedReply(event))
        elif isinstance(event, CompactionEvent) and event.usage is not None:
            replies.append(RecordedReply(event))  # the summary: one model call
    return replies


def reply_for(recorded: RecordedReply, request: Request) -> Reply:
    """The recorded reply in the form ``request``'s protocol reads."""
    event = recorded.event
    usage = event_usage(event) or Usage()
    if isinstance(event, ThoughtEvent):
        if request.tools:  # native tool calling: the calls as parts
            parts: list[TextPart | ToolCallPart] = [TextPart(text=event.raw)] if event.raw else []
            parts += [ToolCallPart(id=a.call_id, name=a.tool, input=a.input) for a in recorded.actions]
            return Reply(parts=parts, stop_reason="tool_use" if recorded.actions else "end", usage=usage)
        return _text(event.raw, usage)
    if isinstance(event, AnswerEvent):
        if recorded.planner:
            return _text(json.dumps({"action": "answer", "answer": event.text}, ensure_ascii=False), usage)
        if request.react is not None:  # the text protocol: the pack's own labels
            labels = request.react
            thought = f"{labels.thought}: {event.thought}\n" if event.thought else ""
            return _text(f"{thought}{labels.final_answer}: {event.text}", usage)
        return _text(event.text, usage)
    if isinstance(event, PlanEvent):
        steps = [{"task": s.task, **({"agent": s.agent} if s.agent else {})} for s in event.steps]
        body: dict[str, Any] = {"steps": steps}
        if event.decision != "plan":
            body = {"action": event.decision} | ({"steps": steps} if event.decision == "revise" else {})
        return _text(json.dumps(body, ensure_ascii=False), usage)
    if isinstance(event, TrialEvent):
        if recorded.judge:  # the verdict as the judge's prompt asks for it (orchestration/reflexion.py)
            return _text("ACCEPT" if event.accepted else f"REJECT: {event.feedback}", Usage())
        return _text(event.reflection, usage)
    if isinstance(event, CompactionEvent):
        return _text(event.summary, usage)
    assert isinstance(event, ErrorEvent)
    return _text(event.raw, usage)


def _text(text: str, usage: Usage) -> Reply:
    return Reply(parts=[TextPart(text=text)], stop_reason="end", usage=usage)


class ReplayModel:
    """A model that answers from a record: the recorded replies in order, whatever it is
    asked; ``Diverged`` when asked once more than was recorded. ``.requests`` holds every
    request it received (``--strict`` compares them)."""

    supports_tools = True
    context_tokens: int | None = None
    #: the agent shows the prompt pack's worked example (as it did to a model that asked for it)
    few_shot = False

    def __init__(self, replies: list[RecordedReply], *, name: str = "replay") -> None:
        self.replies = replies
        self.requests: list[Request] = []
        self.name = name

    def standing_in_for(self, model: Model | None) -> ReplayModel:
        """This replay model (the same replies, the same count of requests) under the name,
        context window and ``few_shot`` of ``model``, which the agent's prompts depend on;
        each agent of a team gets its own, all serving the one record in order."""
        if model is None:
            return self
        stand_in = copy.copy(self)  # shares ``replies`` and ``requests``
        stand_in.name, stand_in.context_tokens = model.name, model.context_tokens
        stand_in.supports_tools = model.supports_tools
        stand_in.few_shot = bool(getattr(model, "few_shot", False))
        return stand_in

    async def complete(self, request: Request) -> Reply:
        """The next recorded reply."""
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.replies):
            last = self.replies[-1].event if self.replies else None
            raise Diverged(
                last.turn if last else 0,
                last.step + 1 if last else 0,
                last.agent if last else "",
                f"no more model calls (the record has {len(self.replies)})",
                f"model call number {index + 1}",
            )
        return reply_for(self.replies[index], request)

    @property
    def remaining(self) -> int:
        """How many recorded replies were not asked for."""
        return len(self.replies) - len(self.requests)


class RecordedResults:
    """The recorded results of a session's tool calls, by tool and arguments, in order: each
    its observation's text and whether it was an error."""

    def __init__(self, events: list[Event]) -> None:
        calls = {e.call_id: e for e in events if isinstance(e, ActionEvent)}
        self._results: dict[tuple[str, str], deque[tuple[str, bool]]] = defaultdict(deque)
        for event in events:
            if isinstance(event, ObservationEvent) and event.call_id in calls:
                action = calls[event.call_id]
                self._results[(event.tool, canonical(action.input))].append((event.text, event.is_error))
        #: the verdicts of the Reflexion evaluators that act (a tool, a command), in order
        self._verdicts = deque(e for e in events if isinstance(e, TrialEvent) and e.evaluator in ("tool", "command"))

    def verdict(self, answer: str) -> bool | str:
        """The next recorded verdict of a tool or command evaluator: True, or the feedback."""
        if not self._verdicts:
            raise LookupError("replay: the record has no further verdict of this evaluator")
        trial = self._verdicts.popleft()
        return True if trial.accepted else trial.feedback

    def take(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool] | None:
        """The first unused recorded result of ``tool`` called with ``arguments`` (its text and
        whether it was an error), or None."""
        held = self._results.get((tool, canonical(arguments)))
        return held.popleft() if held else None


#: one encoder for every call: ``json.dumps`` with options builds a new one each time
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def canonical(value: Any) -> str:
    """Arguments as comparable text: JSON with sorted keys."""
    return value if isinstance(value, str) else _CANONICAL.encode(value)


def answering(tool: Tool, results: RecordedResults) -> Tool:
    """``tool`` as replay sees it (same name, schema, approval), answering from ``results``."""

    async def recorded(**arguments: Any) -> str:
        for name in tool.context_params:
            arguments.pop(name, None)
        found = results.take(tool.name, arguments)
        if found is None:
            # the engine makes an error observation of this; the comparison of the calls reports it
            raise LookupError(f"replay: no recorded call of {tool.name} with {canonical(arguments)}")
        text, is_error = found
        if is_error:
            raise failure(tool.name, text)
        return text

    # a copy keeps today's name, schema, validation, effect and approval; only the call changes
    # (a Tool cannot be built from a ``**arguments`` function: a model could not be told its schema)
    replayed = copy.copy(tool)
    replayed.fn, replayed.is_async, replayed.timeout = recorded, True, None
    return replayed


class RecordedFailure(Exception):
    """A recorded error observation of a tool whose exception the replay cannot name again."""


def failure(tool: str, text: str) -> Exception:
    """The exception that makes the engine write the recorded error observation ``text`` of a
    ``tool`` call again (engine/calls.py words a tool's exception as ``Error: TOOL raised
    NAME: MESSAGE`` and a timeout as ``Error: MESSAGE. Try a simpler request or another
    tool.``): the event keeps only the text and ``is_error``, so the class is named again
    from the text. Other text raises ``RecordedFailure`` (still an error; its text differs,
    which ``strict`` shows)."""
    raised = f"Error: {tool} raised "
    name, colon, message = text.removeprefix(raised).partition(": ")
    if text.startswith(raised) and colon and name.isidentifier():
        named: type[Exception] = type(name, (Exception,), {})
        return named(message)
    timed, hint = text.removeprefix("Error: "), ". Try a simpler request or another tool."
    if text.startswith("Error: ") and timed.endswith(hint):
        return ToolTimeout(timed.removesuffix(hint))
    return RecordedFailure(text)
