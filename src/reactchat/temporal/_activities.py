"""The activities of a turn's workflow: where the engine runs, on any worker.

``reactchat.stretch`` is the engine's own run of a turn (``Agent.arun``), so every model
call, tool call and event is exactly what ``reactchat serve`` does; each event is
appended to the store by the engine before it is yielded, once. A retried stretch (its
worker died: no heartbeat) first finds out whether its message was already taken, by
the log position read before it (``reactchat.mark``, or the server's): if events follow
it, the message is in the log and the retry finishes the interrupted turn
(``Agent.resume``) instead of sending the message again. A first attempt never looks:
another message may have run a whole turn since that position was read.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from temporalio import activity

from reactchat.agent import Agent
from reactchat.engine.budget import Budget
from reactchat.errors import AlreadyAnswered, NothingToRun, SessionBusy
from reactchat.store import SessionNotFound
from reactchat.temporal._inflow import ended
from reactchat.temporal._types import Ended, Stretch

#: seconds between two heartbeats of a stretch at most: how long a cancel may take to reach it
HEARTBEAT = 1.0


class Activities:
    """The activities, over one agent (its store is the record every reader uses)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    @activity.defn(name="reactchat.mark")
    async def mark(self, session: str) -> int:
        """How many events the session's log holds (the session is created if new)."""
        store = self.agent.store
        try:
            return len(await store.events(session))
        except SessionNotFound:
            await store.create_session(session)
            return 0

    @activity.defn(name="reactchat.stretch")
    async def stretch(self, stretch: Stretch) -> Ended:
        """Run the turn from ``stretch.text`` to its next pause or its end."""
        beat = asyncio.create_task(_heartbeats(activity.info().heartbeat_timeout))
        try:
            # a first attempt runs its message; a retry first looks whether the message was taken
            retried = activity.info().attempt > 1
            if not retried or not await self.agent.store.events(stretch.session, since=stretch.after):
                return await self.first(stretch)
            try:  # a retry after the message was taken: finish what the dead worker left
                return ended(await self.agent.resume(stretch.session))
            except NothingToRun:  # it had finished the stretch; only its answer was lost
                return await self.stored(stretch.session)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat

    async def first(self, stretch: Stretch) -> Ended:
        """The first run of a stretch: the message, as ``reactchat serve`` would run it. A
        message the session cannot take (busy, its reply already answered) is ``refused``."""
        budget = Budget(**stretch.budget) if stretch.budget is not None else None
        try:
            result = await self.agent.arun(
                stretch.text,
                stretch.session,
                reply_to=stretch.reply_to,
                output_type=stretch.output_schema,
                budget=budget,
            )
        except (SessionBusy, AlreadyAnswered) as refused:
            return Ended(status="refused", error=type(refused).__name__, answer=str(refused))
        return ended(result)

    async def stored(self, session: str) -> Ended:
        """How the session's last turn stands in the store."""
        turn = (await self.agent.state(session)).last
        if turn is None:
            return Ended(status="done")
        answer, pending = turn.answer, turn.pending
        return Ended(
            status=turn.status,
            turn=turn.index,
            answer=answer.text if answer is not None else None,
            question=pending.question if pending is not None else None,
            pending=pending.kind if pending is not None else None,
        )


async def _heartbeats(timeout: timedelta | None) -> None:
    """Heartbeat a third of the timeout apart, at least every ``HEARTBEAT`` seconds: a dead
    worker is noticed, a cancel arrives (in the answer to a heartbeat)."""
    seconds = min(timeout.total_seconds() / 3, HEARTBEAT) if timeout is not None else HEARTBEAT
    while True:
        activity.heartbeat()
        await asyncio.sleep(seconds)
