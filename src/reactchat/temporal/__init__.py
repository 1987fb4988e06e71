"""Turns on Temporal (``pip install 'reactchat[temporal]'``): see docs/temporal.md.

``reactchat worker --temporal HOST:PORT`` runs turns on any number of hosts;
``TemporalTurns`` (for programs) and the server's ``HandedTurns``
(``reactchat.server._temporal``, behind ``reactchat serve --temporal``) hand messages to
them. The reactchat store stays the record of every session.
"""

from __future__ import annotations

from reactchat.temporal._activities import Activities
from reactchat.temporal._client import TemporalTurns, workflow_id
from reactchat.temporal._types import TASK_QUEUE, Ended, Message
from reactchat.temporal._worker import make_worker, run_worker
from reactchat.temporal._workflow import TurnWorkflow

__all__ = [
    "TASK_QUEUE",
    "Activities",
    "Ended",
    "Message",
    "TemporalTurns",
    "TurnWorkflow",
    "make_worker",
    "run_worker",
    "workflow_id",
]
