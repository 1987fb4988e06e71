"""Group commit: calls that arrive while one is in flight go out together in the next.

A store that sends every ``append`` on its own pays one round trip and one WAL flush
per event; with a hundred sessions writing at once, most of that time is spent
waiting in line. ``Batcher`` gathers what arrives while a batch is in flight and sends
it as the next batch, so the cost is paid once per batch. A lone caller does not wait:
with nothing in flight its item goes out at once, alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: ``run(items)`` returns one outcome per item, in order: a result or the exception for it
Run = Callable[[list[T]], Awaitable[list[R | BaseException]]]


class Batcher(Generic[T, R]):
    """Runs ``run(items)`` on batches of submitted items, ``concurrency`` batches at a time."""

    def __init__(self, run: Run[T, R], concurrency: int = 1) -> None:
        self._run = run
        self._concurrency = concurrency
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._drains: set[asyncio.Task[None]] = set()
        self._active = 0

    async def submit(self, item: T) -> R:
        """Queue ``item`` for the next batch and wait for its outcome."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._active < self._concurrency:
            self._active += 1
            task = asyncio.create_task(self._drain())
            self._drains.add(task)
            task.add_done_callback(self._drains.discard)
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    outcomes = await self._run([item for item, _ in batch])
                except BaseException as exc:  # every caller of the batch gets the failure
                    failed: list[R | BaseException] = [exc] * len(batch)
                    _settle(batch, failed)
                    if isinstance(exc, asyncio.CancelledError):
                        raise
                    continue
                _settle(batch, outcomes)
        finally:
            # counted down here, not in a done callback: an item queued after the loop
            # above saw an empty queue must find a free drain slot
            self._active -= 1

    async def wait_idle(self) -> None:
        """Wait until every queued batch has been sent."""
        while self._drains:
            await asyncio.gather(*self._drains, return_exceptions=True)


def _settle(batch: list[tuple[T, asyncio.Future[R]]], outcomes: list[R | BaseException]) -> None:
    for (_, future), outcome in zip(batch, outcomes, strict=True):
        if future.done():  # its caller was cancelled: nobody waits for it
            continue
        if isinstance(outcome, asyncio.CancelledError):
            future.cancel()
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
