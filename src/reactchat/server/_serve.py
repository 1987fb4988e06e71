"""Running the app: ``serve`` for ``reactchat serve``, ``app_from_env`` for uvicorn workers."""

from __future__ import annotations

import os
import signal
import time
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from reactchat.cli.retention import retention_from_env
from reactchat.cli.tool_refs import configured_tools
from reactchat.engine.budget import Budget
from reactchat.server._app import create_app
from reactchat.server._config import ServerConfig, check_exposure, load_users
from reactchat.server._gc import settle_collector
from reactchat.server._turns import Turns
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
    drain_seconds: float | None = None,
    turns: Turns | None = None,
) -> None:
    """Serve the API and the page until interrupted.

    ``db`` is a SQLite path or a store URL (``reactchat.store.default_db()`` when None); ``token``
    (``REACTCHAT_TOKEN`` when None) or ``token_file`` (``REACTCHAT_TOKEN_FILE``: one
    ``NAME TOKEN`` line per user) is required on any host but loopback. Requests must be
    addressed to a loopback name, ``host`` itself or one of ``allowed_hosts``. ``tools``
    are added to the agent's (see ``ServerConfig.tools``). Sessions idle for more than
    ``retention_days`` (``REACTCHAT_RETENTION_DAYS`` when None) are deleted in the background.
    On SIGTERM the server drains (``DrainingServer``) for at most ``drain_seconds``
    (``REACTCHAT_DRAIN_SECONDS``, default 30). ``turns`` runs the turns (in this process
    when None; ``reactchat serve --temporal`` hands them to Temporal workers).
    """
    config = config_from_env(token=token, token_file=token_file, allowed_hosts=allowed_hosts)
    if retention_days is not None:
        config.retention_days = retention_days
    check_exposure(host, config.token, config.users)
    if host not in ("0.0.0.0", "::", ""):
        config.allowed_hosts = (*config.allowed_hosts, host)
    config.model, config.store, config.tools = model, store_url(db), list(tools or [])
    app = create_app(config, turns=turns)
    settle_collector()  # the collector of a serving process (server/_gc.py)
    if drain_seconds is None:
        drain_seconds = float(os.environ.get("REACTCHAT_DRAIN_SECONDS") or DRAIN_SECONDS)
    settings = uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5)
    DrainingServer(settings, app, drain_seconds).run()


#: seconds a SIGTERMed worker lets its running turns finish before it hands them over
DRAIN_SECONDS = 30.0


class DrainingServer(uvicorn.Server):
    """uvicorn that drains on SIGTERM: new turns get 503 with ``Retry-After`` at once
    (``server/_health.py``), running turns go on until they end or ``deadline`` seconds
    pass, then the server stops as uvicorn does; a turn still running then is stopped
    with ``SHUTDOWN`` (it stays interrupted, not cancelled) and another worker on the
    same store takes it over (``server/_takeover.py``). A second signal stops at once."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, deadline: float) -> None:
        super().__init__(config)
        self.app, self.deadline = app, deadline
        self.drain_until: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """SIGTERM starts the drain; another signal, or one during the drain, stops now."""
        if sig == signal.SIGTERM and self.drain_until is None:
            self.drain_until = time.monotonic() + self.deadline
            self.app.state.drain.start()
            return
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        """Stop once draining and no turn runs here, or the deadline passed."""
        if self.drain_until is not None:
            idle = not self.app.state.server.turns.running
            if idle or time.monotonic() >= self.drain_until:
                self.should_exit = True
        return await super().on_tick(counter)


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
    config = config_from_env()
    host = os.environ.get("REACTCHAT_HOST", "127.0.0.1")
    check_exposure(host, config.token, config.users)
    config.tools = configured_tools()
    app = create_app(config)
    settle_collector()
    return app
