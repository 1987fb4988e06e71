"""A short way through FastAPI for the request of every turn.

FastAPI runs each request to a route through its own machinery: a ``Request``, an
exception wrapper, two ``AsyncExitStack``s, the dependency solver, a parse of the
``Content-Type`` and the body's validation as a field. For ``POST
/v1/sessions/{id}/messages`` — one request per turn, alive for the whole turn while it
streams — that was a visible share of the server's CPU per turn and of the memory a
running turn keeps.

``shortcut`` keeps the route exactly as FastAPI declared it (the OpenAPI document, the
error answers) and puts a handler in front of it that takes only the plain case: a JSON
body (``application/json`` or ``application/*+json``) that the route's body model
accepts, on a request OpenTelemetry is not tracing. It calls the same endpoint with the
same validated model. Anything else — no body, another content type, bad JSON, a body
the model refuses, a client that leaves mid-body, a traced request — goes to FastAPI's
own handler with the body replayed, so every error answer and every FastAPI span is
FastAPI's. Exceptions of the endpoint go to the app's exception handlers either way
(they are outside the route).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

M = TypeVar("M", bound=BaseModel)
#: an endpoint of a session's route: ``(session, body) -> response``
Endpoint = Callable[[str, M], Awaitable[Response]]


def shortcut(app: FastAPI, path: str, method: str, endpoint: Endpoint[M], model: type[M]) -> None:
    """Put the short way in front of the route ``method path`` of ``app``, declared with
    ``endpoint`` (whose parameters are the path's ``session`` and a body of ``model``)."""
    for route in app.router.routes:
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ()):
            route.app = Shortcut(route.app, endpoint, model)
            return
    raise LookupError(f"no route {method} {path}")


class Shortcut(Generic[M]):
    """The ASGI handler that ``shortcut`` installs; ``full`` is FastAPI's."""

    __slots__ = ("endpoint", "full", "model")

    def __init__(self, full: ASGIApp, endpoint: Endpoint[M], model: type[M]) -> None:
        self.full = full
        self.endpoint = endpoint
        self.model = model

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        received: list[Message] = []
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = self._body(scope, received)
        if body is None:
            await self.full(scope, _replay(received, receive), send)
            return
        response = await self.endpoint(scope["path_params"]["session"], body)
        await response(scope, receive, send)

    def _body(self, scope: Scope, received: list[Message]) -> M | None:
        """The validated body, or None when FastAPI's handler must answer."""
        if received[-1]["type"] != "http.request" or scope.get("fastapi.telemetry") is not None:
            return None
        data = b"".join(message.get("body", b"") for message in received)
        if not data or not _json(scope):
            return None
        try:
            return self.model.model_validate(json.loads(data))  # what FastAPI does with a JSON body
        except Exception:  # bad JSON, a refused body, too deep: FastAPI says how
            return None


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
