"""Stored sessions for people: summaries, a turn-by-turn tree, JSON and Markdown exports.

What ``reactchat sessions``, ``reactchat show ID``, ``GET /v1/sessions`` and the page's
session list show. Everything is read from the stored events; nothing here writes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from reactchat.engine.session import SessionState, Turn, plan_of
from reactchat.engine.usage import UsageTotal, total
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    LinkSkippedEvent,
    ObservationEvent,
    QuestionEvent,
    ThoughtEvent,
    UserEvent,
    event_seconds,
    event_usage,
)
from reactchat.store import SessionNotFound, Store


@dataclass
class SessionSummary:
    """One line of ``reactchat sessions``."""

    session: str
    #: epoch seconds of the first and the last event (None for an empty session)
    started: float | None
    updated: float | None
    #: the first question asked
    question: str
    #: the last turn's status, or ``new``
    status: str
    turns: int
    usage: UsageTotal

    @classmethod
    def of(cls, session: str, events: list[Event]) -> SessionSummary:
        """The summary of a session from its events."""
        state = SessionState.from_events(session, events)
        last = state.last
        return cls(
            session=session,
            started=events[0].at if events else None,
            updated=events[-1].at if events else None,
            question=state.turns[0].question if state.turns else "",
            status=last.status if last else "new",
            turns=len(state.turns),
            usage=total(events),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "session": self.session,
            "started": self.started,
            "updated": self.updated,
            "question": self.question,
            "status": self.status,
            "turns": self.turns,
            "usage": self.usage.to_dict(),
        }


async def summaries(store: Store, limit: int = 20) -> list[SessionSummary]:
    """The newest ``limit`` sessions of ``store``, summarised."""
    found = []
    for session in await store.list_sessions(limit):
        try:
            events = await store.events(session)
        except SessionNotFound:
            continue  # deleted between the listing and now
        found.append(SessionSummary.of(session, events))
    return found


def turn_view(turn: Turn) -> dict[str, Any]:
    """One turn as JSON: question, status, answer, usage and every event."""
    answer = turn.answer
    return {
        "turn": turn.index,
        "question": turn.question,
        "status": turn.status,
        "answer": answer.text if answer else None,
        "usage": total(turn.events).to_dict(),
        "events": [json.loads(e.model_dump_json()) for e in turn.events],
        # plan-and-execute: every version of the plan, each step with its status and result
        "plans": [[step.model_dump() for step in version] for version in plan_of(turn.events)],
    }


def forked_from(origin: tuple[str, int] | None) -> dict[str, Any] | None:
    """Where a fork came from as JSON (``Store.origin``): ``{"session": ID, "before": SEQ}``, or None."""
    return None if origin is None else {"session": origin[0], "before": origin[1]}


def session_json(state: SessionState, origin: tuple[str, int] | None = None) -> dict[str, Any]:
    """A whole session as JSON (``reactchat show ID --json``); ``origin``: where it was forked from."""
    events = [e for turn in state.turns for e in turn.events]
    return {
        **SessionSummary.of(state.session, events).to_dict(),
        "forked_from": forked_from(origin),
        "turns": [turn_view(turn) for turn in state.turns],
    }


# --------------------------------------------------------------------- for people


def when(at: float | None) -> str:
    """Local date and time of an epoch timestamp."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if at is not None else "-"


