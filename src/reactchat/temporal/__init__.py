"""Turns on Temporal (``pip install 'reactchat[temporal]'``): see docs/temporal.md.

``reactchat worker --temporal HOST:PORT`` runs turns on any number of hosts;
``TemporalTurns`` (and ``reactchat serve --temporal``) hands messages to them. The
reactchat store stays the record of every session.
"""

from reactchat.temporal._activities import Activities
from reactchat.temporal._client import TemporalTurns, workflow_id
from reactchat.temporal._worker import make_worker, run_worker
from reactchat.temporal._workflow import TASK_QUEUE, Ended, TurnWorkflow

__all__ = [
    "TASK_QUEUE",
    "Activities",
    "Ended",
    "TemporalTurns",
    "TurnWorkflow",
    "make_worker",
    "run_worker",
    "workflow_id",
]
