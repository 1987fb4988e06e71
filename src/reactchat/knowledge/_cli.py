"""Uploaded files on the command line: ``reactchat ask --file`` and ``/upload``, ``/files``, ``/clear``."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from reactchat.knowledge._blocks import FileRejected
from reactchat.knowledge._kb import FileInfo, KnowledgeBase
from reactchat.knowledge._tool import SERVICE

if TYPE_CHECKING:
    from reactchat.engine.spec import AgentSpec

HELP = "/upload PATH adds a file, /files lists them, /clear forgets them"
BAR = 24


class ProgressBar:
    """``[#######.........]  7/30`` on a terminal; nothing elsewhere (the summary line says it all)."""

    def __init__(self, name: str, out: TextIO) -> None:
        self.name = name
        self.out = out
        self.live = out.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.live or total <= 0:
            return
        filled = BAR * done // total
        self.out.write(f"\r{self.name} [{'#' * filled}{'.' * (BAR - filled)}] {done}/{total}")
        self.out.flush()

    def end(self) -> None:
        """Clear the bar's line."""
        if self.live:
            self.out.write("\r\033[K")
            self.out.flush()


def describe(info: FileInfo) -> str:
    """One line about a file: name, size, pages, chunks and rounds left."""
    pages = f", {info.pages} pages" if info.pages else ""
    return (
        f"{info.name} ({info.kind}, {info.size:,} bytes{pages}, {info.chunks} chunk{'s' if info.chunks != 1 else ''}, "
        f"{info.rounds_left} of {info.retention} rounds left)"
    )


def read_local(path: str, max_bytes: int) -> bytes:
    """A regular file's bytes, its type and size checked before anything is read: a FIFO, a
    device (``/dev/zero``) or a folder is refused, and so is a file over ``max_bytes``."""
    file = Path(path).expanduser()
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then says what it is
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise FileRejected(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FileRejected(f"{path}: not a regular file (a folder, a device or a pipe cannot be uploaded)")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            raise FileRejected(
                f"{path}: {info.st_size / 1e6:.1f} MB is over the {max_bytes / 1e6:.1f} MB limit; "
                "split it or upload the part you need",
                "too_large",
            )
        os.set_blocking(fd, True)
        data = handle.read(max_bytes + 1)  # the file may have grown since fstat
    if len(data) > max_bytes:
        raise FileRejected(f"{path}: the file is over the {max_bytes / 1e6:.1f} MB limit", "too_large")
    return data


async def upload(kb: KnowledgeBase, session: str, path: str, out: TextIO, err: TextIO) -> FileInfo:
    """Read a local file into the session's knowledge base, with a progress bar on ``err``."""
    file = Path(path).expanduser()
    data = await asyncio.to_thread(read_local, path, kb.max_bytes)
    bar = ProgressBar(file.name, err)
    try:
        info = await kb.add_file(session, file.name, data, progress=bar)
    finally:
        bar.end()
    print(f"(added {describe(info)})", file=out)
    return info


async def chat_command(agent: AgentSpec, session: str | None, text: str, out: TextIO, err: TextIO) -> str | None:
    """Handle ``/upload``, ``/files`` and ``/clear``; returns the (possibly new) session id.

    Raises ``LookupError`` for a line that is not one of these commands.
    """
    kb: KnowledgeBase = agent.services[SERVICE]
    command, _, rest = text.partition(" ")
    if command == "/upload":
        if not rest.strip():
            print("usage: /upload PATH", file=err)
            return session
        session = session or await agent.store.create_session()
        try:
            await upload(kb, session, rest.strip(), out, err)
        except FileRejected as exc:
            print(f"not added: {exc}", file=err)
        return session
    if command == "/files":
        files = await kb.files(session) if session else []
        for info in files:
            print(f"  {describe(info)}", file=out)
        if not files:
            print("(no files: /upload PATH adds one)", file=out)
        return session
    if command == "/clear":
        cleared = await kb.clear(session) if session else []
        print(f"(forgot {len(cleared)} file{'s' if len(cleared) != 1 else ''})", file=out)
        return session
    raise LookupError(text)
