"""Stopping a turn from any worker: ``POST /v1/sessions/{id}/cancel``.

A turn runs in the worker that started it (or took it over), but a cancel request may
reach any worker behind a load balancer. The worker that gets it cancels the turn itself
when it runs it; otherwise it asks the store (``request_cancel``: the running turn's
durable mark, its lock row in SQLite or its row in PostgreSQL's ``running_turns``, is
stamped, and PostgreSQL notifies every worker), and the worker running the turn, which
watches for such requests (``watch_cancels``), cancels it: its model request is closed
and the turn recorded as cancelled. The request answers once it sees that record.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import TYPE_CHECKING, Literal

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from reactchat.errors import SessionNotFound
from reactchat.messages import Event
from reactchat.server._schema import GUARDED, WRITES, error, errors
from reactchat.server._turns import summary
from reactchat.store import shared

if TYPE_CHECKING:
    from reactchat.server._server import Server

log = logging.getLogger("reactchat.server")

#: seconds a cancel request waits for another worker to record the turn as cancelled
CANCEL_WAIT = 10.0
#: seconds between two reads of the session while it waits
CANCEL_FOLLOW = 0.02


class CancelOutcome(BaseModel):
    """Answer of ``POST /v1/sessions/{id}/cancel``."""

    session: str
    #: ``cancelled`` once the turn is recorded as cancelled; ``cancelling`` when the worker
    #: running it has not done so within the wait (it will when it sees the request)
    status: Literal["cancelled", "cancelling"]


def cancel_routes(app: FastAPI, server: Server) -> None:
    """``POST /v1/sessions/{id}/cancel``."""

    @app.post(
        "/v1/sessions/{session}/cancel",
        response_model=None,
        responses={
            200: {"model": CancelOutcome, "description": "The turn is recorded as cancelled"},
            202: {"model": CancelOutcome, "description": "Another worker runs the turn and was asked to stop it"},
            **errors(*GUARDED, 404, 409, *WRITES),
        },
    )
    async def cancel_turn(session: str) -> Response:
        """Stop the session's running turn, whichever worker runs it: the model request in
        flight is closed, tools running in threads are abandoned, and the turn is recorded
        as ``cancelled`` with what it had observed. The session then takes the next message
        as a new turn."""
        if not await server.store.exists(session):
            raise SessionNotFound(session)
        if await server.turns.cancel(session):
            return JSONResponse({"session": session, "status": "cancelled"})
        status = await cancel_elsewhere(server, session)
        if status is None:
            return error(409, f"no turn of session {session} is running", "not_running")
        if status == "cancelling":
            return JSONResponse({"session": session, "status": status}, status_code=202)
        if status != "cancelled":
            return error(409, f"the turn of session {session} ended ({status}) before it could be stopped", "ended")
        return JSONResponse({"session": session, "status": status})


async def cancel_elsewhere(server: Server, session: str) -> str | None:
    """Ask the worker running the session's turn to cancel it, and wait for the turn to end:
    how it ended (``cancelled``, or ``done``, ``waiting``… if it ended first), ``cancelling``
    if it has not ended within ``CANCEL_WAIT``, None if no worker runs a turn of it."""
    store = shared(server.store)
    if store is None:  # a store no other process shares: the turn would be running here
        return None
    events = await store.events(session)
    seen = len(events)
    if not await store.request_cancel(session):
        return None
    deadline = time.monotonic() + CANCEL_WAIT
    while time.monotonic() < deadline:
        await asyncio.sleep(CANCEL_FOLLOW)
        events += await server.store.events(session, since=len(events))
        status = _ended(session, events, seen)
        if status is not None:
            return status
    return "cancelling"


def _ended(session: str, events: list[Event], seen: int) -> str | None:
    """How the last turn ended, once it has recorded something since the request and ended."""
    if len(events) == seen:
        return None
    status: str = summary(session, events)["status"]
    return None if status == "interrupted" else status


async def watch_cancels(server: Server) -> None:
    """Cancel the turns this worker runs that another worker was asked to stop (runs until cancelled)."""
    store = shared(server.store)
    if store is None:  # a store no other process shares
        return
    stopping: dict[str, asyncio.Task[bool]] = {}
    while True:
        try:
            sessions = await store.cancel_requests()
        except Exception:
            log.exception("could not look for cancel requests")
            await asyncio.sleep(1.0)
            continue
        for session in sessions:
            if session in stopping or not server.turns.is_running(session):
                continue  # being stopped already, or a lock that is no turn of this worker
            stopping[session] = task = asyncio.create_task(server.turns.cancel(session))
            task.add_done_callback(functools.partial(_forget, stopping, session))


def _forget(stopping: dict[str, asyncio.Task[bool]], session: str, task: asyncio.Task[bool]) -> None:
    stopping.pop(session, None)
