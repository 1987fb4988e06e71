"""Cancellation that stops the spending: the provider's connection is closed, the local
model stops generating, the turn is recorded as cancelled and the session goes on."""

from __future__ import annotations

import asyncio
import contextlib
import time

from fixtures.slow_stream import SlowStream
from reactchat.messages import Request, UserMessage
from reactchat.models.local import LocalModel
from reactchat.models.openai import OpenAIModel


async def test_a_cancelled_call_closes_the_provider_connection() -> None:
    with SlowStream() as server:
        for stream in (True, False):
            model = OpenAIModel("slow-model", api_key="sk-test", base_url=f"{server.url}/v1", stream=stream)
            call = asyncio.create_task(model.complete(Request(messages=[UserMessage(content="Tell me about roses.")])))
            assert await asyncio.to_thread(server.wait_streaming)
            await asyncio.sleep(0.1)
            call.cancel()
            cancelled_at = time.monotonic()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            count = len(server.started)
            assert await asyncio.to_thread(server.wait_closed, count, 5.0), f"stream={stream}: still connected"
            assert server.closed[-1] - cancelled_at < 1.0
            server._first.clear()


async def test_a_cancelled_local_call_stops_generating_and_frees_the_model() -> None:
    model = LocalModel(n_threads=1, max_tokens=3000, grammar=False, n_ctx=4096)
    long = Request(messages=[UserMessage(content="Write a very long story about a rose seller in Paris.")])
    await asyncio.to_thread(model.load)
    call = asyncio.create_task(model.complete(long))
    await asyncio.sleep(1.0)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    deadline = time.monotonic() + 10
    while not model.calls and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    stats = model.last_stats
    assert stats is not None and stats.stop_reason == "cancelled"
    assert stats.output_tokens < 3000  # stopped at the next token, not at max_tokens
    # the model is free: the next call runs to its end
    short = Request(messages=[UserMessage(content="Say hello.")], max_tokens=8)
    reply = await asyncio.wait_for(model.complete(short), 60)
    assert reply.usage is not None and 0 < reply.usage.output_tokens <= 8
