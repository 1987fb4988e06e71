"""One run in a bubblewrap sandbox (``_sandbox``): start it, give it the code, read what
it printed and the files it left, and make sure nothing of it is left running.

A sandbox is started before its code is known (the code comes on its stdin), so one
waits, started, for the next call of the same limits that has no uploads: a call then
costs about what the code costs, not the sandbox's start-up. Each sandbox still runs one
call only. The processes are ``subprocess.Popen``, watched through the running event
loop (pipes and a pidfd), so a waiting sandbox does not belong to any one loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO

from reactchat.toolbox._sandbox import ENV, PidsCgroup, SandboxLimits, bwrap, command, memfd, pids_cgroup


@dataclass
class Stream:
    """The beginning of what the code wrote to stdout or stderr, and how much there was."""

    kept: bytes = b""
    total: int = 0

    @property
    def text(self) -> str:
        """What was kept, decoded (a character cut in two becomes a replacement mark)."""
        return self.kept.decode("utf-8", errors="replace")

    @property
    def cut(self) -> int:
        """Bytes written and not kept."""
        return self.total - len(self.kept)


@dataclass
class SandboxRun:
    """The result of one run: its output, its error, the files it left in /out."""

    stdout: Stream
    stderr: Stream
    #: the exception's last lines, or why the run was stopped
    error: str | None
    #: name → bytes of the files kept from /out
    files: dict[str, bytes] = field(default_factory=dict)
    #: entries of /out that were not kept, and why
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class _Started:
    """A sandbox waiting for its code: bwrap, the read end of the runner's report, its cgroup."""

    process: subprocess.Popen[bytes]
    report: IO[bytes]
    cgroup: PidsCgroup | None
    #: the process that started it (a forked child inherits ``_waiting`` but must leave it be)
    owner: int = field(default_factory=os.getpid)

    def end(self) -> None:
        """Kill whatever is left of it and free what it holds."""
        # bwrap leads its own session; its init dies with it, and with the init the PID namespace
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr, self.report):
            if pipe is not None:
                pipe.close()
        if self.cgroup is not None:
            self.cgroup.remove()


#: one sandbox started ahead per set of limits, for the next call without uploads
_waiting: dict[SandboxLimits, _Started] = {}


def _start(limits: SandboxLimits, data: Mapping[str, bytes]) -> _Started:
    program = bwrap()
    cgroup = pids_cgroup(limits)
    data_fds: dict[str, int] = {}
    report_read, report_write = os.pipe()
    try:
        data_fds = {name: memfd(name, blob) for name, blob in data.items()}
        args = command(program, limits, report_write, data_fds)
        process = subprocess.Popen(
            cgroup.wrap(args) if cgroup is not None else args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=[report_write, *data_fds.values()],
            env=ENV,
            start_new_session=True,
        )
    except BaseException:
        os.close(report_read)
        if cgroup is not None:
            cgroup.remove()
        raise
    finally:
        for fd in (report_write, *data_fds.values()):
            os.close(fd)
    return _Started(process, open(report_read, "rb", buffering=0), cgroup)


def _started(limits: SandboxLimits, data: Mapping[str, bytes]) -> _Started:
    """The waiting sandbox of these limits if there is one alive and no data, else a new one."""
    bwrap()  # a ConfigError when it is gone, even with a sandbox waiting
    waiting = None if data else _waiting.pop(limits, None)
    if waiting is not None and waiting.process.poll() is None:
        return waiting
    if waiting is not None:
        waiting.end()
    return _start(limits, data)


def _start_next(limits: SandboxLimits) -> None:
    if limits in _waiting:
        return
    try:
        started = _start(limits, {})
    except Exception:  # the next call starts its own, and reports why
        return
    if _waiting.setdefault(limits, started) is not started:  # another thread's came first
        started.end()


@atexit.register
def _end_waiting() -> None:
    while _waiting:
        started = _waiting.popitem()[1]
        if started.owner == os.getpid():
            started.end()


async def run_sandboxed(
    code: str, data: Mapping[str, bytes] | None = None, limits: SandboxLimits | None = None, *, start_next: bool = True
) -> SandboxRun:
    """Run ``code`` in a fresh sandbox with ``data`` (name → bytes) under ``/data``.

    ``start_next``: after a run without data, start the sandbox of the next one now.
    """
    limits = limits or SandboxLimits()
    data = data or {}
    started = await asyncio.to_thread(_started, limits, data)
    began = time.monotonic()
    try:
        run = await _collect(started, code.encode("utf-8", errors="surrogateescape"), limits)
    finally:
        await asyncio.to_thread(started.end)
    run.seconds = time.monotonic() - began
    if start_next and not data:
        asyncio.get_running_loop().call_soon(_start_next, limits)
    return run


