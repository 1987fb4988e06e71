"""The ASGI layer in front of the routes: who may call, from where, and how much.

* ``Host`` must name this server: a loopback name, or one of ``allowed_hosts``
  (without a token every request must; with a token only when names are configured).
  A page on another site that rebinds its DNS name to 127.0.0.1 is refused.
* A state-changing request (anything but GET, HEAD, OPTIONS) that a browser sends
  from another origin is refused: no web page can post messages or upload files to a
  server on this machine, even one without a token.
* Without a token, only loopback clients are served (``reactchat serve`` refuses to
  listen elsewhere; this also holds under ``uvicorn --factory ... --host 0.0.0.0``).
* ``Authorization: Bearer TOKEN`` on ``/v1/`` and ``/docs``; with a token per user
  (``users``), a user's sessions are the ids that start with ``<user>:`` and any other
  session is "not found" to them. Beside per-user tokens the shared token is one more
  user, ``SHARED_USER``, with sessions of its own (see ``callers``).
* Request bodies are capped (413), and so are concurrent uploads, per server process
  and per session (429).

It is plain ASGI rather than a Starlette ``BaseHTTPMiddleware`` so that SSE
responses stream through untouched.
"""

from __future__ import annotations

import collections
import functools
import hmac
import ipaddress
import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.exceptions import HTTPException

from reactchat.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: the key in ``scope["state"]`` (``request.state``) that holds the caller's user name
USER = "reactchat_user"
#: headers on every answer: no MIME sniffing, never inside a frame, no referrer to other sites
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
#: ids of sessions the OpenAI endpoint derives from a conversation (no client may pick one)
DERIVED_PREFIX = "oa-"
#: the user the shared token (``REACTCHAT_TOKEN``) is beside per-user tokens: its sessions are
#: ``shared:…`` and it sees no one else's, as any user; no token file may name a user so
SHARED_USER = "shared"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SESSION_PATH = re.compile(r"^/v1/sessions/([^/]+)")
#: the request headers the checks read (the others are not decoded)
_READ = frozenset({b"host", b"origin", b"authorization", b"content-length", b"transfer-encoding"})


class BodyTooLarge(HTTPException):
    """The request body is over the limit for its route (an HTTP 413).

    An ``HTTPException`` so that a route reading the body lets it through as a 413
    instead of calling it a parse error.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit} bytes")
        self.limit = limit


def hostname(value: str) -> str:
    """The host name of a ``Host`` header or an origin's netloc, lower case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@functools.lru_cache(maxsize=4096)  # parsing an address costs more than the rest of the checks
