"""What a server is built from: the model, the store, the token and the limits."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from reactchat.engine.budget import Budget
from reactchat.server._guard import callers

if TYPE_CHECKING:
    from reactchat.agent import Agent
    from reactchat.models import Model
    from reactchat.store import Store

#: builds the server's agent around the server's store
AgentFactory = Callable[["Store"], "Agent"]


@dataclass
class ServerConfig:
    """Settings of one server process.

    ``store`` is a URL (``memory:``, ``sqlite:///path.db``, ``postgresql://...``) or a
    ``Store``; every worker that shares a PostgreSQL store can serve every session.
    ``token``, when set, is required as ``Authorization: Bearer TOKEN`` on ``/v1/``;
    ``users`` (user name → token, e.g. from ``load_users(path)``) gives each user a
    token and sessions of their own; beside them ``token`` is one more user, ``shared``
    (``_guard.callers``). See ``_guard`` for what else is checked.
    """

    model: str | Model = "local"
    store: str | Store = "memory:"
    token: str | None = None
    protocol: Literal["react", "native"] = "react"
    max_steps: int = 10
    #: largest JSON body accepted, in bytes (messages, chat completions)
    max_body: int = 1_000_000
    #: largest uploaded file accepted, in bytes
    max_upload: int = 20_000_000
    #: rounds an uploaded file is kept for, unless the upload says otherwise
    file_retention: int | None = None
    #: the id ``/v1/models`` lists; defaults to the model spec or the model's name
    model_name: str | None = None
    #: tools added to the default agent: ``Tool``s, functions, LangChain tools, ``MCPServer``s
    tools: list[Any] = field(default_factory=list)
    #: user name → bearer token: each user sees only the sessions they created
    users: dict[str, str] | None = None
    #: host names (besides loopback ones) that requests may be addressed to
    allowed_hosts: tuple[str, ...] = ()
    #: uploads being read at once in this process, and in one session
    max_uploads: int = 4
    max_session_uploads: int = 1
    #: sessions one client (user, or address without users) may create per minute; None: no limit
    max_new_sessions: int | None = 600
    #: what reading one uploaded file may take (a ``reactchat.knowledge.Limits``); None: the defaults
    file_limits: Any = None
    #: the most a turn may spend (``REACTCHAT_MAX_BUDGET``: ``tokens=N,cost=USD,...``): a message's
    #: ``budget`` is held within it, and a message without one gets it; None: no limit
    max_budget: Budget | None = None
    #: key of the OpenAI endpoint's derived session ids (``REACTCHAT_SECRET``; see ``_openai``)
    secret: str | None = None
    #: days after which an idle session is deleted, checked at start-up and hourly
    #: (``reactchat.cli.retention``); None: sessions are kept
    retention_days: float | None = None

    def __post_init__(self) -> None:
        callers(self.token, self.users)  # a shared token that cannot be a user of its own: refused now

    @property
    def served_model(self) -> str:
        """The model id shown to OpenAI clients."""
        if self.model_name:
            return self.model_name
        return self.model if isinstance(self.model, str) else self.model.name


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name that may resolve to anything: treat it as exposed


def check_exposure(host: str, token: str | None, users: dict[str, str] | None = None) -> None:
    """Refuse to serve beyond this machine without a token: anyone could run the agent's tools."""
    if not token and not users and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host} without a token: anyone who can reach it could use the agent. "
            "Set REACTCHAT_TOKEN=<a long random string> (clients send 'Authorization: Bearer <token>'), "
            "or listen on 127.0.0.1."
        )


def load_users(path: str | Path) -> dict[str, str]:
    """Users and tokens from a file of ``NAME TOKEN`` lines (``#`` starts a comment).

    A name is letters, digits, ``_``, ``.`` or ``-``; a token is at least 16 characters.
    """
    users: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", parts[0]) or len(parts[1]) < 16:
            raise ValueError(f"{path}:{number}: expected 'NAME TOKEN' (a plain name, a token of 16+ characters)")
        if parts[0] in users or parts[1] in users.values():
            raise ValueError(f"{path}:{number}: each user and each token may appear once")
        users[parts[0]] = parts[1]
    if not users:
        raise ValueError(f"{path}: no 'NAME TOKEN' line")
    return users
