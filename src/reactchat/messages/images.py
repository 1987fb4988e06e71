"""Images a model may be shown: PNG, JPEG or WebP, bounded in bytes and in pixels.

``checked(name, data)`` reads the type from the first bytes and the size from the header
alone (PNG's ``IHDR``, JPEG's start-of-frame marker, WebP's ``VP8``/``VP8L``/``VP8X``
chunk): nothing is decoded, so an image that would unpack to gigabytes (a decompression
bomb) is refused from its first few hundred bytes. Bad input is an ``ImageRejected`` that
says what is wrong.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from reactchat.errors import ReactchatError
from reactchat.messages import ImagePart, ImageType

#: the largest image accepted, in bytes (Anthropic's limit per image; OpenAI's is 20 MB)
MAX_IMAGE_BYTES = 5 << 20
#: the longest side and the most pixels accepted (Anthropic refuses sides over 8000)
MAX_SIDE = 8000
MAX_PIXELS = 32_000_000
#: what a JPEG header is read for, at most: its start-of-frame comes after its metadata
_JPEG_SCAN = 1 << 20


class ImageRejected(ReactchatError, ValueError):
    """An image that is not a PNG, JPEG or WebP within the bounds; the message says why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"image {name!r} refused: {reason}")
        self.name = name
        self.reason = reason


def media_type(data: bytes) -> ImageType | None:
    """The image type the first bytes say, or None when they are not a PNG, JPEG or WebP."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def checked(name: str, data: bytes) -> ImagePart:
    """An ``ImagePart`` holding ``data``, after checking its type, size and dimensions."""
    kind = media_type(data)
    if kind is None:
        raise ImageRejected(name, "not a PNG, JPEG or WebP image (by its first bytes)")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRejected(name, f"{len(data)} bytes, over the limit of {MAX_IMAGE_BYTES} bytes")
    size = _dimensions(kind, data)
    if size is None:
        raise ImageRejected(name, f"its {kind.removeprefix('image/').upper()} header is broken or cut short")
    width, height = size
    if width < 1 or height < 1:
        raise ImageRejected(name, f"its header says {width}x{height} pixels")
    if max(width, height) > MAX_SIDE or width * height > MAX_PIXELS:
        raise ImageRejected(
            name, f"{width}x{height} pixels, over the limit of {MAX_SIDE} a side and {MAX_PIXELS} pixels in all"
        )
    return ImagePart(name=name, media_type=kind, width=width, height=height, size=len(data), data=data)


def _dimensions(kind: ImageType, data: bytes) -> tuple[int, int] | None:
    """Width and height from the header, or None when it cannot be read."""
    try:
        if kind == "image/png":
            return _png(data)
        if kind == "image/jpeg":
            return _jpeg(data)
        return _webp(data)
    except (struct.error, IndexError):  # cut short
        return None


def _png(data: bytes) -> tuple[int, int] | None:
    if data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


#: JPEG start-of-frame markers (baseline, progressive, lossless...): not DHT, JPG or DAC
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> tuple[int, int] | None:
    """The frame's size, from the first start-of-frame marker before the scan starts."""
    at, end = 2, min(len(data), _JPEG_SCAN)
    while at + 4 <= end:
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no frame header before them
            return None
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _SOF:
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return int(width), int(height)
        at += 2 + length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":  # lossy: a key frame's start code, then 14-bit sizes
        if data[23:26] != b"\x9d\x01\x2a":
            return None
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":  # lossless: a signature byte, then 14-bit sizes less one
        if data[20] != 0x2F:
            return None
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:  # extended: 24-bit canvas sizes less one
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def notes(images: tuple[ImagePart, ...]) -> str:
    """The text that stands for ``images`` before a model that cannot see them."""
    return "\n".join(image.note for image in images)


@dataclass(frozen=True)
class Observation:
    """What a tool returns to show the model images beside its text (an MCP image, a chart
    ``run_python`` drew): the engine keeps the images as the session's artifacts and sends
    them to a model that sees images; another model is told what they are instead."""

    text: str
    images: tuple[ImagePart, ...] = ()


__all__ = [
    "MAX_IMAGE_BYTES",
    "MAX_PIXELS",
    "MAX_SIDE",
    "ImageRejected",
    "Observation",
    "checked",
    "media_type",
    "notes",
]
