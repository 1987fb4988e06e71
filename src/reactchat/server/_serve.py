"""Running the app: ``serve`` for ``reactchat serve``, ``app_from_env`` for uvicorn workers."""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI

from reactchat.server._app import create_app
from reactchat.server._config import ServerConfig, check_exposure, store_url


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    db: str | None = None,
    model: str = "local",
    token: str | None = None,
    tools: list[Any] | None = None,
) -> None:
    """Serve the API and the page until interrupted.

    ``db`` is a SQLite path or a store URL (``REACTCHAT_DB`` when None); ``token``
    (``REACTCHAT_TOKEN`` when None) is required on any host but loopback; ``tools`` are
    added to the agent's (see ``ServerConfig.tools``).
    """
    import uvicorn

    token = token or os.environ.get("REACTCHAT_TOKEN") or None
    check_exposure(host, token)
    app = create_app(ServerConfig(model=model, store=store_url(db), token=token, tools=list(tools or [])))
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)


def app_from_env() -> FastAPI:
    """An app configured from the environment, for ``uvicorn --factory`` with several workers.

    ``REACTCHAT_DB`` (store URL or SQLite path), ``REACTCHAT_MODEL`` (default ``local``),
    ``REACTCHAT_TOKEN``, ``REACTCHAT_TOOLS``, ``REACTCHAT_MCP``, ``REACTCHAT_SEARCH``.
    Workers sharing a PostgreSQL store serve any session.
    """
    from reactchat._tool_refs import configured_tools

    token = os.environ.get("REACTCHAT_TOKEN") or None
    model = os.environ.get("REACTCHAT_MODEL", "local")
    return create_app(ServerConfig(model=model, store=store_url(None), token=token, tools=configured_tools()))
