"""``ToolThreads``: the worker threads that run sync tools, bounded and owned by an agent.

A sync tool with a timeout runs on one of these threads so that a hang cannot block the
event loop. A thread cannot be killed, so a call that outlives its timeout is abandoned
(its thread stays busy until the call returns); at most ``size`` threads ever exist per
pool, so hung calls cannot make the process grow without bound, and a call that waited
for a free thread past its own timeout is skipped, never run late. Not the event loop's
default executor: ``asyncio.run`` joins that one on exit, so a hung tool would hang the
caller after its timeout; these daemon threads are abandoned instead.

A call goes straight to an idle thread: no shared queue, and the thread has put itself
back among the idle ones before it says the call returned, so it goes to sleep right after
waking the caller.

An idle thread sleeps in a read of its own eventfd (a pipe where there is none), not on a
lock: writing to it releases the GIL while the kernel wakes the thread, so the thread finds
the GIL free and runs the call at once. Releasing a lock keeps the GIL, so the woken thread
went back to sleep to wait for it, and the caller was then woken again the same way: about
5 context switches and 8 futex calls per call against 2 and 3 (hand-off alone, on 2 cores:
18 µs of CPU against 6). A pool's idle threads end, and close their descriptors, when the
pool is garbage-collected; a busy one ends when its call returns. A forked child's pools
start over with no thread (``os.register_at_fork``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

#: threads per pool unless the agent says otherwise
DEFAULT_TOOL_THREADS = 32


class ThreadCall:
    """One sync tool call on a pool thread, awaited by the task that made it."""

    __slots__ = ("error", "fn", "future", "guard", "loop", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn: Callable[[], Any] | None = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.guard = threading.Lock()  # orders "returned" against "someone awaits it"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future[Any] | None = None

    def outcome(self) -> Any:
        """The call's return value, or its exception raised."""
        if self.error is not None:
            raise self.error
        return self.value

    async def settled(self, timeout: float, expired: Callable[[], BaseException]) -> Any:
        """Await the call; ``expired()`` is raised after ``timeout`` seconds (made only then)."""
        with self.guard:
            if self.fn is None:  # it returned meanwhile (the common case: no future is made)
                return self.outcome()
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Any] = loop.create_future()
            self.loop, self.future = loop, future
        timer = loop.call_later(timeout, expire, future, expired)
        try:
            return await future
        finally:
            timer.cancel()

    def abandoned(self) -> bool:
        """Whoever awaited the call has stopped waiting (it timed out or was cancelled)."""
        with self.guard:
            return self.future is not None and self.future.done()

    def run(self) -> None:
        """On the worker: make the call (``returned`` tells whoever waits)."""
        fn = self.fn
        assert fn is not None
        try:
            self.value = fn()
        except BaseException as exc:  # handed to the waiting task, which reports it
            self.error = exc

    def returned(self) -> None:
        """On the worker, after ``run``: wake whoever waits for the call."""
        with self.guard:
            self.fn = None
            loop, future = self.loop, self.future
        if loop is not None and future is not None:
            with contextlib.suppress(RuntimeError):  # the loop may be closed if the call was abandoned
                loop.call_soon_threadsafe(settle, future, self.value, self.error)


class ToolThreads:
    """At most ``size`` daemon threads running sync tool calls, made as calls need them."""

    def __init__(self, size: int = DEFAULT_TOOL_THREADS) -> None:
        if size < 1:
            raise ValueError(f"a tool thread pool needs at least one thread, not {size}")
        self.size = size
        self._lock = threading.Lock()
        self._threads = 0  # started
        self._idle: list[_Worker] = []  # each waits on its own lock for its next call
        self._backlog: deque[ThreadCall] = deque()  # calls waiting for a thread (all are busy)
        weakref.finalize(self, _dismiss, self._idle)
        _pools.add(self)

    @property
    def threads(self) -> int:
        """How many threads this pool has started (never more than ``size``)."""
        return self._threads

    def start(self, fn: Callable[[], Any]) -> ThreadCall:
        """Run ``fn`` on a pool thread (as soon as one is free)."""
        call = ThreadCall(fn)
        with self._lock:
            new = not self._idle
            if not new:
                worker = self._idle.pop()
            elif self._threads < self.size:
                self._threads += 1
                worker = _Worker(self)
            else:
                self._backlog.append(call)
                return call
        worker.call = call
        _signal(worker.wake)
        if new:
            threading.Thread(target=worker.work, name="reactchat-tool", daemon=True).start()
        return call

    def _next(self, worker: _Worker) -> ThreadCall | None:
        """The call waiting for a thread, if any; else ``worker`` becomes idle."""
        with self._lock:
            if self._backlog:
                return self._backlog.popleft()
            worker.call = None
            self._idle.append(worker)
            return None


