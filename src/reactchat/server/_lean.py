"""A short way through FastAPI for the request of every turn.

FastAPI runs each request through its own machinery: an exception middleware, an
``AsyncExitStack`` middleware, the router's scan of every route, then for the route a
``Request``, an exception wrapper, two more ``AsyncExitStack``s, the dependency solver, a
parse of the ``Content-Type`` and the body's validation as a field. For ``POST
/v1/sessions/{id}/messages`` — one request per turn, alive for the whole turn while it
streams — that was a visible share of the server's CPU per turn and of the memory a
running turn keeps.

``Shortcut`` is a middleware just inside the ``Guard`` (whose checks every request
still passes). It takes only the plain case of one route: a JSON body
(``application/json`` or ``application/*+json``) that the route's body model accepts,
on a request OpenTelemetry is not tracing; it calls the route's endpoint with the
validated model and answers an exception of the endpoint with the app's own exception
handler for it. Anything else — no body, another content type, bad JSON, a body the
model refuses, a client that leaves mid-body, a traced request, any other route — goes
on through FastAPI (the body replayed), so those answers and FastAPI's spans are
FastAPI's own. The route stays declared in FastAPI: the OpenAPI document is unchanged.

Kept for what it measures (``python benchmarks/server_load.py --matrix --stores memory,sqlite
--before CHECKOUT_WITHOUT_IT --rounds 2``, 2026-12-02, load 0.9-1.1): on SQLite, server CPU per
turn 3.48 -> 2.92 ms (0.84x) and 279 -> 329 turns/s with it; on the memory store no gain
(2.00 -> 2.17 ms, 441 -> 419 turns/s, within that run's noise).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

M = TypeVar("M", bound=BaseModel)
#: an endpoint of a session's route: ``(session, body) -> response``
Endpoint = Callable[[str, M], Awaitable[Response]]
#: an app's exception handler: ``(request, exc) -> response``
Handler = Callable[[Request, Exception], Awaitable[Response]]


def shortcut(app: FastAPI, path: str, method: str, endpoint: Endpoint[M], model: type[M]) -> None:
    """Take the short way to the route ``method path`` of ``app``, declared with ``endpoint``
    (whose parameters are the path's ``session`` and a body of ``model``).

    It is a middleware: middleware added after it (the ``Guard``) runs before it.
    """
    for route in app.router.routes:
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ()):
            app.add_middleware(Shortcut, route=route, endpoint=endpoint, model=model, handlers=app.exception_handlers)
            return
    raise LookupError(f"no route {method} {path}")


class Shortcut:
    """The middleware that ``shortcut`` adds; ``app`` is the rest of FastAPI's stack."""

    __slots__ = ("app", "endpoint", "handlers", "method", "model", "route", "suffix")

    def __init__(
        self,
        app: ASGIApp,
        *,
        route: APIRoute,
        endpoint: Endpoint[Any],
        model: type[BaseModel],
        handlers: dict[Any, Any],
    ) -> None:
        self.app = app
        self.route = route
        self.endpoint = endpoint
        self.model = model
        #: the app's exception handlers (the same dict: handlers added later count)
        self.handlers = handlers
        self.method = next(iter(route.methods or ()))
        self.suffix = route.path.rsplit("}", 1)[-1]  # a cheap test before the route's own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != self.method
            or not scope["path"].endswith(self.suffix)
            or scope.get("fastapi.telemetry") is not None
        ):
            await self.app(scope, receive, send)
            return
        response = await self._respond(scope, receive, send)
        if response is not None:  # the turn's stream: this frame holds nothing more while it runs
            await response(scope, receive, send)

    async def _respond(self, scope: Scope, receive: Receive, send: Send) -> Response | None:
        """The endpoint's response (or its exception's handler's), or None once FastAPI has answered."""
        match, child = self.route.matches(scope)
        if match is not Match.FULL:
            await self.app(scope, receive, send)
            return None
        received: list[Message] = []
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = self._body(scope, received)
        if body is None:
            await self.app(scope, _replay(received, receive), send)
            return None
        scope.update(child)
        try:
            return await self.endpoint(child["path_params"]["session"], body)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:  # the server's error middleware answers it (a 500)
                raise
            response = await handler(Request(scope, receive), exc)
            exc.__traceback__ = None  # as Starlette does: a reused exception would keep every traceback
            return response

    def _body(self, scope: Scope, received: list[Message]) -> BaseModel | None:
        """The validated body, or None when FastAPI must answer."""
        if received[-1]["type"] != "http.request":
            return None
        data = b"".join(message.get("body", b"") for message in received)
        if not data or not _json(scope):
            return None
        try:
            return self.model.model_validate(json.loads(data))  # what FastAPI does with a JSON body
        except Exception:  # bad JSON, a refused body, too deep: FastAPI says how
            return None

    def _handler(self, exc: Exception) -> Handler | None:
        """The handler Starlette's exception middleware would pick (by status for an
        ``HTTPException``, then by class); not the one for ``Exception`` or 500, which
        belongs to the outer error middleware."""
        handler: Handler | None = None
        if isinstance(exc, HTTPException) and exc.status_code != 500:
            handler = self.handlers.get(exc.status_code)
        for kind in type(exc).__mro__:
            if handler is not None or kind is Exception:
                break
            handler = self.handlers.get(kind)
        return handler


def _json(scope: Scope) -> bool:
    """Whether the first ``Content-Type`` is one FastAPI reads as JSON (``application/json``
    or ``application/<x>+json``, parameters aside); when in doubt, no."""
    for name, value in scope["headers"]:
        if name.lower() == b"content-type":
            kind: bytes = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or (
                kind.startswith(b"application/") and kind.endswith(b"+json") and kind.count(b"/") == 1
            )
    return False


def _replay(received: list[Message], receive: Receive) -> Receive:
    """``receive`` that gives back the messages already read first."""
    pending = list(received)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed
