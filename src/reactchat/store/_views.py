"""``TurnViews``: each session's turn view, kept parsed by the store that read or wrote it.

A durable store's ``turn_events`` returns what a new turn reads of its session: every event
of its last turn and, of the earlier turns, their first event, user messages and answers.
The SQLite and PostgreSQL stores keep what they returned, extended by their own appends
since, so that the session's next turn parses none of it again when nothing else wrote to
the session meanwhile (the store checks that the session's last stored event is still the
view's own: same place, same stored JSON). At most ``VIEW_EVENTS`` events are kept across
sessions, the least recently used sessions dropped first: an idle session costs the
process nothing past that bound.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from reactchat.messages import Event

#: events kept parsed across the sessions' turn views, least recently used sessions dropped first
VIEW_EVENTS = 4096


class View:
    """A session's events as ``turn_events`` last saw them, with the stored JSON of the last one,
    and the session's ``origin`` once a store asked for it (None: not asked; ``()``: no fork):
    a session's origin does not change, and a view the store still keeps is of the same session."""

    __slots__ = ("body", "events", "origin")

    def __init__(self, events: list[Event], body: str, origin: tuple[str, int] | tuple[()] | None = None) -> None:
        self.events = events
        self.body = body
        self.origin = origin


def _for_a_turn(events: list[Event]) -> list[Event]:
    """What ``turn_events`` returns, picked from a view: the last turn whole; of the others,
    the first event of each turn, user messages and answers (a view holds at least these of
    every turn)."""
    last = events[-1].turn
    kept = []
    turn = None
    for event in events:
        if event.turn >= last or event.type in ("user", "answer", "compaction") or event.turn != turn:
            kept.append(event)
        turn = event.turn
    return kept


class TurnViews:
    """The views one store keeps, least recently used first, at most ``VIEW_EVENTS`` events in all."""

    def __init__(self) -> None:
        self.limit = VIEW_EVENTS
        self._views: dict[str, View] = {}
        #: events in all the views
        self.held = 0

    def __iter__(self) -> Iterator[str]:
        """The sessions with a view, least recently used first."""
        return iter(self._views)

    def take(self, session_id: str) -> View | None:
        """The session's view, no longer kept (``keep`` it again, as the newest, if still whole)."""
        view = self._views.pop(session_id, None)
        if view is not None:
            self.held -= len(view.events)
        return view

    def renew(self, session_id: str, view: View) -> list[Event]:
        """A view ``take`` returned and the store found whole: kept again, as the newest and
        trimmed to what a turn reads; a copy of that for the caller."""
        events = _for_a_turn(view.events)
        self.keep(session_id, View(events, view.body, view.origin))
        return list(events)

    def peek(self, session_id: str) -> View | None:
        """The session's view, if kept (it stays kept, no newer than it was)."""
        return self._views.get(session_id)

    def keep(self, session_id: str, view: View) -> None:
        """Keep a session's view as the newest; the oldest go past ``limit`` events."""
        self._views[session_id] = view
        self.held += len(view.events)
        while self.held > self.limit and self._views:
            self.take(next(iter(self._views)))

    def extend(self, events: Sequence[Event], body: str) -> None:
        """After an append of one session's ``events`` (``body``: the last one's stored JSON):
        they join the session's view if they follow its last event (a new session starts
        one); otherwise the view, no longer whole, is dropped."""
        session_id = events[0].session
        view = self.take(session_id)
        if view is None:
            if events[0].seq == 1:
                self.keep(session_id, View(list(events), body))
            return
        tail = view.events[-1]
        if events[0].seq != tail.seq + 1 or events[0].turn < tail.turn:
            return
        # the view's list is its own (``turn_events`` hands out copies): extended in place
        view.events.extend(events)
        view.body = body
        self.keep(session_id, view)


__all__ = ["VIEW_EVENTS", "TurnViews", "View"]
