"""A worker that dies mid-turn is not the user's problem.

Each worker watches its store for turn locks whose holder died (``store.abandoned()``,
every ``TAKEOVER_INTERVAL`` seconds: PostgreSQL sees advisory locks end with a dead
worker's connection, and ends the connection of a holder whose lease ran out, a worker
cut off or frozen (``store/_lease.py``); SQLite sees lock rows of processes that no
longer run) and finishes those turns itself, through the same path as any other turn.
Exactly one worker wins each session's lock; the others find it busy and leave it. A
turn of this worker's that ended because the store went away (``Turns.stranded``) is
retried here the same way until the store is back, without waiting for a new message.

A client that was following the dead worker's stream reconnects to any worker with
``GET /v1/sessions/{id}/events`` and the standard ``Last-Event-ID`` header (every SSE
frame of an event carries ``id: <seq>``, its place in the session's log): it gets the
events after that one, none repeated, none missing, and follows the turn to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException

from reactchat.errors import SessionBusy, SessionNotFound
from reactchat.server._schema import GUARDED, READS, SSE_EVENT, errors
from reactchat.server._turns import KEEPALIVE, SSE_HEADERS, event_frame, frame, summary
from reactchat.store import shared

if TYPE_CHECKING:
    from reactchat.server._server import Server

log = logging.getLogger("reactchat.server")

#: seconds between two looks for abandoned turns
TAKEOVER_INTERVAL = 0.5
#: seconds between two reads of the store while following a turn another worker runs
FOLLOW_POLL = 0.25
#: seconds a follower waits on an interrupted turn that nobody takes over before it gives up
FOLLOW_PATIENCE = 60.0
#: streams of ``GET /v1/sessions/{id}/events`` open at once, per session and per client, in one process
MAX_FOLLOWERS_PER_SESSION = 8
MAX_FOLLOWERS_PER_CLIENT = 16


async def watch_abandoned(server: Server, interval: float = TAKEOVER_INTERVAL) -> None:
    """Finish, in this worker, the turns whose worker died or lost its lease, and its own turns
    that the store's going away cut off (runs until cancelled)."""
    store = shared(server.store)
    if store is None:  # a store no other process shares
        return
    while True:
        await asyncio.sleep(interval)
        for session in list(server.turns.stranded):
            server.turns.stranded.discard(session)  # the retried turn may strand it again
            if not await finish_stranded(server, session):
                server.turns.stranded.add(session)
        try:
            sessions = await store.abandoned()
        except Exception as exc:  # the database is away: the next look tries again
            log.warning("could not look for abandoned turns: %s", exc)
            continue
        for session in sessions:  # claimed: this worker's to finish, now or once the store answers
            if not await finish_stranded(server, session):
                server.turns.stranded.add(session)


async def finish_stranded(server: Server, session: str) -> bool:
    """Resume a turn this worker must finish (one the store's going away cut off, or one it
    claimed); whether nothing is left to do (resumed here, not interrupted, or another
    worker runs it), False while the store does not answer."""
    try:
        await take_over(server, session)
    except Exception as exc:  # still away (or starting up): the next look tries again
        log.info("the turn of session %s waits for the store: %s", session, exc)
        return False
    return True


async def take_over(server: Server, session: str) -> bool:
    """Resume the session's interrupted turn here; False if there is none or another worker has it."""
    if server.turns.is_running(session):
        return False
    try:
        last = (await server.agent.state(session)).last
        if last is None or last.status != "interrupted":
            return False
        await server.turns.start(server.agent, session, None, None)
    except (SessionBusy, SessionNotFound, StopAsyncIteration):
        return False
    log.warning("took over the interrupted turn of session %s", session)
    return True