class _Worker:
    """One pool thread: it runs the call it is handed, then the backlog's, then waits."""

    __slots__ = ("call", "pool", "wake")

    def __init__(self, pool: ToolThreads) -> None:
        self.pool = weakref.ref(pool)  # an abandoned pool is collected, and its idle threads end
        self.call: ThreadCall | None = None
        #: written by ``ToolThreads.start`` with a call in ``call`` (by ``_dismiss`` with none)
        self.wake = _channel()

    def work(self) -> None:
        try:
            while self.serve():
                pass
        finally:
            for fd in set(self.wake):
                os.close(fd)

    def serve(self) -> bool:
        """Wait for a call and run it, then the backlog's; False when the pool is gone."""
        _receive(self.wake)
        call = self.call
        if call is None:  # woken by ``_dismiss``
            return False
        while call is not None:
            if not call.abandoned():  # else it timed out while it waited for a thread: too late to run
                call.run()
            pool = self.pool()
            after = pool._next(self) if pool is not None else None  # idle again before the waiter wakes
            call.returned()
            if pool is None:
                return False
            call, pool = after, None  # not kept alive by an idle thread
        return True


def _dismiss(idle: list[_Worker]) -> None:
    """When a pool is collected: wake its idle threads with no call, so that they end (no
    lock: nothing else holds the pool, so no thread of it becomes idle meanwhile)."""
    while idle:
        worker = idle.pop()
        worker.call = None
        _signal(worker.wake)


#: every pool of the process, for ``_forget_threads``
_pools: weakref.WeakSet[ToolThreads] = weakref.WeakSet()


def _forget_threads() -> None:
    """In a forked child: the pools' threads stayed in the parent, so each pool starts with
    none. Their descriptors are the parent threads' too: a call written to one here would
    wake a parent thread with no call, which would end."""
    for pool in _pools:
        for worker in pool._idle:
            for fd in set(worker.wake):
                os.close(fd)
        pool._lock = threading.Lock()
        pool._idle.clear()
        pool._backlog.clear()
        pool._threads = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads)


if hasattr(os, "eventfd"):

    def _channel() -> tuple[int, int]:
        fd = os.eventfd(0)
        return fd, fd

    def _signal(channel: tuple[int, int]) -> None:
        os.eventfd_write(channel[1], 1)

    def _receive(channel: tuple[int, int]) -> None:
        os.eventfd_read(channel[0])

else:  # pragma: no cover (not Linux)

    def _channel() -> tuple[int, int]:
        return os.pipe()

    def _signal(channel: tuple[int, int]) -> None:
        os.write(channel[1], b"\0")

    def _receive(channel: tuple[int, int]) -> None:
        os.read(channel[0], 1)


def settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """Give ``future`` its value or error unless it already has one (a timeout came first)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def expire(future: asyncio.Future[Any], expired: Callable[[], BaseException]) -> None:
    """Give ``future`` the error ``expired()`` unless the call returned first."""
    if not future.done():
        future.set_exception(expired())


_shared: ToolThreads | None = None


def shared_threads() -> ToolThreads:
    """The pool for tools called outside an agent (``await tool.run(...)``)."""
    global _shared
    if _shared is None:
        _shared = ToolThreads()
    return _shared


__all__ = ["DEFAULT_TOOL_THREADS", "ThreadCall", "ToolThreads", "settle", "shared_threads"]
