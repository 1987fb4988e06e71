"""What every store's ``fork`` shares: where the copy ends, and each event's JSON moved into
the new session.

A fork copies the events before ``before`` (every event when it is None) into a new
session, keeping their ``seq``; the new session records ``(original, before)`` as its
origin. An event's stored JSON names its session first (``_Event.session`` is the first
field), so moving it is a replacement of that head; a body written otherwise is parsed
and written again.
"""

from __future__ import annotations

from pydantic_core import to_json

from reactchat.errors import NoSuchEvent
from reactchat.messages import stored_event, stored_json


def fork_point(session: str, before: int | None, last: int) -> int:
    """The seq the copy stops before: ``before`` when it is the place of one of the session's
    ``last`` events, ``last + 1`` (the whole session) when it is None; else ``NoSuchEvent``."""
    if before is None:
        return last + 1
    if not 1 <= before <= last:
        raise NoSuchEvent(session, before, last)
    return before


class Rebase:
    """Stored event JSON of session ``old`` rewritten as session ``new``'s."""

    def __init__(self, old: str, new: str) -> None:
        # the JSON pydantic writes for a string (no ASCII escaping), as ``stored_json`` does
        self.head = f'{{"session":{to_json(old).decode()},'
        self.new_head = f'{{"session":{to_json(new).decode()},'
        self.new = new

    def __call__(self, seq: int, body: str) -> str:
        """``body`` (the event at ``seq``) as the new session's."""
        if body.startswith(self.head):
            return self.new_head + body[len(self.head) :]
        event = stored_event(seq, body)
        event.session = self.new
        return stored_json(event)


__all__ = ["Rebase", "fork_point"]
