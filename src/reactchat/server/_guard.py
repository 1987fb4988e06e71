"""The ASGI layer in front of the routes: bearer token and body size.

It is plain ASGI rather than a Starlette ``BaseHTTPMiddleware`` so that SSE
responses stream through untouched.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(HTTPException):
    """The request body is over the limit for its route (an HTTP 413).

    An ``HTTPException`` so that a route reading the body lets it through as a 413
    instead of calling it a parse error.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")
        self.limit = limit


class Guard:
    """Checks ``Authorization: Bearer TOKEN`` on ``/v1/`` and caps request bodies (413).

    Uploads (paths ending in ``/files``) get ``max_upload``, everything else ``max_body``.
    The page and its static files are public: they hold no data, and the page asks for
    the token when the API answers 401.
    """

    def __init__(self, app: ASGIApp, *, token: str | None, max_body: int, max_upload: int) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.max_body = max_body
        self.max_upload = max_upload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        # route on the path the router sees: behind a proxy (--root-path /api) a request for
        # /api/v1/... reaches the /v1/ routes, so a check on the raw path could be bypassed
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        public = path == "/" or path.startswith("/static/")  # the page itself; it asks for the token
        if self.token is not None and not public and not self._authorized(headers):
            await _error(send, 401, "missing or wrong bearer token: send 'Authorization: Bearer <token>'", "auth")
            return
        limit = self.max_upload if path.rstrip("/").endswith("/files") else self.max_body
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _error(send, 413, BodyTooLarge(limit).detail, "too_large")
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:  # a chunked body gives no length up front
                raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLarge as exc:
            if started:
                raise
            await _error(send, 413, exc.detail, "too_large")

    def _authorized(self, headers: dict[str, bytes]) -> bool:
        assert self.token is not None
        scheme, _, value = headers.get("authorization", b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token)


async def _error(send: Send, status: int, message: str, kind: str) -> None:
    body = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
