"""Reading files in parser processes, so that no file can block or bloat the process that asked.

A small pool of worker processes (``python -m reactchat.knowledge._worker``, started
when the first file arrives and reused) reads and chunks files, and extracts the main
text of the web pages ``fetch_url`` reads (``extract``). Each job runs under
``setrlimit`` limits set by the worker itself: CPU seconds (the kernel ends a worker
that goes over, even inside C code) and address space (an allocation over it fails).
The parent also gives each job a wall-clock deadline and kills a worker that misses
it. A worker that dies, or grew large, is replaced; the job gets ``FileRejected``.

The pool has its own threads, one per worker, so waiting for a parser never holds a
thread of the event loop's default executor (which the stores and tools share).
``REACTCHAT_PARSERS`` sets the number of workers (default 2).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from reactchat.knowledge._blocks import FileRejected, Limits, Report
from reactchat.knowledge._chunk import Chunk

#: a worker whose resident size after a job is above this is replaced (memory is not given back)
RECYCLE_RSS = 160 << 20
#: beyond the CPU limit, how long (wall clock) a job may take before its worker is killed
GRACE = 10.0


@dataclass
class Parsed:
    """A file read and chunked: its kind, PDF page count and chunks; ``peak_rss`` of the parser, in bytes."""

    kind: str
    pages: int | None
    chunks: list[Chunk]
    peak_rss: int = 0


@dataclass
class Extracted:
    """A web page's title and main text (Markdown)."""

    title: str
    text: str


# ------------------------------------------------------------------ frames on pipes


def write_frame(out: IO[bytes], payload: bytes) -> None:
    """One length-prefixed frame."""
    out.write(len(payload).to_bytes(8, "big"))
    out.write(payload)
    out.flush()


def read_frame(source: IO[bytes]) -> bytes | None:
    """One frame, or None at the end of the stream."""
    head = source.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "big")
    payload = source.read(size)
    return payload if len(payload) == size else None


class _Died(Exception):
    """The worker ended (or was killed) before it answered."""


class _Worker:
    """One parser process and the pipes to it."""

    def __init__(self) -> None:
        env = dict(os.environ)
        # the worker imports reactchat from where this process did, whatever its sys.path
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reactchat.knowledge._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.fd = self.process.stdout.fileno()
        self.buffer = b""
        _LIVE.add(self)

    def send(self, header: dict[str, Any], data: bytes) -> None:
        try:
            write_frame(self.stdin, json.dumps(header).encode())
            write_frame(self.stdin, data)
        except (BrokenPipeError, OSError):
            raise _Died from None

    def receive(self, deadline: float) -> dict[str, Any]:
        """The next message from the worker; ``TimeoutError`` after ``deadline`` (monotonic)."""
        head = self._read(8, deadline)
        message: dict[str, Any] = json.loads(self._read(int.from_bytes(head, "big"), deadline))
        return message

    def _read(self, size: int, deadline: float) -> bytes:
        while len(self.buffer) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                piece = os.read(self.fd, max(size - len(self.buffer), 1 << 16))
                if not piece:
                    raise _Died
                self.buffer += piece
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def stop(self) -> int | None:
        """End the process (if it still runs); its exit status."""
        _LIVE.discard(self)
        if self.process.poll() is None:
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        return self.process.wait()


_LIVE: set[_Worker] = set()


@atexit.register
def _stop_all() -> None:
    for worker in list(_LIVE):
        worker.stop()


class ParserPool:
    """``size`` parser processes, each served by its own thread; jobs wait in a queue."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.jobs: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[_Worker | None], Any]]]
        self.jobs = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=self._serve, name=f"reactchat-parser-{n}", daemon=True) for n in range(size)
        ]
        for thread in self.threads:
            thread.start()

    def _serve(self) -> None:
        worker: _Worker | None = None
        while True:
            future, job = self.jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                worker, result = job(worker)
                future.set_result(result)
            except BaseException as exc:
                future.set_exception(exc)

    async def read(
        self, data: bytes, name: str, limits: Limits, size: int, overlap: int, report: Report | None = None
    ) -> Parsed:
        """Read and chunk a file in a parser process; ``FileRejected`` for a bad file or one over ``limits``."""
        header = {"name": name, "limits": asdict(limits), "size": size, "overlap": overlap}
        parsed: Parsed = await self._submit(header, data, limits, name, report)
        return parsed

    async def extract(self, html: bytes, url: str, limits: Limits) -> Extracted:
        """The title and main text of a web page, extracted in a parser process under ``limits``
        (CPU time, memory); ``FileRejected`` for a page with no text or one over them."""
        header = {"name": url, "limits": asdict(limits), "extract": url}
        extracted: Extracted = await self._submit(header, html, limits, url, None)
        return extracted

    async def _submit(
        self, header: dict[str, Any], data: bytes, limits: Limits, name: str, report: Report | None
    ) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.put((future, lambda worker: _run(worker, header, data, limits, name, report)))
        return await asyncio.wrap_future(future)


def _run(
    worker: _Worker | None, header: dict[str, Any], data: bytes, limits: Limits, name: str, report: Report | None
) -> tuple[_Worker | None, Parsed | Extracted]:
    """One job on ``worker`` (started if None); returns the worker to keep (None if it was stopped)."""
    if worker is None or worker.process.poll() is not None:
        worker = _Worker()
    deadline = time.monotonic() + limits.seconds + GRACE
    chunks: list[Chunk] = []
    try:
        worker.send(header, data)
        while True:
            message = worker.receive(deadline)
            if "progress" in message:
                if report is not None:
                    report(*message["progress"])
            elif "chunks" in message:
                chunks += [Chunk(text, page, heading, span) for text, page, heading, span in message["chunks"]]
            else:
                break
    except TimeoutError:
        worker.stop()
        raise _too_long(name, limits) from None
    except _Died:
        status = worker.stop()
        if status == -signal.SIGXCPU:
            raise _too_long(name, limits) from None
        raise FileRejected(
            f"{name}: reading it took more than the parser's {limits.memory >> 20} MB of memory "
            "(or crashed the parser); split the file or upload the part you need",
            "too_large",
        ) from None
    keep = worker if message.get("rss", 0) <= RECYCLE_RSS else None
    if keep is None:
        worker.stop()
    if "rejected" in message:
        raise FileRejected(message["rejected"], message.get("reason", "unreadable"))
    if "extracted" in message:
        return keep, Extracted(message["title"], message["extracted"])
    return keep, Parsed(message["kind"], message["pages"], chunks, message.get("peak_rss", 0))


def _too_long(name: str, limits: Limits) -> FileRejected:
    return FileRejected(
        f"{name}: reading it took more than {limits.seconds:g} s; split the file or upload the part you need",
        "too_large",
    )


_POOL: ParserPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> ParserPool:
    """The process's parser pool, started on first use."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ParserPool(max(1, int(os.environ.get("REACTCHAT_PARSERS", "2"))))
        return _POOL
