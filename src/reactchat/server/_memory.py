"""The agent's memory over HTTP: ``GET /v1/memory`` lists the caller's facts,
``DELETE /v1/memory/{id}`` forgets one.

On a server with per-user tokens the scope is the caller: the agent must then keep one
scope per user (``Memory(scope=None)``), and no request names another user's scope.
Without users the scope is the agent's (``Memory(scope="...")``) or, for one scope per
user, the ``scope`` query parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from reactchat.errors import ConfigError
from reactchat.memory import Memory
from reactchat.server._guard import USER
from reactchat.server._schema import GUARDED, READS, WRITES, errors

if TYPE_CHECKING:
    from reactchat.server._server import Server


def _problem(status: int, message: str) -> JSONResponse:
    kind = "not_found" if status == 404 else "invalid_request_error"
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def memory_routes(app: FastAPI, server: Server) -> None:
    """Add the memory routes to ``app`` (404 when the agent keeps no memory)."""
    memory = server.agent.memory
    if memory is not None and server.config.users and memory.scope is not None:
        raise ConfigError(
            f"a server with per-user tokens keeps each user's facts apart: use Memory(scope=None), "
            f"not one scope {memory.scope!r} for everyone"
        )

    def whose(request: Request, scope: str | None) -> Memory | JSONResponse:
        """The memory as the caller may see it, or the answer that says why not."""
        if memory is None:
            return _problem(404, "this server's agent keeps no memory (Agent(memory=...))")
        user: str = getattr(request.state, USER, "")
        if user:
            return memory.of(user)
        if memory.scope is not None:
            return memory
        if not scope:
            return _problem(400, "name the scope: /v1/memory?scope=NAME")
        return memory.of(scope)

    @app.get("/v1/memory", responses=errors(*GUARDED, 400, 404, *READS))
    async def list_facts(request: Request, scope: str | None = None) -> Any:
        """The caller's facts that have not expired, newest first: id, text, source session,
        when it was remembered and when it expires."""
        seen = whose(request, scope)
        if isinstance(seen, JSONResponse):
            return seen
        facts = await seen.facts()
        rows = [{"id": f.id, "text": f.text, "session": f.session, "at": f.at, "expires": f.expires} for f in facts]
        return {"facts": rows}

    @app.delete("/v1/memory/{fact}", status_code=204, responses=errors(*GUARDED, 400, 404, *WRITES))
    async def forget_fact(request: Request, fact: str, scope: str | None = None) -> Response:
        """Forget one of the caller's facts: it is never found again (404 if the caller has none of that id)."""
        seen = whose(request, scope)
        if isinstance(seen, JSONResponse):
            return seen
        if not await seen.forget(fact):
            return _problem(404, f"no fact {fact!r} in your memory")
        return Response(status_code=204)


__all__ = ["memory_routes"]
