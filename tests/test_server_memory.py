"""What a streamed turn holds while it waits on its model: not the frames it already sent."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any

from reactchat.messages import ThoughtEvent
from reactchat.server._turns import SSE_HEADERS, TurnFeed, TurnStream, sse


def held_text(*frames: Any) -> list[str]:
    """Every string (or list of strings) a suspended frame's locals hold."""
    found: list[str] = []
    for frame in frames:
        for value in frame.f_locals.values():
            if isinstance(value, str):
                found.append(value)
            elif isinstance(value, list):
                found += [v for v in value if isinstance(v, str)]
    return found


async def test_a_waiting_stream_holds_none_of_the_frames_it_sent() -> None:
    feed = TurnFeed("s")
    sent: list[bytes] = []
    sent_one = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            sent.append(message["body"])
            sent_one.set()

    async def receive() -> dict[str, Any]:
        raise AssertionError("the stream does not read the request")

    frames = sse(feed)
    stream = asyncio.create_task(TurnStream(frames)({"type": "http"}, receive, send))
    feed.put(ThoughtEvent(session="s", turn=1, step=1, text="a thought to be sent once"))
    await sent_one.wait()
    await asyncio.sleep(0.01)  # both wait for the next batch now: the turn waits on its model
    gc.collect()
    assert b"a thought to be sent once" in sent[0]
    waiting = [stream.get_coro().cr_frame, frames.ag_frame]  # type: ignore[attr-defined]
    assert all(f is not None for f in waiting)
    assert not [text for text in held_text(*waiting) if "a thought to be sent once" in text]
    feed.close()
    await stream
    assert sent[-1].startswith(b"event: end")


async def nothing() -> AsyncIterator[str]:
    return
    yield ""


def test_streams_share_their_encoded_headers_and_each_may_change_its_own() -> None:
    first, second = TurnStream(nothing()), TurnStream(nothing())
    assert first.raw_headers == second.raw_headers and first.raw_headers is not second.raw_headers
    assert all(a is b for a, b in zip(first.raw_headers, second.raw_headers, strict=True))
    assert dict(first.headers) == {
        **{k.lower(): v for k, v in SSE_HEADERS.items()},
        "content-type": "text/event-stream; charset=utf-8",
    }
    first.headers["x-one"] = "1"
    assert "x-one" not in TurnStream(nothing()).headers and "x-one" not in second.headers
    named = TurnStream(nothing(), {"X-Request": "7"})
    assert named.headers["x-request"] == "7" and "x-request" not in TurnStream(nothing()).headers
