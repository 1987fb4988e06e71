"""What a turn's workflow takes and answers: plain dataclasses that Temporal serialises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: the task queue of ``reactchat worker`` and ``reactchat serve --temporal`` by default
TASK_QUEUE = "reactchat"


@dataclass
class TurnInput:
    """What a turn's workflow starts with."""

    session: str
    #: seconds without a heartbeat after which a stretch is retried on another worker
    heartbeat: float = 10.0


@dataclass
class Message:
    """A message for the session, and the id its sender waits on.

    ``reply_to`` pins the pending item the sender saw (``Run``'s rule); ``after`` is the
    session's log length the sender read before sending (None: the workflow reads it);
    ``output_schema`` and ``budget`` (``Budget``'s fields) are this turn's, as over HTTP;
    ``queue=False``: refuse the message while another stretch runs or waits to run.
    """

    id: str
    text: str
    reply_to: str | None = None
    after: int | None = None
    output_schema: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    queue: bool = True


@dataclass
class Stretch:
    """The input of a stretch: the message, and how many events the log held before it."""

    session: str
    text: str
    after: int
    reply_to: str | None = None
    output_schema: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None


@dataclass
class Ended:
    """How a stretch ended: the turn's status, its answer, or what it waits for.

    ``status`` is a turn's (``done``, ``waiting``, ``stopped``, ``cancelled``) or
    ``refused`` (the message was not taken: ``error`` names why, ``SessionBusy`` or
    ``AlreadyAnswered``) or ``failed`` (``error`` names the exception, ``answer`` says it).
    """

    status: str
    turn: int = 0
    answer: str | None = None
    question: str | None = None
    pending: str | None = None
    error: str | None = None


@dataclass
class Outcomes:
    """What a finished workflow returns: each message's ``Ended``, by message id."""

    ended: dict[str, Ended] = field(default_factory=dict)