def duration(seconds: float) -> str:
    """``0.4 ms``, ``120 ms``, ``2.3 s``."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def usage_text(usage: UsageTotal) -> str:
    """``812 tokens (640 in, 172 out), 2 calls, 1.4 s, $0.000435`` (``≈`` when estimated)."""
    if not usage.calls and not usage.seconds:
        return ""
    approx = "≈" if usage.estimated_calls else ""
    parts = [
        f"{approx}{usage.tokens:,} tokens ({usage.input_tokens:,} in, {usage.output_tokens:,} out)",
        f"{usage.calls} call{'s' if usage.calls != 1 else ''}",
        duration(usage.seconds),
        price_text(usage),
    ]
    return ", ".join(parts)


def price_text(usage: UsageTotal) -> str:
    """``$0.000435``, ``$0`` or ``cost unknown (model not in the price table)``."""
    if usage.cost is None:
        return f"cost unknown ({', '.join(sorted(usage.unpriced))} not in the price table)"
    return "$0" if usage.cost == 0 else f"${usage.cost:.6f}".rstrip("0")


def sessions_table(found: list[SessionSummary]) -> str:
    """The ``reactchat sessions`` listing."""
    if not found:
        return "No sessions yet."
    rows = [("SESSION", "STARTED", "STATUS", "TURNS", "TOKENS", "FIRST QUESTION")]
    for s in found:
        question = " ".join(s.question.split())
        rows.append(
            (
                s.session,
                when(s.started),
                s.status,
                str(s.turns),
                f"{'≈' if s.usage.estimated_calls else ''}{s.usage.tokens:,}",
                question if len(question) <= 60 else question[:59] + "…",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[5]]) for row in rows
    )


def _line(event: Event) -> str | None:
    """What a tree shows for one event (None: nothing)."""
    if isinstance(event, UserEvent):
        return f"You: {event.text}"
    if isinstance(event, ThoughtEvent):
        return f"Thought: {event.text}" if event.text else None
    if isinstance(event, ActionEvent):
        value = event.input if isinstance(event.input, str) else json.dumps(event.input, ensure_ascii=False)
        return f"Action: {event.tool} {value}"
    if isinstance(event, ObservationEvent):
        text = " ".join(event.text.split())
        text = text if len(text) <= 300 else text[:299] + "…"
        return f"Observation{' (error)' if event.is_error else ''}: {text}"
    if isinstance(event, QuestionEvent):
        return f"Question for you: {event.question}"
    if isinstance(event, AnswerEvent):
        stopped = f" (stopped: {event.reason})" if event.status != "done" else ""
        return f"Final Answer{stopped}: {event.text}"
    if isinstance(event, ErrorEvent):
        if event.correction:
            return f"Format error, correction sent: {event.message}{raw_reply(event)}"
        return f"Error ({event.kind}): {event.message}"
    if isinstance(event, CompactionEvent):
        covered = f"turns 1-{event.through_turn}" if event.covers == "turns" else f"steps 1-{event.through_step}"
        return f"Summary of {covered}: {event.summary}"
    if isinstance(event, LinkSkippedEvent):
        return skipped_link(event)
    return None


def skipped_link(event: LinkSkippedEvent) -> str:
    """What people read of a link of the message that was not read before the turn."""
    return f"The link {event.url} was not read: {event.reason}"


#: how much of a refused reply is shown: enough to see what the model was doing
RAW_SHOWN = 200


def raw_reply(event: ErrorEvent) -> str:
    """What the model wrote when its reply could not be read, on a line of its own and
    shortened to ``RAW_SHOWN`` characters (empty when nothing was kept)."""
    text = " ".join(event.raw.split())
    if not text:
        return ""
    return f"\n  the model wrote: {text if len(text) <= RAW_SHOWN else text[: RAW_SHOWN - 1] + '…'}"


def _cost_note(event: Event) -> str:
    """`` (0.8 s, 320 tokens)`` for a model call or a tool."""
    notes = []
    seconds = event_seconds(event)
    if seconds:
        notes.append(duration(seconds))
    usage = event_usage(event)
    if usage is not None:
        notes.append(f"{'≈' if usage.estimated else ''}{usage.input_tokens + usage.output_tokens:,} tokens")
    return f"  ({', '.join(notes)})" if notes else ""


def _depth(event: Event) -> int:
    path = str(getattr(event, "agent", "") or "")
    return path.count("/") + 1 if path else 0


def session_tree(state: SessionState, origin: tuple[str, int] | None = None) -> str:
    """A session as an indented tree: turns, then thoughts, actions and observations, with
    sub-agents' steps nested under the call that ran them; ``origin``: where it was forked from."""
    events = [e for turn in state.turns for e in turn.events]
    summary = SessionSummary.of(state.session, events)
    turns = f"{len(state.turns)} turn{'s' if len(state.turns) != 1 else ''}"
    lines = [f"Session {state.session} · started {when(summary.started)} · {turns}"]
    if origin is not None:
        lines.append(f"  Forked from {origin[0]} before event {origin[1]}")
    if summary.usage.calls:
        lines.append(f"  {usage_text(summary.usage)}")
    for turn in state.turns:
        lines.append("")
        head = f"Turn {turn.index} · {turn.status}"
        turn_usage = usage_text(total(turn.events))
        lines.append(f"{head} · {turn_usage}" if turn_usage else head)
        base = min((_depth(e) for e in turn.events), default=0)
        for event in turn.events:
            text = _line(event)
            if text is None:
                continue
            indent = "  " * (1 + _depth(event) - base)
            if isinstance(event, ObservationEvent):
                indent += "  "
            first, *rest = text.splitlines() or [""]
            lines.append(f"{indent}{first}{_cost_note(event)}")
            lines.extend(f"{indent}  {more}" for more in rest)
    return "\n".join(lines)


def session_markdown(state: SessionState) -> str:
    """A session as Markdown: each turn's question, its steps in a collapsible list, the answer."""
    events = [e for turn in state.turns for e in turn.events]
    summary = SessionSummary.of(state.session, events)
    out = [f"# Session {state.session}", "", f"Started {when(summary.started)}. {usage_text(summary.usage)}".rstrip()]
    for turn in state.turns:
        out += ["", f"## Turn {turn.index}: {' '.join(turn.question.split())}", ""]
        out.append(f"*{turn.status}* · {usage_text(total(turn.events)) or 'no model call'}")
        steps = []
        for event in turn.events[1:]:
            if isinstance(event, AnswerEvent):
                continue
            text = _line(event)
            if text is not None:
                indent = "  " * max(0, _depth(event) - 1)
                steps.append(f"{indent}- " + text.replace("\n", "\n  " + indent))
        if steps:
            out += ["", "<details><summary>Steps</summary>", "", *steps, "", "</details>"]
        answer = turn.answer
        if answer is not None:
            out += ["", answer.text]
    return "\n".join(out) + "\n"
