"""Turns on Temporal (``pip install 'reactchat[temporal]'``): see docs/temporal.md.

``reactchat worker --temporal HOST:PORT`` runs turns on any number of hosts;
``TemporalTurns`` (for programs) and ``HandedTurns`` (``reactchat serve --temporal``) hand
messages to them. The reactchat store stays the record of every session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reactchat.temporal._activities import Activities
from reactchat.temporal._client import TemporalTurns, workflow_id
from reactchat.temporal._worker import make_worker, run_worker
from reactchat.temporal._workflow import TASK_QUEUE, Ended, Message, TurnWorkflow

if TYPE_CHECKING:
    from reactchat.temporal._serve import HandedTurns


def __getattr__(name: str) -> Any:
    # HandedTurns needs the server extra, which a worker host may not have installed
    if name == "HandedTurns":
        from reactchat.temporal._serve import HandedTurns

        return HandedTurns
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TASK_QUEUE",
    "Activities",
    "Ended",
    "HandedTurns",
    "Message",
    "TemporalTurns",
    "TurnWorkflow",
    "make_worker",
    "run_worker",
    "workflow_id",
]
