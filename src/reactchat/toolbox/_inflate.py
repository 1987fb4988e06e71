"""A fetched body decoded with a limit on what it unpacks to, before it is unpacked.

httpx decodes a whole network chunk at once (64 KB of gzip can be 64 MB of zeros, a
few KB of ``gzip, gzip`` or zstd gigabytes) before a reader can count it. ``Body`` takes
the raw bytes instead and inflates them here a piece at a time, never past the limit.
Only the codings zlib decodes with an output limit are offered (gzip, deflate), one
layer: brotli and zstd are not offered, so a body in them, or in two layers, is refused.
"""

from __future__ import annotations

import zlib

#: the codings a fetch offers (``Accept-Encoding``)
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
#: decoded bytes at most per call of the decoder
_PIECE = 2**20


class BodyRefused(ValueError):
    """The body cannot be read within its limit or coding; the message says why (after its URL)."""


class Body:
    """A body as it arrives (``feed`` its raw bytes), decoded as its ``Content-Encoding``
    says, refused before a byte more than ``limit`` is inflated."""

    def __init__(self, encoding: str, limit: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip().lower() not in ("", "identity")]
        if len(codings) > 1:
            raise BodyRefused(f"is compressed more than once ({encoding}); only one layer is read")
        if codings and codings[0] not in _WBITS:
            raise BodyRefused(f"is compressed with {codings[0]}, which was not offered (only {ACCEPT_ENCODING})")
        self.limit, self.size = limit, 0
        self.coding = codings[0] if codings else None
        self.inflate = zlib.decompressobj(_WBITS[self.coding]) if self.coding else None
        self.started = False
        self.chunks: list[bytes] = []

    def feed(self, raw: bytes) -> None:
        """Add the next raw bytes of the body; ``BodyRefused`` once it would pass the limit."""
        if self.inflate is None:
            self._keep(raw)
            return
        if not self.started and self.coding == "deflate" and raw:
            self.started = True
            if not _is_zlib(raw):  # "deflate" is zlib-wrapped by the standard; some servers send it raw
                self.inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            while raw and not self.inflate.eof:
                # never more out of one call than the room left (+1, to notice the overflow)
                self._keep(self.inflate.decompress(raw, min(self.limit - self.size + 1, _PIECE)))
                raw = self.inflate.unconsumed_tail
        except zlib.error as exc:
            raise BodyRefused(f"sent a broken {self.coding} body ({exc})") from None

    def _keep(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > self.limit:
            raise BodyRefused(f"is larger than the {self.limit / 2**20:.3g} MB limit")
        self.chunks.append(piece)

    def data(self) -> bytes:
        """The whole decoded body."""
        if self.inflate is not None:
            self._keep(self.inflate.flush())  # what zlib still holds: less than its window
        return b"".join(self.chunks)


def _is_zlib(head: bytes) -> bool:
    """Whether a deflate body starts with a zlib header (RFC 1950: CM 8 and a check sum of 31)."""
    return len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0
