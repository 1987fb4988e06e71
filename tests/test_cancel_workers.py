"""Cancel from any worker: two uvicorn processes on one store (SQLite file, PostgreSQL); a
turn streams from a slow provider in one, the cancel request goes to the other, and the
worker running the turn stops it: the provider sees its connection closed, the turn is
recorded as cancelled, and the client following the turn gets its ``end`` frame."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fixtures.slow_stream import SlowStream
from server_support import parse_sse, start_worker, stop_workers

Workers = tuple[SlowStream, str, str]


@pytest.fixture
def workers(durable_url: str, tmp_path: Path) -> Iterator[Workers]:
    with SlowStream() as provider:
        started = [
            start_worker(
                durable_url,
                tmp_path / f"{name}.log",
                "server_support:slow_app_from_env",
                REACTCHAT_SLOW_URL=provider.url,
            )
            for name in ("a", "b")
        ]
        try:
            yield provider, started[0][1], started[1][1]
        finally:
            stop_workers(started)


def test_a_turn_running_on_one_worker_is_cancelled_from_the_other(workers: Workers) -> None:
    provider, a, b = workers
    session = httpx.post(f"{a}/v1/sessions").json()["session"]
    for worker in (a, b):  # no turn runs anywhere yet
        idle = httpx.post(f"{worker}/v1/sessions/{session}/cancel")
        assert idle.status_code == 409 and idle.json()["error"]["type"] == "not_running"
    frames: list[tuple[str, dict[str, Any]]] = []

    def follow() -> None:
        with httpx.stream("POST", f"{a}/v1/sessions/{session}/messages", json={"message": "roses?"}, timeout=30) as r:
            frames.extend(parse_sse(r.read().decode()))

    reader = threading.Thread(target=follow)
    reader.start()
    assert provider.wait_streaming(), "the provider never streamed"
    asked = time.monotonic()
    stopped = httpx.post(f"{b}/v1/sessions/{session}/cancel", timeout=30)
    assert stopped.status_code == 200, stopped.text
    assert stopped.json() == {"session": session, "status": "cancelled"}
    assert provider.wait_closed(1, 5.0), "the provider still streams"
    assert provider.closed[0] - asked < 5.0
    reader.join(10)
    assert frames[-1][0] == "end" and frames[-1][1]["status"] == "cancelled"

    for worker in (a, b):
        view = httpx.get(f"{worker}/v1/sessions/{session}").json()
        assert view["status"] == "cancelled" and view["turns"][0]["status"] == "cancelled"
        assert [e["type"] for e in view["turns"][0]["events"]] == ["user", "answer"]
    again = httpx.post(f"{b}/v1/sessions/{session}/cancel")
    assert again.status_code == 409 and again.json()["error"]["type"] == "not_running"
