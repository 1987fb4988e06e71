"""The workflow of a session's turn: what Temporal records and replays (no I/O here).

A workflow ``reactchat-SESSION`` takes messages through its ``send`` update (started with
the workflow if none runs). For each, it runs the ``reactchat.mark`` activity (the
session's log position before the message) unless the sender read it already, and then
the ``reactchat.stretch`` activity: the engine's run of the turn from that message to its
next pause or its end, every event written to the reactchat store as it happens. A pause
(a question, an approval, a call in doubt, a budget) is the workflow waiting for the next
message, for as long as it takes; a turn's end with no message queued ends the workflow.
``send`` answers once its message's stretch has ended (``Ended``); a message that must not
wait behind a running stretch (``queue=False``, what ``reactchat serve --temporal`` sends)
is refused by the update's validator instead, as a busy session is over HTTP.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from reactchat.temporal._inflow import runs_inflow, stretch_inflow
from reactchat.temporal._proxies import retries as call_retries
from reactchat.temporal._types import Ended, Message, Outcomes, Stretch, TurnInput


def retries() -> RetryPolicy:
    """Stretches are retried without limit: a retry runs the engine's recovery, which runs
    ``read`` and ``idempotent`` calls again and never an ``unsafe`` one (it pauses, in doubt).
    What the operator must mend (``PERMANENT``) is not retried."""
    return call_retries()


@workflow.defn(name="reactchat.turn")
class TurnWorkflow:
    """The turns of one session, message by message, until it neither runs nor waits."""

    def __init__(self) -> None:
        self.queue: list[Message] = []
        self.outcomes = Outcomes()
        #: a stretch is running
        self.stretching = False

    @workflow.update
    async def send(self, message: Message) -> Ended:
        """Queue a new message or a reply to the pending item; answer once its stretch ended."""
        self.queue.append(message)
        await workflow.wait_condition(lambda: message.id in self.outcomes.ended)
        return self.outcomes.ended[message.id]

    @send.validator
    def _admit(self, message: Message) -> None:
        if not message.queue and (self.stretching or self.queue):
            raise ApplicationError("a turn of this session is running", type="SessionBusy", non_retryable=True)

    @workflow.query
    def running(self) -> bool:
        """Whether a stretch runs or waits to run (a pause is not running)."""
        return self.stretching or bool(self.queue)

    @workflow.run
    async def run(self, start: TurnInput) -> Outcomes:
        """Run each message's stretch in order; return when the session no longer waits."""
        while True:
            await workflow.wait_condition(lambda: bool(self.queue))
            message = self.queue.pop(0)
            self.stretching = True
            try:
                ended = await self._stretch(start, message)
            finally:  # a cancelled stretch is not running either
                self.stretching = False
            self.outcomes.ended[message.id] = ended
            # a cancel that reached the workflow only after its stretch ended came too late:
            # the workflow ends with what it did, and the canceller sees that it ran to its end
            late = workflow.cancellation_reason() is not None
            if late or (ended.status != "waiting" and not self.queue):
                await workflow.wait_condition(workflow.all_handlers_finished)
                return self.outcomes

    async def _stretch(self, start: TurnInput, message: Message) -> Ended:
        """The stretch of one message; a failure the operator must mend is its ``Ended``."""
        after = message.after
        try:
            if after is None:
                after = await workflow.execute_activity(
                    "reactchat.mark", start.session, result_type=int, start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=retries(),
                )  # fmt: skip
            if runs_inflow():  # each model call and each tool call an activity
                return await stretch_inflow(start.session, message, start.heartbeat)
            stretch = Stretch(
                start.session, message.text, after, message.reply_to, message.output_schema, message.budget
            )
            ended: Ended = await workflow.execute_activity(
                "reactchat.stretch",
                stretch,
                result_type=Ended,
                start_to_close_timeout=timedelta(days=1),
                heartbeat_timeout=timedelta(seconds=start.heartbeat),
                retry_policy=retries(),
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
        except ActivityError as error:
            cause = error.cause
            if not isinstance(cause, ApplicationError):
                raise
            return Ended(status="failed", error=cause.type, answer=cause.message)
        return ended
