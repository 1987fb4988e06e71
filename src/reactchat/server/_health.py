"""Health, readiness and drain: what a balancer and a service manager ask of a worker.

- ``GET /healthz``: 200 while the process answers at all (a liveness probe).
- ``GET /readyz``: 200 when the store answers a read within ``READY_TIMEOUT`` seconds and
  the worker is not draining; 503 otherwise, so a balancer sends new clients elsewhere.
  Stores apply their migrations when they open (one runner, under a lock), so a store
  that answers is at the schema this code expects.
- draining (``Drain.start``, called by ``reactchat serve`` on SIGTERM): a request that
  would start or continue a turn answers 503 with ``Retry-After``; reads, SSE follow-ups
  and cancels still work, so running turns finish and their clients see the end.

Both endpoints are exempt from tokens (a probe carries none) and say nothing about
sessions.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from reactchat.store import Store

#: seconds the store has to answer a readiness probe
READY_TIMEOUT = 2.0
#: what a draining worker tells a client to wait before it tries again (another worker)
RETRY_AFTER = 2
#: paths exempt from tokens (see ``server/_guard.py``)
PROBES = ("/healthz", "/readyz")


class Drain:
    """Whether this worker has stopped taking turns."""

    def __init__(self) -> None:
        self.draining = False

    def start(self) -> None:
        """Refuse new turns from now on."""
        self.draining = True


def _starts_turn(method: str, path: str) -> bool:
    """Whether a request starts or continues a turn (what a draining worker refuses)."""
    if method != "POST":
        return False
    path = path.rstrip("/")
    return path.endswith("/messages") or path == "/v1/chat/completions" or path == "/a2a"


class DrainGate:
    """ASGI middleware: while draining, a request that would start a turn gets 503."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app, self.drain = app, drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a new turn while draining; pass everything else through."""
        if scope["type"] == "http" and self.drain.draining and _starts_turn(scope["method"], scope["path"]):
            body = json.dumps({"error": {"type": "draining", "message": "this worker is shutting down"}}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"retry-after", str(RETRY_AFTER).encode()),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


async def store_ready(store: Store) -> str | None:
    """None when ``store`` answers a read in time, else why not."""
    try:
        await asyncio.wait_for(store.list_sessions(limit=1), READY_TIMEOUT)
    except TimeoutError:
        return f"the store did not answer within {READY_TIMEOUT:g} s"
    except Exception as exc:  # any failure of the store means: not ready
        return f"the store failed: {type(exc).__name__}: {exc}"
    return None


def health_routes(app: FastAPI, store: Store) -> Drain:
    """Add ``/healthz``, ``/readyz`` and the drain gate to ``app``; its ``Drain`` is
    ``app.state.drain``."""
    drain = Drain()
    app.state.drain = drain

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, Any]:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        problem = "draining" if drain.draining else await store_ready(store)
        if problem is not None:
            return JSONResponse({"status": "unavailable", "reason": problem}, status_code=503)
        return JSONResponse({"status": "ready"})

    app.add_middleware(DrainGate, drain=drain)
    return drain
