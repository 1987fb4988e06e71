"""Forking a session over HTTP: ``POST /v1/sessions/{id}/fork`` with ``{"before": SEQ}``.

The new session holds the events before ``SEQ`` (the whole session without it) and copies
of the uploaded files (``Agent.fork``); it answers 201 ``{"session": NEW}``. A fork is a new
session: it counts against the caller's rate of new sessions, and under per-user tokens its
id is in the caller's namespace (``alice:…``), as the original's is (the guard saw to that).
A seq that is no event of the session is a 409 (the session exists; a missing one is a 404).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from reactchat.errors import NoSuchEvent
from reactchat.server._guard import USER
from reactchat.server._schema import GUARDED, WRITES, Body, error, errors

if TYPE_CHECKING:
    from reactchat.server._server import Server


class ForkIn(Body):
    """Body of ``POST /v1/sessions/{id}/fork`` (optional)."""

    model_config = ConfigDict(extra="forbid")
    #: the seq of the event the copy stops before (``events[].seq`` of ``GET /v1/sessions/{id}``);
    #: none: the whole session
    before: int | None = Field(default=None, ge=1)


class Forked(BaseModel):
    """Answer of ``POST /v1/sessions/{id}/fork``."""

    session: str
    forked_from: str
    #: the seq the copy stopped before
    before: int


def fork_routes(app: FastAPI, server: Server) -> None:
    """``POST /v1/sessions/{id}/fork``."""

    @app.post(
        "/v1/sessions/{session}/fork",
        status_code=201,
        response_model=None,
        responses={
            201: {"model": Forked, "description": "The new session"},
            **errors(400, *GUARDED, 404, 409, 413, 422, 429, *WRITES),
        },
    )
    async def fork_session(session: str, request: Request, body: ForkIn | None = None) -> Response:
        """A new session holding this one's events before ``before`` and its uploaded files;
        this one is untouched. Before a user message, the fork's next message starts a new
        turn (edit and resend); inside a turn, the next message or resume goes on from there."""
        wait = server.new_sessions.take(server.caller(request))
        if wait is not None:
            message = "too many new sessions from this client: retry later"
            response = error(429, message, "rate_limited")
            response.headers["Retry-After"] = f"{wait:.0f}"
            return response
        user: str = getattr(request.state, USER, "")
        try:
            new = await server.agent.fork(
                session,
                before=body.before if body is not None else None,
                new_id=f"{user}:{uuid.uuid4().hex}" if user else None,
            )
        except NoSuchEvent as exc:  # a well-formed seq the session (which exists) has no event at
            return error(409, str(exc), "no_such_event")
        origin = await server.store.origin(new)
        assert origin is not None  # recorded with the copy
        return JSONResponse({"session": new, "forked_from": origin[0], "before": origin[1]}, status_code=201)


__all__ = ["ForkIn", "Forked", "fork_routes"]
