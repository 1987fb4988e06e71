"""A fetched body decoded with a limit on what it unpacks to, before it is unpacked.

httpx decodes a whole network chunk at once (64 KB of gzip can be 64 MB of zeros, a
few KB of ``gzip, gzip`` or zstd gigabytes) before a reader can count it. ``Body`` takes
the raw bytes instead and inflates them here a piece (1 MB) at a time, counting each
(``Inflater`` does the unpacking: MCP's HTTP client uses it for the responses it streams).
Only the codings zlib decodes with an output limit are offered (gzip, deflate), one
layer: brotli and zstd are not offered, so a body in them, or in two layers, is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

#: the codings a fetch offers (``Accept-Encoding``)
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
#: decoded bytes at most per call of the decoder
_PIECE = 2**20


class BodyRefused(ValueError):
    """The body cannot be read within its limit or coding; the message says why (after its URL)."""


class Inflater:
    """A body's raw bytes in, as they arrive; its decoded bytes out, as its
    ``Content-Encoding`` says, at most ``_PIECE`` bytes from one call of the decoder, so
    that a reader counts each piece before the next is unpacked."""

    def __init__(self, encoding: str) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip().lower() not in ("", "identity")]
        if len(codings) > 1:
            raise BodyRefused(f"is compressed more than once ({encoding}); only one layer is read")
        if codings and codings[0] not in _WBITS:
            raise BodyRefused(f"is compressed with {codings[0]}, which was not offered (only {ACCEPT_ENCODING})")
        self.coding = codings[0] if codings else None
        self.inflate = zlib.decompressobj(_WBITS[self.coding]) if self.coding else None
        self.started = False

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw bytes."""
        if self.inflate is None:
            if raw:
                yield raw
            return
        if not self.started and self.coding == "deflate" and raw:
            self.started = True
            if not _is_zlib(raw):  # "deflate" is zlib-wrapped by the standard; some servers send it raw
                self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            while raw and not self.inflate.eof:
                piece = self.inflate.decompress(raw, _PIECE)
                raw = self.inflate.unconsumed_tail
                if piece:
                    yield piece
        except zlib.error as exc:
            raise BodyRefused(f"sent a broken {self.coding} body ({exc})") from None

    def flush(self) -> bytes:
        """What the decoder still holds at the end of the body: less than its window."""
        return self.inflate.flush() if self.inflate is not None else b""


class Body:
    """A body as it arrives (``feed`` its raw bytes), decoded by an ``Inflater``, refused
    before more than a piece past ``limit`` is inflated."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.inflater = Inflater(encoding)
        self.limit, self.size = limit, 0
        self.chunks: list[bytes] = []

    def feed(self, raw: bytes) -> None:
        """Add the next raw bytes of the body; ``BodyRefused`` once it would pass the limit."""
        for piece in self.inflater.feed(raw):
            self._keep(piece)

    def _keep(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > self.limit:
            raise BodyRefused(f"is larger than the {self.limit / 2**20:.3g} MB limit")
        self.chunks.append(piece)

    def data(self) -> bytes:
        """The whole decoded body."""
        self._keep(self.inflater.flush())
        return b"".join(self.chunks)


def _is_zlib(head: bytes) -> bool:
    """Whether a deflate body starts with a zlib header (RFC 1950: CM 8 and a check sum of 31)."""
    return len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
