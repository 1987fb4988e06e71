"""The errors reactchat raises on purpose: one family, ``ReactchatError``.

Each error builds its message from its arguments, and the message says what to do:
callers raise ``SessionNotFound(session)``, they do not format it. Where an error also
belongs to a built-in family (a missing session is a ``LookupError``, a bad setting a
``ValueError``), it inherits from that too, so ``except ValueError`` keeps working.

Errors the *model* can fix (a broken step, bad tool arguments) never reach the
caller: they become observations. The ones here are for the caller or the operator.
"""

from __future__ import annotations


class ReactchatError(Exception):
    """Base of every error reactchat raises on purpose."""


class ConfigError(ReactchatError, ValueError):
    """A setting cannot work (an unknown model spec, a bad store URL, a bad option)."""


class SessionNotFound(ReactchatError, LookupError):
    """No session has this id."""

    def __init__(self, session: str) -> None:
        super().__init__(
            f"no session {session!r}: it was never created or has been deleted; start a new session instead"
        )
        self.session = session


class SessionBusy(ReactchatError, RuntimeError):
    """Another turn of this session is running; nothing was recorded for this message."""

    def __init__(self, session: str, *, changed: bool = False) -> None:
        if changed:
            message = (
                f"session {session} changed while this message arrived (another message was taken "
                "first); nothing was recorded: reload the session and send it again"
            )
        else:
            message = f"session {session} is busy with another turn; nothing was recorded: send it again when it ends"
        super().__init__(message)
        self.session = session


class AlreadyAnswered(ReactchatError, RuntimeError):
    """The pending item this message answers is no longer pending (someone answered it)."""

    def __init__(self, session: str, reply_to: str) -> None:
        super().__init__(
            f"question {reply_to} of session {session} is no longer pending (it was answered or the "
            "turn moved on); nothing was recorded: reload the session to see its current state"
        )
        self.session = session
        self.reply_to = reply_to


class NothingToRun(ReactchatError, ValueError):
    """``resume`` (or a run without a message) found no open turn to continue."""

    def __init__(self, session: str) -> None:
        super().__init__(f"session {session} has no open turn to resume: send a message to start one")
        self.session = session


class NoSuchEvent(ReactchatError, LookupError):
    """A fork point (``before=``) that is not the place of an event of the session."""

    def __init__(self, session: str, seq: int, last: int) -> None:
        where = f"its events are 1 to {last}" if last else "it has no events yet"
        super().__init__(
            f"session {session} has no event {seq} to fork before ({where}); give the seq of an event "
            "(reactchat show ID --json lists them), or no seq to copy the whole session"
        )
        self.session = session
        self.seq = seq
        self.last = last


class TurnFailed(ReactchatError):
    """A turn ended without an answer (its model failed, or it was cut off); it stays open.

    The session keeps every durable step: ``agent.resume(session)`` (or the next message)
    continues from the last one once the cause is fixed.
    """

    def __init__(self, session: str, cause: str) -> None:
        super().__init__(f"the turn of session {session} ended without an answer: {cause}")
        self.session = session
        self.cause = cause


class TurnTakenOver(ReactchatError, RuntimeError):
    """This process lost a running turn to another worker: its lease on the turn ran out (a
    lost link, a frozen host, a database that went away) and another worker took the turn
    over with a newer fencing epoch. The store refused this append in its own transaction;
    the turn goes on there, and this process stops it without another step."""

    def __init__(self, session: str) -> None:
        super().__init__(
            f"the turn of session {session} was taken over by another worker (this one's lease on it ran "
            "out): nothing more of it is recorded here; follow it with GET /v1/sessions/"
            f"{session}/events and Last-Event-ID"
        )
        self.session = session


class DiskFull(ReactchatError, OSError):
    """The disk holding a database is full; the write that met it was rolled back whole."""

    def __init__(self, path: str, disk: str) -> None:
        super().__init__(
            f"the disk {disk} holding {path} is full: nothing of this write was stored; "
            f"free space on {disk} and send it again"
        )
        self.path = path
        self.disk = disk


class InsideEventLoop(ReactchatError, RuntimeError):
    """``Agent.run`` (the sync wrapper) was called from code already running an event loop."""

    def __init__(self) -> None:
        super().__init__("Agent.run() cannot be called inside a running event loop: use 'await agent.arun(...)'")


class Diverged(ReactchatError, AssertionError):
    """A replayed session did something other than its record: the first difference, where
    it happened (turn, step, agent) and what was expected and got instead."""

    def __init__(self, turn: int, step: int, agent: str, expected: str, got: str) -> None:
        super().__init__(
            f"replay diverged at turn {turn}, step {step} (agent {agent or '?'}):\n"
            f"  expected: {expected}\n  got:      {got}"
        )
        self.turn = turn
        self.step = step
        self.agent = agent
        self.expected = expected
        self.got = got


__all__ = [
    "AlreadyAnswered",
    "ConfigError",
    "DiskFull",
    "Diverged",
    "InsideEventLoop",
    "NoSuchEvent",
    "NothingToRun",
    "ReactchatError",
    "SessionBusy",
    "SessionNotFound",
    "TurnFailed",
    "TurnTakenOver",
]
