"""``replay(agent, source)``: run a recorded session again with today's code, no model, no tool.

Each message the user sent (a turn's first message, a reply to a question or an approval)
is sent again, in order, to a copy of ``agent`` on a new memory store whose model serves
the recorded replies (``ReplayModel``) and whose tools answer with the recorded results of
the same calls (``answering``); sub-agents are copied the same way. After each message the
replayed session's decisions are compared with the record's; the first difference is a
``Diverged`` (turn, step, agent, expected, got).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactchat.agent import Agent
from reactchat.engine.spec import Hooks
from reactchat.errors import ConfigError, Diverged
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    PlanEvent,
    QuestionEvent,
    ThoughtEvent,
    TrialEvent,
    UserEvent,
)
from reactchat.models import Model
from reactchat.orchestration.nested import SubAgent
from reactchat.store import Store, resolve_store
from reactchat.testing._export import Record, read_record
from reactchat.testing._model import RecordedResults, ReplayModel, answering, canonical, recorded_replies
from reactchat.testing._record import difference, request_json
from reactchat.toolbox import ask_user
from reactchat.tools import Tool


@dataclass(frozen=True)
class Replayed:
    """A replay that matched its record: the replayed session's events and what it took."""

    session: str
    events: list[Event] = field(repr=False)
    messages: int
    model_calls: int
    #: requests compared with the recorded ones (``strict`` and a record that holds them)
    requests_compared: int = 0


async def load(source: str | Path | Record, store: Store | None = None) -> Record:
    """The record to replay: an exported file's path, or a session id in ``store``."""
    if isinstance(source, Record):
        return source
    if is_file(source):
        with Path(source).open(encoding="utf-8") as file:
            return read_record(file)
    if store is None:
        raise ValueError(f"{source!r} is not a file: give the store that holds session {source}")
    return Record(str(source), await store.events(str(source)))


def is_file(source: str | Path) -> bool:
    """Whether ``source`` names an exported file rather than a session id."""
    return isinstance(source, Path) or source.endswith(".jsonl") or Path(source).is_file()


async def replay(agent: Agent, source: str | Path | Record, *, strict: bool = False) -> Replayed:
    """Run the recorded session ``source`` (an exported ``.jsonl`` file, a ``Record``, or a
    session id in ``agent.store``) again with ``agent``'s code, prompts and tools; raise
    ``Diverged`` at the first call, answer or pause that differs from the record.

    ``strict`` compares the thoughts, observations, questions, plans, trials and corrections
    too, that every recorded model reply was asked for, and, when the record holds the
    requests its model was sent (recorded through a ``Recorder``), that today's are the same."""
    # a file is read without opening the agent's store
    record = await load(source, None if isinstance(source, Record) or is_file(source) else agent.store)
    model = ReplayModel(recorded_replies(record.events))
    store = resolve_store("memory:")
    clone = _replaying(agent, model, RecordedResults(record.events), store)
    run = _Replay(clone, store, record, model, strict)
    try:
        session = await run.send_all()
        if strict and model.remaining:
            last = record.events[-1]
            raise Diverged(last.turn, last.step, last.agent, f"{model.remaining} more model calls", "none")
        events = await store.events(session) if session is not None else []
    finally:
        await store.close()
    compared = len(model.requests) if strict and record.requests else 0
    return Replayed(session or "", events, len(run.messages), len(model.requests), compared)


class _Replay:
    """One replay as it goes: the recorded messages sent to ``clone`` in order and, after
    each, what it did compared with the record.

    Only what a message added is compared: the decisions before it matched already, so
    neither side is read or described again (a long session costs its length, not its
    length squared)."""

    def __init__(self, clone: Agent, store: Store, record: Record, model: ReplayModel, strict: bool) -> None:
        self.clone, self.store, self.record, self.model, self.strict = clone, store, record, model, strict
        self.expected = decisions(record.events, strict)
        #: the messages the user sent, each with where what it caused ends in the record
        self.messages = list(_messages(record.events))
        #: decisions of ``expected`` the replayed session has repeated so far
        self.matched = 0
        #: events of the replayed session compared so far
        self.seen = 0
        #: requests of today's model compared with the recorded ones so far
        self.asked = 0

    async def send_all(self) -> str | None:
        """Every recorded message; the replayed session's id (None when the record has none)."""
        session: str | None = None
        for text, end in self.messages:
            window = self.matched
            while window < len(self.expected) and self.expected[window][0] < end:
                window += 1
            try:
                result = await self.clone.arun(text, session)
            except Diverged:
                # the model was asked once too often: the first difference before that explains it
                for held in [session] if session is not None else await self.store.list_sessions(limit=1):
                    got = decisions(await self.store.events(held, self.seen), self.strict)
                    more = "a further model call, which the record does not have"
                    _compare(self.expected[self.matched : window], got, missing=more)
                raise
            session = result.session
            added = await self.store.events(session, self.seen)
            _compare(self.expected[self.matched : window], decisions(added, self.strict))
            self.matched, self.seen = window, self.seen + len(added)
            if self.strict and self.record.requests:
                self._compare_requests()
        return session

    def _compare_requests(self) -> None:
        """``Diverged`` at the first request today's model was sent that is not the recorded one."""
        recorded, sent = self.record.requests, self.model.requests
        for index in range(self.asked, len(sent)):
            want = recorded[index] if index < len(recorded) else None
            found = ("no request", "a request") if want is None else difference(want, request_json(sent[index]))
            if found is not None:
                event = self.model.replies[min(index, len(self.model.replies) - 1)].event
                expected, got = found
                where = f"request {index + 1}: "
                raise Diverged(event.turn, event.step, event.agent, where + expected, where + got)
        self.asked = len(sent)


