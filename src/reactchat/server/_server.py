"""What the routes of a server share (``Server``): its configuration, agent, store, running
turns, uploaded files and the rate of new sessions, with who is calling and in which namespace."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request
from starlette.exceptions import HTTPException

from reactchat.server._config import ServerConfig
from reactchat.server._guard import USER, Rate, owner
from reactchat.server._turns import Turns
from reactchat.store import Store

if TYPE_CHECKING:
    from reactchat.agent import Agent
    from reactchat.server._files import Files


@dataclass
class Server:
    """What the routes share."""

    config: ServerConfig
    agent: Agent
    store: Store
    turns: Turns
    files: Files | None
    #: new sessions per client (see ``ServerConfig.max_new_sessions``)
    new_sessions: Rate

    def caller(self, request: Request) -> str:
        """Who is calling: the user name under per-user tokens, else the client's address."""
        user: str = getattr(request.state, USER, "")
        if user:
            return user
        return request.client.host if request.client else ""

    def scoped(self, request: Request, session: str | None) -> str | None:
        """A session id in the caller's namespace: under per-user tokens ``alice`` asking for
        ``notes`` gets ``alice:notes`` (an id already starting with ``alice:`` is kept)."""
        user: str = getattr(request.state, USER, "")
        if not user or session is None or owner(session) == user:
            return session
        return f"{user}:{session}"

    async def create_session(self, request: Request, session: str | None = None) -> str:
        """Create a session for the caller, within the caller's rate of new sessions (else a 429)."""
        wait = self.new_sessions.take(self.caller(request))
        if wait is not None:
            raise HTTPException(
                429, "too many new sessions from this client: retry later", headers={"Retry-After": f"{wait:.0f}"}
            )
        user: str = getattr(request.state, USER, "")
        if user and session is None:
            session = f"{user}:{uuid.uuid4().hex}"
        return await self.store.create_session(session)


__all__ = ["Server"]
