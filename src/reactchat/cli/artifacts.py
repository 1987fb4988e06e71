"""The files of ``reactchat ask``: the images given with ``--file`` (sent with the question),
and the files a turn made (``run_python``'s ``/out``), listed after the answer and saved to
``--out DIR`` when asked.

Saving never replaces a file: a name already taken in ``DIR`` is saved as ``NAME-1.EXT``,
``NAME-2.EXT``…, each created exclusively (``O_EXCL``, which also refuses a symlink left
at that name). ``DIR`` is checked before the turn runs, so an unwritable one costs no
model call.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from reactchat.errors import ConfigError
from reactchat.messages import ImagePart
from reactchat.messages.images import MAX_IMAGE_BYTES, checked, media_type
from reactchat.store._artifacts import Artifact, ArtifactStore, safe_name

#: names tried for one artifact before giving up (``NAME``, ``NAME-1``… ``NAME-999``)
_TRIES = 1000


def is_image_file(path: str) -> bool:
    """Whether the file at ``path`` starts as a PNG, JPEG or WebP does (then it goes with the
    question as an image; other files go to the session's knowledge base). Only a regular file
    is opened: a FIFO or a device would block or never end, and the upload refuses it."""
    file_path = Path(path).expanduser()
    try:
        if not file_path.is_file():
            return False
        with open(file_path, "rb") as file:
            return media_type(file.read(16)) is not None
    except OSError:
        return False  # the upload says why it cannot be read


def image_file(path: str) -> ImagePart:
    """The image at ``path``, checked (``ImageRejected`` says what is wrong with it)."""
    file = Path(path).expanduser()
    with open(file, "rb") as opened:
        data = opened.read(MAX_IMAGE_BYTES + 1)
    return checked(file.name, data)


def writable_dir(path: str) -> Path:
    """``path`` as a folder this process can write to (made when missing); ``ConfigError`` if not."""
    folder = Path(path).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # a real write, not os.access: root passes access checks on a read-only file system
        with tempfile.TemporaryFile(dir=folder):
            pass
    except FileExistsError:
        raise ConfigError(f"--out {path}: not a folder") from None
    except OSError as exc:
        raise ConfigError(f"--out {path}: cannot write there ({exc.strerror or exc})") from None
    return folder


async def made_since(store: Any, session: str, since: float) -> list[Artifact]:
    """The session's artifacts made at ``since`` or later (a turn's), oldest first."""
    if not isinstance(store, ArtifactStore):
        return []
    return [artifact for artifact in await store.artifacts(session) if artifact.at >= since]


async def save(store: Any, session: str, artifacts: list[Artifact], folder: Path) -> list[Path]:
    """Write each artifact into ``folder`` under a name of its own; the paths written."""
    paths: list[Path] = []
    if not isinstance(store, ArtifactStore):
        return paths
    for listed in artifacts:
        artifact = await store.artifact(session, listed.name)
        if artifact is not None:
            paths.append(_write_new(folder, safe_name(artifact.name), artifact.data))
    return paths


def _write_new(folder: Path, name: str, data: bytes) -> Path:
    stem, dot, ext = name.rpartition(".")
    if not stem:  # no extension, or a name like ".env" made safe already
        stem, dot, ext = name, "", ""
    for number in range(_TRIES):
        path = folder / (name if number == 0 else f"{stem}-{number}{dot}{ext}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
        except BaseException:
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        return path
    raise ConfigError(f"--out {folder}: {name} and {_TRIES - 1} numbered names after it are all taken")


def listing(session: str, artifacts: list[Artifact], paths: list[Path] | None) -> list[str]:
    """The lines that tell the user the files: where they were saved, or where to get them."""
    if not artifacts:
        return []
    if paths is not None:
        return [f"saved: {path}" for path in paths]
    return [f"file: {a.name} ({a.size} bytes) at /v1/sessions/{session}/artifacts/{a.name}" for a in artifacts]


__all__ = ["image_file", "is_image_file", "listing", "made_since", "save", "writable_dir"]