def _messages(events: list[Event]) -> Iterator[tuple[str, int]]:
    """The messages the user sent, in order, each with the index in ``events`` where what it
    caused ends (the next message's, or the end)."""
    indexes = [i for i in range(len(events)) if _is_message(events, i)]
    for n, index in enumerate(indexes):
        event = events[index]
        assert isinstance(event, UserEvent)
        yield event.text, indexes[n + 1] if n + 1 < len(indexes) else len(events)


def _is_message(events: list[Event], index: int) -> bool:
    """Whether the event at ``index`` is a message the user sent: a turn's first, or the
    reply to the question (or approval) just before it."""
    event = events[index]
    if not isinstance(event, UserEvent):
        return False
    return (event.run == "" and event.step == 0) or (index > 0 and isinstance(events[index - 1], QuestionEvent))


Decision = tuple[int, Event, str]


def decisions(events: Iterable[Event], strict: bool = False) -> list[Decision]:
    """What a replay must repeat, in order: (index in ``events``, event, description)."""
    found: list[Decision] = []
    for i, event in enumerate(events):
        text = _describe(event, strict)
        if text is not None:
            found.append((i, event, text))
    return found


def _describe(event: Event, strict: bool) -> str | None:
    if isinstance(event, ActionEvent):
        return f"call {event.tool} {canonical(event.input)}"
    if isinstance(event, AnswerEvent):
        return f"answer ({event.status}{', ' + event.reason if event.reason else ''}): {event.text}"
    if isinstance(event, CompactionEvent):  # a model call: today's agent must make it at the same place
        return f"compacts the {event.covers} through turn {event.through_turn}, step {event.through_step}"
    if isinstance(event, QuestionEvent):
        return f"waits for {event.kind}: {event.question}" if strict else f"waits for {event.kind}"
    if isinstance(event, ObservationEvent):
        # a recorded result served again fails only if today's tool refuses the call
        result = f"result of {event.tool}{' (error)' if event.is_error else ''}"
        return f"{result}: {event.text}" if strict else result
    if not strict:
        return None
    if isinstance(event, ThoughtEvent):
        return f"thought: {event.text}"
    if isinstance(event, PlanEvent):
        steps = json.dumps([s.model_dump() for s in event.steps], ensure_ascii=False)
        return f"plan {event.version} ({event.decision}): {steps}"
    if isinstance(event, TrialEvent):
        verdict = "accepted" if event.accepted else f"rejected: {event.feedback}"
        return f"trial {event.trial} {verdict}"
    if isinstance(event, ErrorEvent):
        return f"{event.kind} error: {event.message}"
    return None


def _compare(
    expected: list[Decision], got: list[Decision], missing: str = "nothing (the turn ended or waited before it)"
) -> None:
    """``Diverged`` at the first decision that differs (or is missing, or is one too many)."""
    for i in range(max(len(expected), len(got))):
        want = expected[i] if i < len(expected) else None
        have = got[i] if i < len(got) else None
        if want is not None and have is not None and want[2] == have[2] and want[1].agent == have[1].agent:
            continue
        at = (want or have)[1]  # type: ignore[index]
        raise Diverged(
            at.turn,
            at.step,
            at.agent,
            _said(want) if want else "nothing more (the turn ended here)",
            _said(have) if have else missing,
        )


def _said(decision: Decision) -> str:
    event = decision[1]
    where = f" [{event.agent}]" if event.agent else ""
    return f"{decision[2]}{where}"


def _replaying(agent: Agent, model: ReplayModel, results: RecordedResults, store: Store | None = None) -> Agent:
    """A copy of ``agent`` (and of its sub-agents) on the replay model, with tools that answer
    from the record. The original is untouched; tools listed at run time (MCP toolsets,
    session hooks such as uploaded files' search) are not carried over."""
    # a copy, not a new Agent(...): it keeps every setting of today's agent, whatever it has
    clone = copy.copy(agent)
    clone._model = model.standing_in_for(_model_of(agent))
    if store is not None:
        clone._store = store
    clone.tools = [_tool(t, model, results) for t in agent.tools]
    clone.toolsets = []
    clone.hooks = Hooks(lambda: clone.store)
    if agent.reflect is not None and agent.reflect.kind in ("tool", "command"):
        # a tool or a command judges by acting (running tests, say): its recorded verdicts stand in
        clone.reflect = dataclasses.replace(agent.reflect, evaluator=results.verdict)
    return clone


def _model_of(agent: Agent) -> Model | None:
    """The agent's model, built (never loaded or called) so the replay takes its name, context
    window and ``few_shot``, as its prompts did; None when it cannot be built here (a provider
    whose API key CI does not have)."""
    try:
        return agent.model
    except ConfigError:
        return None


def _tool(tool: Tool, model: ReplayModel, results: RecordedResults) -> Tool:
    if isinstance(tool, SubAgent) and isinstance(tool.agent, Agent):
        return SubAgent(_replaying(tool.agent, model, results), memory=tool.memory, approval=tool.approval)
    if tool is ask_user:  # a pause, not a call: its answer is the recorded reply, sent as a message
        return tool
    return answering(tool, results)


def replay_sync(agent: Agent, source: str | Path | Record, **options: Any) -> Replayed:
    """``replay`` from synchronous code (a plain pytest test)."""
    return asyncio.run(replay(agent, source, **options))
