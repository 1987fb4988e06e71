"""Artifacts: files a session's tools made (``run_python``'s ``/out``), kept in the store.

Every store keeps them (``ArtifactStore``): by session and name, the newest
``MAX_ARTIFACTS`` of a session and at most ``MAX_SESSION_BYTES`` of them in all (older
ones go first), deleted with their session. Names are made safe before they are
stored (``safe_name``); the content type a client is given is decided from the name
and the bytes together (``content_type``), never taken from the code that wrote them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: the largest artifact kept, in bytes
MAX_ARTIFACT_BYTES = 16 << 20
#: artifacts kept per session (the newest), and their total size
MAX_ARTIFACTS = 50
MAX_SESSION_BYTES = 64 << 20

#: images served as images: the extension and the bytes must both say so
_IMAGES = {
    ".png": ("image/png", (b"\x89PNG\r\n\x1a\n",)),
    ".jpg": ("image/jpeg", (b"\xff\xd8\xff",)),
    ".jpeg": ("image/jpeg", (b"\xff\xd8\xff",)),
    ".gif": ("image/gif", (b"GIF87a", b"GIF89a")),
    ".webp": ("image/webp", (b"RIFF",)),
}
#: text served as plain text (never as HTML, SVG or script, whatever it holds)
_TEXT = {".txt", ".csv", ".tsv", ".json", ".md", ".log", ".py", ".xml", ".yaml", ".yml"}


@dataclass(frozen=True)
class Artifact:
    """A stored artifact: its name, content type, size and when it was made; ``data`` when read."""

    name: str
    content_type: str
    size: int
    at: float
    data: bytes = b""


@runtime_checkable
class ArtifactStore(Protocol):
    """A store that keeps artifacts (every built-in store does)."""

    async def put_artifact(self, session_id: str, name: str, data: bytes, at: float) -> Artifact:
        """Keep ``data`` as the session's artifact ``name`` (replacing one of that name), then
        drop the oldest beyond the bounds. ``name`` must be a ``safe_name``. Raises
        ``SessionNotFound``."""
        ...

    async def artifact(self, session_id: str, name: str) -> Artifact | None:
        """The artifact with its bytes, or None."""
        ...

    async def artifacts(self, session_id: str) -> list[Artifact]:
        """The session's artifacts without their bytes, oldest first."""
        ...


def safe_name(name: str) -> str:
    """A file name that is one plain path component: no folders, no ``..``, no control
    characters, no leading dot, at most 120 characters; ``file`` when nothing is left."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").rsplit("/", 1)[-1]
    name = re.sub(r"[\x00-\x1f\x7f\"<>|:*?]+", "_", name).strip(" .")
    if len(name) > 120:
        stem, dot, ext = name.rpartition(".")
        name = stem[: 119 - len(ext)] + dot + ext if dot and len(ext) <= 10 else name[:120]
    return name or "file"


def content_type(name: str, data: bytes) -> str:
    """The type an artifact is served as: an image type when the name and the first bytes
    agree, ``text/plain`` for text files that are UTF-8, else ``application/octet-stream``."""
    ext = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext in _IMAGES:
        kind, magics = _IMAGES[ext]
        if data.startswith(magics) and (ext != ".webp" or data[8:12] == b"WEBP"):
            return kind
    elif ext in _TEXT:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "application/octet-stream"
        return "text/plain; charset=utf-8"
    return "application/octet-stream"


#: SQL shared by SQLite and PostgreSQL: drop a session's artifacts beyond the bounds, newest
#: kept first (``?`` placeholders: session, MAX_ARTIFACTS, MAX_SESSION_BYTES)
PRUNE = """DELETE FROM artifacts WHERE session = ? AND name IN (
    SELECT name FROM (
        SELECT name, row_number() OVER (ORDER BY at DESC, name) AS n,
               sum(size) OVER (ORDER BY at DESC, name) AS upto
        FROM artifacts WHERE session = ?
    ) ranked WHERE n > ? OR upto > ?
)"""

__all__ = [
    "MAX_ARTIFACTS",
    "MAX_ARTIFACT_BYTES",
    "MAX_SESSION_BYTES",
    "PRUNE",
    "Artifact",
    "ArtifactStore",
    "content_type",
    "safe_name",
]
