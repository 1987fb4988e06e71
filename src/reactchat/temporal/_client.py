"""Handing turns to Temporal workers: what ``reactchat serve --temporal`` and programs use."""

from __future__ import annotations

import uuid

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError

from reactchat.temporal._workflow import TASK_QUEUE, Ended, Message, Outcomes, TurnInput, TurnWorkflow


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

    async def send(self, session: str, text: str) -> Ended:
        """Send ``text`` to ``session`` (a new message, or the reply to what it waits for)
        and wait until its stretch has ended: answered, stopped, cancelled or waiting."""
        message = Message(id=uuid.uuid4().hex, text=text)
        handle = await self.client.start_workflow(
            TurnWorkflow.run,
            TurnInput(session, self.heartbeat),
            id=workflow_id(session),
            task_queue=self.task_queue,
            start_signal="message",
            start_signal_args=[message],
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        return await self._outcome(handle, message.id)

    async def _outcome(self, handle: WorkflowHandle[TurnWorkflow, Outcomes], message_id: str) -> Ended:
        try:
            return await handle.execute_update(TurnWorkflow.outcome, message_id)
        except (RPCError, WorkflowUpdateFailedError):
            # the workflow finished before the update reached it: its result holds the outcome
            outcomes = await handle.result()
            return outcomes.ended[message_id]

    async def cancel(self, session: str) -> None:
        """Cancel the session's running turn: the engine records it as cancelled."""
        await self.client.get_workflow_handle(workflow_id(session)).cancel()
