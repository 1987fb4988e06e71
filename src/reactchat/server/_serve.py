"""Running the app: ``serve`` for ``reactchat serve``, ``app_from_env`` for uvicorn workers."""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI

from reactchat.cli.retention import retention_from_env
from reactchat.engine.budget import Budget
from reactchat.server._app import create_app
from reactchat.server._config import ServerConfig, check_exposure, load_users
from reactchat.server._gc import settle_collector
from reactchat.store import store_url


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    db: str | None = None,
    model: str = "local",
    token: str | None = None,
    tools: list[Any] | None = None,
    token_file: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    retention_days: float | None = None,
) -> None:
    """Serve the API and the page until interrupted.

    ``db`` is a SQLite path or a store URL (``reactchat.store.default_db()`` when None); ``token``
    (``REACTCHAT_TOKEN`` when None) or ``token_file`` (``REACTCHAT_TOKEN_FILE``: one
    ``NAME TOKEN`` line per user) is required on any host but loopback. Requests must be
    addressed to a loopback name, ``host`` itself or one of ``allowed_hosts``. ``tools``
    are added to the agent's (see ``ServerConfig.tools``). Sessions idle for more than
    ``retention_days`` (``REACTCHAT_RETENTION_DAYS`` when None) are deleted in the background.
    """
    import uvicorn

    config = config_from_env(token=token, token_file=token_file, allowed_hosts=allowed_hosts)
    if retention_days is not None:
        config.retention_days = retention_days
    check_exposure(host, config.token, config.users)
    if host not in ("0.0.0.0", "::", ""):
        config.allowed_hosts = (*config.allowed_hosts, host)
    config.model, config.store, config.tools = model, store_url(db), list(tools or [])
    app = create_app(config)
    settle_collector()  # the collector of a serving process (server/_gc.py)
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)


def config_from_env(
    token: str | None = None, token_file: str | None = None, allowed_hosts: tuple[str, ...] = ()
) -> ServerConfig:
    """A ``ServerConfig`` from the arguments, else ``REACTCHAT_TOKEN``, ``REACTCHAT_TOKEN_FILE``,
    ``REACTCHAT_ALLOWED_HOSTS`` (comma-separated), ``REACTCHAT_MODEL``, ``REACTCHAT_DB`` and
    ``REACTCHAT_RETENTION_DAYS`` and ``REACTCHAT_MAX_BUDGET``."""
    token = token or os.environ.get("REACTCHAT_TOKEN") or None
    token_file = token_file or os.environ.get("REACTCHAT_TOKEN_FILE") or None
    names = os.environ.get("REACTCHAT_ALLOWED_HOSTS", "")
    return ServerConfig(
        model=os.environ.get("REACTCHAT_MODEL", "local"),
        store=store_url(None),
        token=token,
        users=load_users(token_file) if token_file else None,
        allowed_hosts=(*allowed_hosts, *(n.strip() for n in names.split(",") if n.strip())),
        retention_days=retention_from_env(),
        max_budget=Budget.parse(os.environ["REACTCHAT_MAX_BUDGET"]) if os.environ.get("REACTCHAT_MAX_BUDGET") else None,
    )


def app_from_env() -> FastAPI:
    """An app configured from the environment, for ``uvicorn --factory`` with several workers.

    ``REACTCHAT_DB`` (store URL or SQLite path; default ``reactchat.store.default_db()``),
    ``REACTCHAT_MODEL`` (default ``local``),
    ``REACTCHAT_TOKEN`` or ``REACTCHAT_TOKEN_FILE``, ``REACTCHAT_ALLOWED_HOSTS``,
    ``REACTCHAT_TOOLS``, ``REACTCHAT_MCP``, ``REACTCHAT_SEARCH``, ``REACTCHAT_RETENTION_DAYS``,
    ``REACTCHAT_GC_THRESHOLD`` (the collector of a serving process: see ``server/_gc.py``). The rule of ``reactchat
    serve`` holds: set ``REACTCHAT_HOST`` to the address uvicorn listens on and a
    non-loopback one without a token is refused here; whatever the address, an app without
    a token answers only clients on this machine. Workers sharing a PostgreSQL store serve
    any session.
    """
    from reactchat.cli.tool_refs import configured_tools

    config = config_from_env()
    host = os.environ.get("REACTCHAT_HOST", "127.0.0.1")
    check_exposure(host, config.token, config.users)
    config.tools = configured_tools()
    app = create_app(config)
    settle_collector()
    return app
