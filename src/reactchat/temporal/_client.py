"""Handing turns to Temporal workers: what ``reactchat serve --temporal`` and programs use."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.service import RPCError

from reactchat.errors import SessionBusy
from reactchat.temporal._types import TASK_QUEUE, Ended, Message, TurnInput
from reactchat.temporal._workflow import TurnWorkflow

#: how many times a message is sent again when the workflow it reached had just finished
RESENDS = 3


def workflow_id(session: str) -> str:
    """The id of a session's workflow: one runs at a time per session."""
    return f"reactchat-{session}"


class TemporalTurns:
    """Send messages to sessions whose turns run on ``reactchat worker`` processes."""

    def __init__(self, client: Client, task_queue: str = TASK_QUEUE, heartbeat: float = 10.0) -> None:
        self.client, self.task_queue, self.heartbeat = client, task_queue, heartbeat

    @classmethod
    async def connect(cls, address: str, task_queue: str = TASK_QUEUE, heartbeat: float = 10.0) -> TemporalTurns:
        """Connect to the Temporal frontend at ``address`` (``HOST:PORT``)."""
        return cls(await Client.connect(address), task_queue, heartbeat)

    async def send(self, session: str, text: str, **options: Any) -> Ended:
        """Send ``text`` to ``session`` (a new message, or the reply to what it waits for)
        and wait until its stretch has ended: answered, stopped, cancelled or waiting.

        ``options`` are ``Message``'s (``reply_to``, ``after``, ``output_schema``,
        ``budget``, ``queue``); with ``queue=False`` a session whose turn runs is
        ``SessionBusy`` instead of the message waiting its turn. A stretch whose workflow
        was cancelled ends ``cancelled``."""
        message = Message(id=uuid.uuid4().hex, text=text, **options)
        for _ in range(RESENDS):
            try:
                return await self._send(session, message)
            except WorkflowUpdateFailedError as error:
                cause = error.cause
                if isinstance(cause, ApplicationError) and cause.type == "SessionBusy":
                    raise SessionBusy(session) from None
                if isinstance(cause, ApplicationError) and cause.type == "AcceptedUpdateCompletedWorkflow":
                    return await self._ended(session, message.id)
                raise
            except RPCError:
                continue  # the workflow finished as the update reached it: a new one takes it
        return await self._send(session, message)

    async def _send(self, session: str, message: Message) -> Ended:
        start = WithStartWorkflowOperation(
            TurnWorkflow.run,
            TurnInput(session, self.heartbeat),
            id=workflow_id(session),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        return await self.client.execute_update_with_start_workflow(
            TurnWorkflow.send, message, start_workflow_operation=start
        )

    async def _ended(self, session: str, message_id: str) -> Ended:
        """How a message ended whose workflow finished before answering: cancelled (the
        engine recorded the turn so), or as its result says."""
        handle = self.client.get_workflow_handle_for(TurnWorkflow.run, workflow_id(session))
        try:
            outcomes = await handle.result()
        except WorkflowFailureError as failure:
            if isinstance(failure.cause, CancelledError):
                return Ended(status="cancelled")
            raise
        return outcomes.ended.get(message_id) or Ended(status="failed", error="lost", answer="no outcome recorded")

    async def running(self, session: str) -> bool:
        """Whether a stretch of the session runs (or waits to run) on the workers."""
        handle = self.client.get_workflow_handle_for(TurnWorkflow.run, workflow_id(session))
        try:
            # a finished workflow answers queries too (replayed to its end): asked only while it runs
            if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
                return False
            return await handle.query(TurnWorkflow.running)
        except RPCError:  # no workflow, or it finished meanwhile
            return False

    async def cancel(self, session: str) -> bool:
        """Cancel the session's running turn and wait until its workflow has ended (the
        engine records the turn as cancelled first); False when no stretch of it runs, or
        the stretch ended before the cancel reached it."""
        if not await self.running(session):
            return False
        handle = self.client.get_workflow_handle_for(TurnWorkflow.run, workflow_id(session))
        await handle.cancel()
        try:
            await handle.result()
        except WorkflowFailureError as failure:
            return isinstance(failure.cause, CancelledError)
        return False  # it ran to its end (or its pause) first