async def _collect(started: _Started, code: bytes, limits: SandboxLimits) -> SandboxRun:
    process = started.process
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    loop = asyncio.get_running_loop()
    sender, _ = await loop.connect_write_pipe(asyncio.Protocol, process.stdin)
    sender.write(code)
    sender.close()  # after what is buffered is written: the runner reads to the end, then runs
    readers = asyncio.gather(
        _drain(process.stdout, limits.output),
        _drain(process.stderr, limits.output),
        _drain(started.report, _report_cap(limits) + 1),
    )
    stopped = None
    try:
        if not await _exited(process.pid, limits.wall_seconds):
            stopped = f"stopped: still running after {limits.wall_seconds:g} s (the wall-time limit)"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr, report = await readers
    finally:
        readers.cancel()  # when the call itself was cancelled: the sandbox is killed after this
    # ended (its pidfd said so): reaped at once, without a hop to a thread; killed just now: it may take a moment
    status = process.wait() if stopped is None else await asyncio.to_thread(process.wait)
    run = SandboxRun(stdout, stderr, stopped)
    if stopped is None:
        whole = report.kept if report.total <= _report_cap(limits) else None
        _read_outcome(run, status, whole, limits)
    return run


def _report_cap(limits: SandboxLimits) -> int:
    """The largest report a runner can write: its files, and room for names and skipped entries."""
    return limits.out_bytes + (1 << 20)


async def _exited(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` (a child) ended within ``timeout`` seconds; it is not reaped."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    pidfd = os.pidfd_open(pid)

    def readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await asyncio.wait_for(ended, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


async def _drain(pipe: IO[bytes], keep: int) -> Stream:
    """Read ``pipe`` to its end, keeping its first ``keep`` bytes and counting the rest."""
    reader = asyncio.StreamReader(limit=1 << 16)
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    out = Stream()
    chunks: list[bytes] = []
    try:
        while chunk := await reader.read(1 << 16):
            if out.total < keep:
                chunks.append(chunk[: keep - out.total])
            out.total += len(chunk)
    finally:
        transport.close()
    out.kept = b"".join(chunks)
    return out


def _items(report: bytes) -> list[bytes] | None:
    """The runner's report as its items (``LENGTH:BYTES`` each), or None when it is not one."""
    items, at = [], 0
    while at < len(report):
        colon = report.find(b":", at, at + 21)
        if colon < 0 or not report[at:colon].isdigit():
            return None
        end = colon + 1 + int(report[at:colon])
        if end > len(report):
            return None
        items.append(report[colon + 1 : end])
        at = end
    return items if len(items) >= 3 and items[1].isdigit() and items[2].isdigit() else None


def _read_outcome(run: SandboxRun, status: int, report: bytes | None, limits: SandboxLimits) -> None:
    """Fill in the error and the files from the exit status and the runner's report."""
    items = _items(report) if report is not None else None
    if items is None:
        run.error = _death(status, limits)
        return
    error, more, count = items[0].decode("utf-8", "replace"), int(items[1]), int(items[2])
    run.error = error or None
    run.skipped = [os.fsdecode(name) for name in items[3 : 3 + count]][:20]
    pairs = items[3 + count :]
    total = 0
    for name, blob in zip(pairs[0::2], pairs[1::2], strict=False):
        total += len(blob)
        if len(run.files) < limits.out_files and total <= limits.out_bytes:
            run.files[os.fsdecode(name)] = blob
        else:
            more += 1
    if more:
        run.skipped.append(f"{more} more files (over the limit of {limits.out_files} files, {_mb(limits.out_bytes)})")


def _death(status: int, limits: SandboxLimits) -> str:
    """Why a run that left no report ended, from bwrap's exit status (128 + signal when killed)."""
    signum = status - 128 if status > 128 else -status if status < 0 else 0
    if signum in (signal.SIGXCPU, signal.SIGKILL):
        return f"stopped: used more than {limits.cpu_seconds} s of CPU time (the CPU limit), or was killed"
    if signum:
        return f"stopped by signal {signal.Signals(signum).name}"
    if status:
        return f"ended with exit status {status} before it finished (os._exit, or out of memory)"
    return "ended without reporting its files (it closed or replaced the runner's report)"


def _mb(size: int) -> str:
    return f"{size / 2**20:.3g} MB"
