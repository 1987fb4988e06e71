"""``ToolThreads``: the worker threads that run sync tools, bounded and owned by an agent.

A sync tool with a timeout runs on one of these threads so that a hang cannot block the
event loop. A thread cannot be killed, so a call that outlives its timeout is abandoned
(its thread stays busy until the call returns); at most ``size`` threads ever exist per
pool, so hung calls cannot make the process grow without bound, and a call that waited
for a free thread past its own timeout is skipped, never run late. Not the event loop's
default executor: ``asyncio.run`` joins that one on exit, so a hung tool would hang the
caller after its timeout; these daemon threads are abandoned instead.

A quick call is waited for without going back to the event loop (``ThreadCall.wait``):
that costs two thread switches where awaiting costs four and a wake-up of the loop. A
call goes straight to an idle thread (each waits on its own lock): no shared queue, and
the thread has put itself back among the idle ones before it says the call returned, so
it goes to sleep right after waking the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

#: threads per pool unless the agent says otherwise
DEFAULT_TOOL_THREADS = 32


class ThreadCall:
    """One sync tool call on a pool thread: wait for it briefly, or await it."""

    __slots__ = ("done", "error", "fn", "future", "guard", "loop", "seconds", "started", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn: Callable[[], Any] | None = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.done = threading.Lock()
        self.done.acquire()  # released by the worker once the call has returned
        self.guard = threading.Lock()  # orders "returned" against "someone awaits it"
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future[Any] | None = None
        self.started = time.perf_counter()
        self.seconds = float("inf")

    def wait(self, seconds: float) -> bool:
        """Block this thread up to ``seconds`` for the call to return."""
        return self.done.acquire(timeout=seconds)

    def outcome(self) -> Any:
        """The call's return value, or its exception raised."""
        if self.error is not None:
            raise self.error
        return self.value

    async def settled(self, timeout: float, expired: BaseException) -> Any:
        """Await the call; ``expired`` is raised after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self.guard:
            if self.fn is None:  # it returned meanwhile
                return self.outcome()
            self.loop, self.future = loop, future
        timer = loop.call_later(timeout, settle, future, None, expired)
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
        self.seconds = time.perf_counter() - self.started

    def returned(self) -> None:
        """On the worker, after ``run``: wake whoever waits for the call."""
        with self.guard:
            self.fn = None
            loop, future = self.loop, self.future
        self.done.release()
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
        worker.go.release()
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

    __slots__ = ("call", "go", "pool")

    def __init__(self, pool: ToolThreads) -> None:
        self.pool = pool
        self.call: ThreadCall | None = None
        self.go = threading.Lock()
        self.go.acquire()  # released by ``ToolThreads.start`` with a call in ``call``

    def work(self) -> None:
        while True:
            self.go.acquire()
            call = self.call
            while call is not None:
                if not call.abandoned():  # else it timed out while it waited for a thread: too late to run
                    call.run()
                after = self.pool._next(self)  # idle again (or on to the backlog) before the waiter wakes
                call.returned()
                call = after


def settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    """Give ``future`` its value or error unless it already has one (a timeout came first)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


_shared: ToolThreads | None = None


def shared_threads() -> ToolThreads:
    """The pool for tools called outside an agent (``await tool.run(...)``)."""
    global _shared
    if _shared is None:
        _shared = ToolThreads()
    return _shared


__all__ = ["DEFAULT_TOOL_THREADS", "ThreadCall", "ToolThreads", "settle", "shared_threads"]
