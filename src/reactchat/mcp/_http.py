"""The HTTP client of an MCP server reached over streamable HTTP, with a bound on what a
response may unpack to.

The SDK's HTTP client (httpx2) decodes a compressed response a whole network chunk at a
time before anything counts it, so a few KB of ``gzip, gzip`` or zstd from a hostile
server would unpack to gigabytes in this process. ``BoundedTransport`` wraps the
client's transport (httpx2's documented transport API): it offers only the codings
``toolbox/_inflate.py`` decodes a piece at a time (gzip, deflate; one layer), unpacks the
response there, and hands the SDK plain bytes. A response in another coding, or in two
layers, is refused before a byte of it is read; a JSON response larger than
``MAX_RESPONSE_BYTES`` once unpacked, or an event of a stream (``text/event-stream``)
larger than that, is refused when it gets there. A refusal is an ``httpx2.DecodingError``
naming the server and why, which the client reports as that server's failure.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import AsyncIterator

import httpx2  # the mcp SDK's HTTP client: this module is imported only with the mcp extra

from reactchat.toolbox._inflate import ACCEPT_ENCODING, BodyRefused, Inflater

log = logging.getLogger("reactchat.mcp")

#: decoded bytes at most of one JSON response, or of one event of a stream
MAX_RESPONSE_BYTES = 16 * 2**20
_EVENT_STREAM = "text/event-stream"
#: what ends an event of a stream (either line ending)
_EVENT_ENDS = (b"\n\n", b"\r\n\r\n")


class BoundedTransport(httpx2.AsyncBaseTransport):
    """httpx2's own transport for ``url``, whose responses are unpacked with a bound."""

    def __init__(self, url: str, limit: int = MAX_RESPONSE_BYTES) -> None:
        self.url, self.limit = url, limit
        self.inner = httpx2.AsyncHTTPTransport(proxy=environment_proxy(url))
        #: why the last refused response was refused, if one was
        self.refusal: str | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        response = await self.inner.handle_async_request(request)
        try:
            inflater = Inflater(response.headers.get("content-encoding", ""))
        except BodyRefused as exc:
            await response.aclose()
            raise self.refuse(str(exc)) from None
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length")
        ]
        events = response.headers.get("content-type", "").startswith(_EVENT_STREAM)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        stream = _Unpacked(response.stream, inflater, self, events)
        return httpx2.Response(response.status_code, headers=headers, stream=stream, extensions=response.extensions)

    def refuse(self, why: str) -> httpx2.DecodingError:
        """The error of a response that is not read, logged with the server's URL."""
        self.refusal = f"the MCP server at {self.url} {why}"
        log.warning("%s: its response is not read", self.refusal)
        return httpx2.DecodingError(self.refusal)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Unpacked(httpx2.AsyncByteStream):
    """A response's raw stream, unpacked a piece at a time and counted: the whole body,
    or each event of an event stream, at most ``limit`` bytes."""

    def __init__(
        self, raw: httpx2.AsyncByteStream, inflater: Inflater, transport: BoundedTransport, events: bool
    ) -> None:
        self.raw, self.inflater, self.transport, self.events = raw, inflater, transport, events
        self.limit, self.size = transport.limit, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.raw:
                for piece in self.inflater.feed(chunk):
                    self._count(piece)
                    yield piece
            tail = self.inflater.flush()
            self._count(tail)
            if tail:
                yield tail
        except BodyRefused as exc:
            raise self.transport.refuse(str(exc)) from None

    def _count(self, piece: bytes) -> None:
        ends = [piece.rfind(mark) + len(mark) for mark in _EVENT_ENDS if mark in piece] if self.events else []
        self.size = len(piece) - max(ends) if ends else self.size + len(piece)
        if self.size > self.limit:
            what = "an event of its stream" if self.events else "its response"
            raise BodyRefused(f"sent {what} larger than the {self.limit / 2**20:.3g} MB limit")

    async def aclose(self) -> None:
        await self.raw.aclose()


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``, ``NO_PROXY``…), as
    httpx2's client would use it without a transport of its own."""
    parsed = httpx2.URL(url)
    if urllib.request.proxy_bypass(parsed.host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parsed.scheme) or proxies.get("all")
