"""A running turn's feed: batches as they come, a keepalive only while it is silent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from reactchat.messages import ThoughtEvent
from reactchat.server._turns import Clock, Delta, Last, TurnFeed, TurnStream


def thought(text: str) -> ThoughtEvent:
    return ThoughtEvent(session="s", turn=1, step=1, text=text)


async def test_a_silent_turn_gets_keepalives_and_a_busy_one_none() -> None:
    feed = TurnFeed("s")
    got: list[tuple[float, list[object]]] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def read() -> None:
        async for batch in feed.batches(keepalive=0.3):
            got.append((loop.time() - start, batch))

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.7)  # silent: a keepalive within each 0.3 s or so
    keepalives = [at for at, batch in got if batch == [None]]
    assert 1 <= len(keepalives) <= 3 and keepalives[0] <= 0.5, got

    got.clear()
    for i in range(8):  # an event every 0.03 s: never silent long enough for a keepalive
        feed.put(thought(f"t{i}"))
        await asyncio.sleep(0.03)
    feed.delta("partial ")
    feed.delta("text")
    await asyncio.sleep(0)
    feed.close()
    await asyncio.wait_for(reader, 1)
    items = [item for _, batch in got for item in batch]
    assert None not in items
    assert [i.text for i in items if isinstance(i, ThoughtEvent)] == [f"t{i}" for i in range(8)]
    assert [i.text for i in items if isinstance(i, Delta)] == ["partial text"]


async def test_a_reader_that_stops_early_leaves_no_timer_behind() -> None:
    feed = TurnFeed("s")
    feed.put(thought("only"))
    batches = feed.batches(keepalive=0.05)
    assert [e.text for e in await anext(batches) if isinstance(e, ThoughtEvent)] == ["only"]
    await batches.aclose()
    assert not Clock.running, "the clock stops with its last feed"
    await asyncio.sleep(0.15)
    assert feed._items == [], "no keepalive is queued once the reader is gone"


async def test_a_turn_stream_ends_its_body_at_the_last_chunk_and_runs_its_frames_to_their_end() -> None:
    # a generator left suspended after its last chunk would be closed by a task of the loop's
    finished: list[bool] = []
    sent: list[dict[str, object]] = []

    async def frames() -> AsyncIterator[str]:
        yield "event: user\n\n"
        yield Last("event: end\n\n")
        finished.append(True)

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        raise AssertionError("the stream does not read the request")

    await TurnStream(frames())({"type": "http"}, receive, send)
    assert finished == [True]
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent] == [
        ("http.response.start", None, None),
        ("http.response.body", b"event: user\n\n", True),
        ("http.response.body", b"event: end\n\n", False),
    ]
