"""The workflow of a session's turn: what Temporal records and replays (no I/O here).

A workflow ``reactchat-SESSION`` takes messages as the ``message`` signal. For each, it
runs the ``reactchat.mark`` activity (the session's log position before the message) and
then the ``reactchat.stretch`` activity: the engine's run of the turn from that message
to its next pause or its end, every event written to the reactchat store as it happens.
A pause (a question, an approval, a call in doubt, a budget) is the workflow waiting for
the next ``message`` signal, for as long as it takes; a turn's end with no message queued
ends the workflow. The ``outcome`` update answers once a message's stretch has ended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

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
    """A message for the session, and the id its sender waits on."""

    id: str
    text: str


@dataclass
class Stretch:
    """The input of a stretch: the message, and how many events the log held before it."""

    session: str
    text: str
    after: int


@dataclass
class Ended:
    """How a stretch ended: the turn's status, its answer, or what it waits for."""

    status: str
    turn: int = 0
    answer: str | None = None
    question: str | None = None
    pending: str | None = None


@dataclass
class Outcomes:
    """What a finished workflow returns: each message's ``Ended``, by message id."""

    ended: dict[str, Ended] = field(default_factory=dict)


def retries() -> RetryPolicy:
    """Stretches are retried without limit: a retry runs the engine's recovery, which runs
    ``read`` and ``idempotent`` calls again and never an ``unsafe`` one (it pauses, in doubt)."""
    return RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))


@workflow.defn(name="reactchat.turn")
class TurnWorkflow:
    """The turns of one session, message by message, until it neither runs nor waits."""

    def __init__(self) -> None:
        self.queue: list[Message] = []
        self.outcomes = Outcomes()

    @workflow.signal
    def message(self, message: Message) -> None:
        """A new message or a reply to the pending item."""
        self.queue.append(message)

    @workflow.update
    async def outcome(self, message_id: str) -> Ended:
        """How the stretch of message ``message_id`` ended, once it has."""
        await workflow.wait_condition(lambda: message_id in self.outcomes.ended)
        return self.outcomes.ended[message_id]

    @workflow.run
    async def run(self, start: TurnInput) -> Outcomes:
        """Run each message's stretch in order; return when the session no longer waits."""
        heartbeat = timedelta(seconds=start.heartbeat)
        while True:
            await workflow.wait_condition(lambda: bool(self.queue))
            message = self.queue.pop(0)
            after: int = await workflow.execute_activity(
                "reactchat.mark", start.session, start_to_close_timeout=timedelta(seconds=30), retry_policy=retries()
            )
            ended = await workflow.execute_activity(
                "reactchat.stretch",
                Stretch(start.session, message.text, after),
                result_type=Ended,
                start_to_close_timeout=timedelta(days=1),
                heartbeat_timeout=heartbeat,
                retry_policy=retries(),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            self.outcomes.ended[message.id] = ended
            if ended.status != "waiting" and not self.queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self.outcomes
