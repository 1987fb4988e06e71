"""What a server is built from: the model, the store, the token and the limits."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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
    ``token``, when set, is required as ``Authorization: Bearer TOKEN`` on ``/v1/``.
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

    @property
    def served_model(self) -> str:
        """The model id shown to OpenAI clients."""
        if self.model_name:
            return self.model_name
        return self.model if isinstance(self.model, str) else self.model.name


def store_url(db: str | None) -> str:
    """A ``--db`` value (a path or a URL; ``REACTCHAT_DB`` when None) as a store URL."""
    db = db or os.environ.get("REACTCHAT_DB") or "reactchat.db"
    if "://" in db or db.startswith("memory:"):
        return db
    path = Path(db).expanduser().resolve()
    return f"sqlite:///{path}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name that may resolve to anything: treat it as exposed


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token: anyone could run the agent's tools."""
    if not token and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host} without a token: anyone who can reach it could use the agent. "
            "Set REACTCHAT_TOKEN=<a long random string> (clients send 'Authorization: Bearer <token>'), "
            "or listen on 127.0.0.1."
        )