def is_loopback_address(host: str) -> bool:
    """Whether a client or server address is on this machine."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def callers(token: str | None, users: dict[str, str] | None) -> dict[str, str]:
    """Each caller's bearer token by user name: the ``users`` and, beside them, the shared
    ``token`` as ``SHARED_USER``; without users the shared token is ``""``, whose sessions
    are all sessions. Raises ``ConfigError`` when the shared token cannot be a user of its own."""
    if not users:
        return {"": token} if token else {}
    found = dict(users)
    if token:
        if SHARED_USER in found:
            raise ConfigError(
                f"the token file names a user {SHARED_USER!r}, the name the shared token (REACTCHAT_TOKEN) has "
                "beside per-user tokens: rename that user, or unset REACTCHAT_TOKEN"
            )
        for user, theirs in found.items():
            if theirs == token:  # at start-up, not per request: no timing to hide
                raise ConfigError(
                    f"the shared token (REACTCHAT_TOKEN) is also the token of user {user!r} in the token file: "
                    "give each caller a token of its own"
                )
        found[SHARED_USER] = token
    return found


def owner(session: str) -> str:
    """The user a session id belongs to under per-user tokens (the part before the first ``:``)."""
    return session.split(":", 1)[0] if ":" in session else ""


class Guard:
    """See the module docstring. ``users`` maps user names to their tokens."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body: int,
        max_upload: int,
        users: dict[str, str] | None = None,
        allowed_hosts: tuple[str, ...] = (),
        max_uploads: int = 4,
        max_session_uploads: int = 1,
    ) -> None:
        self.app = app
        self.tokens = {t.encode(): user for user, t in callers(token, users).items()}
        self.per_user = bool(users)
        names = frozenset(hostname(h) for h in allowed_hosts)
        self.names = names
        # with a token and no configured names any Host is served (the token is the protection)
        self.hosts: frozenset[str] | None = LOOPBACK_NAMES | names if names or not self.tokens else None
        self.max_body = max_body
        self.max_upload = max_upload
        self.uploads = Slots(max_uploads, max_session_uploads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = self._admit(scope, send)
        if isinstance(answer, tuple):
            await _error(send, *answer)
            return
        try:
            await self.app(scope, receive if answer.limit is None else Counted(receive, answer.limit), answer)
        except BodyTooLarge as exc:
            if answer.started:
                raise
            await _error(send, 413, exc.detail, "too_large")
        finally:
            answer.release()

    def _admit(self, scope: Scope, send: Send) -> Answer | tuple[int, str, str]:
        """The ``send`` the request is answered through, or why it is refused (status, message, type).

        Only what the answer needs outlives this call: a streamed answer keeps its
        request alive for the whole turn, and so whatever its frames hold.
        """
        path: str = scope["path"]
        # route on the path the router sees: behind a proxy (--root-path /api) a request for
        # /api/v1/... reaches the /v1/ routes, so a check on the raw path could be bypassed
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"] if k.lower() in _READ}
        refusal = self._refusal(scope, path, headers)
        if refusal is not None:
            return refusal
        upload = scope["method"] == "POST" and path.rstrip("/").endswith("/files")
        limit = self.max_upload if upload else self.max_body
        length = headers.get("content-length", "")
        sized = length.isdigit()
        if sized and int(length) > limit:
            return 413, BodyTooLarge(limit).detail, "too_large"
        slot = None
        if upload:
            match = _SESSION_PATH.match(path)
            slot = self.uploads.take(match.group(1) if match else "")
            if slot is None:
                return 429, "too many uploads at once: wait for one to finish, then retry", "busy"
        # a length within the limit (checked above) bounds the body (the server never hands
        # over more than it announced), unless a chunked one overrides it: else count the bytes
        counted = not sized or "transfer-encoding" in headers
        return Answer(send, limit if counted else None, self.uploads if upload else None, slot)

    def _refusal(self, scope: Scope, path: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """Why the request is refused before it reaches a route: (status, message, type), or None."""
        host = hostname(headers.get("host", ""))
        if self.hosts is not None and host and host not in self.hosts:
            return 403, f"this server does not answer to the host name {host!r}", "forbidden"
        origin = headers.get("origin")
        if scope["method"] not in _SAFE_METHODS and origin is not None and self._foreign(origin, headers):
            return 403, "cross-origin requests that change state are refused", "forbidden"
        client = scope.get("client")
        if not self.tokens and client and not is_loopback_address(client[0]):
            message = "this server has no token, so it only answers on this machine: set REACTCHAT_TOKEN"
            return 403, message, "forbidden"
        # the page itself (it asks for the token) and the A2A agent card (it says which token)
        public = path == "/" or path.startswith(("/static/", "/.well-known/"))
        if self.tokens and not public:
            user = self._user(headers)
            if user is None:
                return 401, "missing or wrong bearer token: send 'Authorization: Bearer <token>'", "auth"
            scope.setdefault("state", {})[USER] = user
            match = _SESSION_PATH.match(path)
            if self.per_user and match and owner(match.group(1)) != user:
                return 404, f"no session {match.group(1)!r}: create one with POST /v1/sessions", "not_found"
        return None

    def _foreign(self, origin: str, headers: dict[str, str]) -> bool:
        """Whether a browser sent this request from a page of another origin.

        The page's own origin is the ``Host`` it was served under; behind a proxy that
        rewrites ``Host`` it is one of the configured names. A loopback name or this host
        on another port is never the page's: that is another local server's page.
        """
        if origin == "null":
            return True
        netloc = urlsplit(origin).netloc.lower()
        host = headers.get("host", "").lower()
        if netloc == host:
            return False
        name = hostname(netloc)
        return name not in self.names or name in LOOPBACK_NAMES or name == hostname(host)

    def _user(self, headers: dict[str, str]) -> str | None:
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        given = value.strip().encode("latin-1")
        found = None
        for token, user in self.tokens.items():  # every token is compared: no timing hint of which
            if hmac.compare_digest(given, token):
                found = user
        return found


class Answer:
    """The ``send`` of one admitted request: the security headers on its answer and, for
    an upload, its slot given back at the last byte (the client may send the next at once).
    ``limit``: count the body's bytes against it (None: a length within the limit bounds it)."""

    __slots__ = ("limit", "send", "slot", "slots", "started")

    def __init__(self, send: Send, limit: int | None, slots: Slots | None, slot: str | None) -> None:
        self.send = send
        self.limit = limit
        self.slots = slots
        self.slot = slot
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
        elif self.slots is not None and message["type"] == "http.response.body" and not message.get("more_body"):
            self.release()
        await self.send(message)

    def release(self) -> None:
        """Give the upload slot back (once)."""
        if self.slots is not None and self.slot is not None:
            self.slots.give(self.slot)
            self.slots = None


class Counted:
    """A ``receive`` that raises ``BodyTooLarge`` once the body passes ``limit`` bytes (a
    chunked body gives no length up front)."""

    __slots__ = ("limit", "receive", "received")

    def __init__(self, receive: Receive, limit: int) -> None:
        self.receive = receive
        self.limit = limit
        self.received = 0

    async def __call__(self) -> Message:
        message = await self.receive()
        self.received += len(message.get("body", b""))
        if self.received > self.limit:
            raise BodyTooLarge(self.limit)
        return message


class Slots:
    """Counts of uploads in progress: at most ``total`` at once, ``per_session`` in one session."""

    def __init__(self, total: int, per_session: int) -> None:
        self.total = total
        self.per_session = per_session
        self.busy: dict[str, int] = {}
        self.count = 0

    def take(self, session: str) -> str | None:
        """Take a slot for ``session``; None when there is none free."""
        if self.count >= self.total or self.busy.get(session, 0) >= self.per_session:
            return None
        self.count += 1
        self.busy[session] = self.busy.get(session, 0) + 1
        return session

    def give(self, session: str) -> None:
        """Give back a slot taken for ``session``."""
        self.count -= 1
        self.busy[session] -= 1
        if not self.busy[session]:
            del self.busy[session]


class Rate:
    """At most ``count`` events per ``window`` seconds per key (a sliding window)."""

    def __init__(self, count: int | None, window: float = 60.0) -> None:
        self.count = count
        self.window = window
        #: each key's events in the window, oldest first
        self.seen: dict[str, collections.deque[float]] = {}

    def take(self, key: str) -> float | None:
        """Record one event for ``key``; None if allowed, else the seconds until one would be."""
        if self.count is None:
            return None
        now = time.monotonic()
        recent = self.seen.get(key)
        if recent is None:
            recent = self.seen[key] = collections.deque()
        while recent and recent[0] <= now - self.window:  # each event is dropped once: no scan per call
            recent.popleft()
        if len(recent) >= self.count:
            return recent[0] + self.window - now
        recent.append(now)
        if len(self.seen) > 10_000:  # forget idle keys so that the table stays small
            self.seen = {k: v for k, v in self.seen.items() if v and v[-1] > now - self.window}
        return None


async def _error(send: Send, status: int, message: str, kind: str) -> None:
    body = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if status == 429:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
