"""``reactchat serve --temporal HOST:PORT``: the HTTP server hands each turn to Temporal.

``HandedTurns`` takes the place of the server's in-process ``Turns``: a message becomes the
``send`` update of the session's workflow (started with it if none runs), and the turn's
events are read from the reactchat store as the worker running it writes them, so the
SSE stream, ``GET /v1/sessions/{id}``, ``Last-Event-ID`` and the page are what they are
without Temporal. Cancel is the workflow's cancellation. A dead worker's turn is retried
by Temporal on another worker, so the server takes over nothing itself (``runs_here``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from temporalio.service import RPCError

from reactchat.agent import Agent
from reactchat.engine.budget import Budget
from reactchat.engine.session import SessionState
from reactchat.errors import AlreadyAnswered, ConfigError, NothingToRun, SessionBusy, TurnFailed
from reactchat.messages import ImagePart
from reactchat.models import ModelError
from reactchat.server._turns import TurnFeed, Turns
from reactchat.store import Store
from reactchat.temporal._client import TemporalTurns
from reactchat.temporal._types import TASK_QUEUE, Ended

log = logging.getLogger("reactchat.server")

#: seconds between two reads of the store while a worker runs the turn
POLL = 0.05


class HandedTurns(Turns):
    """Turns run by ``reactchat worker`` processes and followed here in the store."""

    #: a worker that dies mid-turn is Temporal's to replace, not this server's
    runs_here = False

    def __init__(self, address: str, task_queue: str = TASK_QUEUE, heartbeat: float = 10.0) -> None:
        super().__init__()
        self.address, self.task_queue, self.heartbeat = address, task_queue, heartbeat
        self._client: TemporalTurns | None = None
        # made in the event loop that serves (a Temporal client belongs to one)
        self._connecting: asyncio.Lock | None = None

    async def client(self) -> TemporalTurns:
        """The Temporal client, connected on first use (``ConnectionError``: a 503)."""
        if self._client is None:
            self._connecting = self._connecting or asyncio.Lock()
            async with self._connecting:
                if self._client is None:
                    try:
                        self._client = await TemporalTurns.connect(self.address, self.task_queue, self.heartbeat)
                    except RuntimeError as exc:  # what the SDK raises when it cannot connect
                        raise ConnectionError(f"Temporal at {self.address}: {exc}") from None
        return self._client

    async def start(
        self,
        agent: Agent,
        session: str,
        message: str | None,
        reply_to: str | None,
        output_schema: dict[str, Any] | None = None,
        budget: Budget | None = None,
        images: Sequence[ImagePart] = (),
    ) -> TurnFeed:
        """Hand the message to the workers and follow its turn in the store. ``SessionBusy``,
        ``SessionNotFound`` and ``AlreadyAnswered`` raise here, before anything is recorded;
        images with the message are a ``ConfigError`` (the workers are not handed them)."""
        if images:
            raise ConfigError(
                "images with a message are not handed to Temporal workers: send them to a server without --temporal"
            )
        if message is None:  # an interrupted turn is finished by the worker Temporal retries it on
            raise NothingToRun(session)
        if session in self.running:
            raise SessionBusy(session)
        store = agent.store
        events = await store.events(session)
        last = SessionState.from_events(session, events).last
        pending = last.pending if last is not None else None
        if reply_to is not None and (pending is None or pending.call_id != reply_to):
            raise AlreadyAnswered(session, reply_to)
        # pinned to what this look saw, as ``Run`` pins it: racing messages do not both answer
        reply_to = reply_to or (pending.call_id if pending is not None else None)
        options = {
            "reply_to": reply_to,
            "after": len(events),
            "output_schema": output_schema,
            "budget": asdict(budget) if budget is not None else None,
            "queue": False,
        }
        turns = await self.client()
        sent = asyncio.create_task(turns.send(session, message, **options))
        feed = TurnFeed(session)
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        follow = _follow(store, feed, len(events), reply_to, sent, started)
        task = asyncio.create_task(follow, name=session)
        try:
            await started
        except BaseException:
            task.cancel()
            raise
        self.running[session] = task
        task.add_done_callback(self._forget)
        return feed

    async def cancel(self, session: str) -> bool:
        """Cancel the session's workflow, whichever server handed its turn, and wait until
        the turn is recorded as cancelled; False when no stretch of it runs."""
        turns = await self.client()
        if not await turns.cancel(session):
            return False
        task = self.running.get(session)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        return True

    async def stop_all(self) -> None:
        """Stop following at shutdown: the turns go on on the workers."""
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _follow(
    store: Store,
    feed: TurnFeed,
    after: int,
    reply_to: str | None,
    sent: asyncio.Task[Ended],
    started: asyncio.Future[None],
) -> None:
    """Put the turn's events in ``feed`` as they are stored, until its stretch has ended.
    ``started`` resolves once the first is stored, or with the reason the message was refused."""
    seen = after
    try:
        while True:
            done = sent.done()
            fresh = await store.events(feed.session, since=seen)
            if fresh and not started.done():
                started.set_result(None)
            for event in fresh:
                feed.put(event)
            seen += len(fresh)
            if done:
                break
            await asyncio.wait([sent], timeout=POLL)
        failure = _failure(feed.session, reply_to, sent)
        if not started.done():
            if failure is not None and not isinstance(failure, ModelError | TurnFailed):
                started.set_exception(failure)
                return
            started.set_result(None)
        if failure is not None:
            feed.put(failure)
    except asyncio.CancelledError:
        if not started.done():
            started.cancel()
        raise
    except Exception as exc:  # the store failed: the request says so, or the stream ends with it
        if not started.done():
            started.set_exception(exc)
        else:
            log.exception("following the turn of session %s failed", feed.session)
            feed.put(exc)
    finally:
        if not sent.done():
            sent.cancel()
        feed.close()


def _failure(session: str, reply_to: str | None, sent: asyncio.Task[Ended]) -> BaseException | None:
    """Why the handed message did not end its stretch as a turn does, if it did not: refused,
    failed on the worker, or Temporal out of reach. A cancelled stretch is no failure: the
    store holds the turn, recorded as cancelled."""
    try:
        ended = sent.result()
    except SessionBusy as busy:
        return busy
    except RPCError as exc:
        return ConnectionError(f"Temporal: {exc}")
    except Exception as exc:
        return TurnFailed(session, f"{type(exc).__name__}: {exc}")
    if ended.status == "refused":
        if ended.error == "AlreadyAnswered":
            return AlreadyAnswered(session, reply_to or "")
        return SessionBusy(session, changed=True)
    if ended.status == "failed":
        if ended.error in ("ModelError", "ContextTooLong"):
            return ModelError(ended.answer or "the model failed")
        return TurnFailed(session, f"{ended.error}: {ended.answer}")
    return None