class Followers:
    """The follow streams open in this process, counted per session and per client."""

    def __init__(self, per_session: int = MAX_FOLLOWERS_PER_SESSION, per_client: int = MAX_FOLLOWERS_PER_CLIENT):
        self.per_session, self.per_client = per_session, per_client
        self.sessions: Counter[str] = Counter()
        self.clients: Counter[str] = Counter()

    def enter(self, session: str, client: str) -> None:
        """Count one more stream, or a 429 when the session or the client has its share open."""
        if self.sessions[session] >= self.per_session:
            raise HTTPException(
                429, f"{self.per_session} clients already follow session {session}: retry later", {"Retry-After": "5"}
            )
        if self.clients[client] >= self.per_client:
            raise HTTPException(
                429, f"this client already follows {self.per_client} sessions: close one first", {"Retry-After": "5"}
            )
        self.sessions[session] += 1
        self.clients[client] += 1

    def leave(self, session: str, client: str) -> None:
        """A stream counted by ``enter`` has ended."""
        for counter, key in ((self.sessions, session), (self.clients, client)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]


def follow_routes(app: FastAPI, server: Server) -> None:
    """``GET /v1/sessions/{id}/events``: the session's events as SSE, from ``Last-Event-ID``."""
    followers = Followers()

    @app.get(
        "/v1/sessions/{session}/events",
        response_model=None,
        responses={
            200: {
                "description": "The session's events after Last-Event-ID as Server-Sent Events, then `end`",
                "content": {"text/event-stream": {"schema": SSE_EVENT}},
            },
            **errors(*GUARDED, 404, 422, 429, *READS),
        },
    )
    async def follow_session(
        request: Request,
        session: str,
        last_event_id: str | None = Header(default=None, max_length=40),
        after: int = Query(default=0, ge=0),
    ) -> StreamingResponse:
        """Events after ``Last-Event-ID`` (or ``?after=``) as SSE; a running turn is followed to its ``end``.

        ``Last-Event-ID`` is the ``id:`` of the last frame the client saw; a value that is not
        one of ours (not a non-negative integer) is ignored, as the SSE standard lets a server do.
        A session with no turn ends at once, with status ``idle``. A session has at most
        ``MAX_FOLLOWERS_PER_SESSION`` streams open at once and a client ``MAX_FOLLOWERS_PER_CLIENT`` (429).
        """
        if not await server.store.exists(session):
            raise SessionNotFound(session)
        seen = last_event_id.strip() if last_event_id else ""
        start = int(seen) if seen.isascii() and seen.isdigit() else after
        client = server.caller(request)
        followers.enter(session, client)
        stream = counted(follow(server, session, start), lambda: followers.leave(session, client))
        return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


async def counted(frames: AsyncIterator[str], leave: Any) -> AsyncIterator[str]:
    """``frames``, then ``leave()`` however the stream ends (its client gone included)."""
    try:
        async for text in frames:
            yield text
    finally:
        leave()


async def follow(server: Server, session: str, seq: int) -> AsyncIterator[str]:
    """The session's events after ``seq``, then new ones as they are stored, until its turn ends."""
    events = await server.store.events(session)
    sent = min(seq, len(events))
    quiet = time.monotonic()
    keepalive = quiet
    while True:
        if len(events) > sent:
            yield "".join(event_frame(event) for event in events[sent:])
            sent, quiet = len(events), time.monotonic()
        running = server.turns.is_running(session)
        if not events and not running:  # no turn ever started: nothing is interrupted
            yield frame("end", json.dumps({**summary(session, events), "status": "idle"}))
            return
        end = summary(session, events)
        patience_left = time.monotonic() - quiet < FOLLOW_PATIENCE
        if not running and (end["status"] != "interrupted" or not patience_left):
            yield frame("end", json.dumps(end))
            return
        if time.monotonic() - keepalive > KEEPALIVE:
            keepalive = time.monotonic()
            yield ": keepalive\n\n"
        await asyncio.sleep(FOLLOW_POLL)
        events += await server.store.events(session, since=len(events))


async def stop(task: asyncio.Task[Any] | None) -> None:
    """Cancel the watcher at shutdown."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
