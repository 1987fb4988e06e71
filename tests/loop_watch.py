"""How long the event loop went without running a task: the test of "nothing stalls the loop"."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator


@contextlib.asynccontextmanager
async def loop_gaps(every: float = 0.005) -> AsyncIterator[list[float]]:
    """Yields a list that fills with the gaps between ticks meant to be ``every`` seconds apart."""
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(every)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        yield gaps
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
