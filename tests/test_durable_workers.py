"""In doubt across server workers: two uvicorn processes on one store (a SQLite file,
PostgreSQL). A turn's unsafe call has had its effect on worker 1 when worker 1 is SIGKILLed;
worker 2 takes the turn over, and since nobody can know whether the call's effect happened,
the turn waits (``pending.kind == "in_doubt"``) instead of running it again. The user sees
that through worker 2's ``GET /v1/sessions/{id}`` and answers it through worker 2's
``POST /v1/sessions/{id}/messages``; the side-effect log proves what ran how often."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_support import parse_sse, start_worker, stop_workers

Workers = tuple[Any, str, str]


@pytest.fixture
def workers(durable_url: str, tmp_path: Path) -> Iterator[tuple[Any, str, str, Path]]:
    """Worker 1 holds its ``pay`` calls a minute after their effect; worker 2 does not."""
    effects = tmp_path / "effects"
    factory = "pay_app:app_from_env"
    started = [
        start_worker(durable_url, tmp_path / "a.log", factory, REACTCHAT_EFFECTS=str(effects), REACTCHAT_HOLD="60"),
        start_worker(durable_url, tmp_path / "b.log", factory, REACTCHAT_EFFECTS=str(effects)),
    ]
    try:
        yield started[0][0], started[0][1], started[1][1], effects
    finally:
        stop_workers(started)


def lines(effects: Path) -> list[list[str]]:
    """The side-effect log: one ``[call_id, name, pid]`` per call of ``pay`` that ran."""
    return [line.split() for line in effects.read_text().splitlines()] if effects.exists() else []


def kill_mid_effect(worker: Any, url: str, effects: Path) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """Start "pay bob" on worker 1 and SIGKILL it once the payment has happened (the tool
    is still running); the session and the frames its client had seen."""
    session = httpx.post(f"{url}/v1/sessions").json()["session"]
    seen: list[str] = []

    def follow() -> None:
        try:
            with httpx.stream("POST", f"{url}/v1/sessions/{session}/messages", json={"message": "pay bob"}) as r:
                for chunk in r.iter_text():
                    seen.append(chunk)
        except httpx.HTTPError:
            pass  # the worker died under the stream

    client = threading.Thread(target=follow)
    client.start()
    deadline = time.monotonic() + 30
    while not lines(effects):
        assert time.monotonic() < deadline, "the payment never started"
        time.sleep(0.02)
    worker.kill()  # SIGKILL: no shutdown, no last write
    worker.wait()
    client.join(10)
    return session, parse_sse("".join(seen))


def wait_for(url: str, session: str, status: str) -> dict[str, Any]:
    """The session as worker ``url`` shows it, once its status is ``status``."""
    deadline = time.monotonic() + 30
    while (view := httpx.get(f"{url}/v1/sessions/{session}").json())["status"] != status:
        assert view["status"] in ("running", "interrupted"), view
        assert time.monotonic() < deadline, f"the session stayed {view['status']}"
        time.sleep(0.1)
    return view


@pytest.mark.parametrize(("reply", "paid"), [("skip", 1), ("retry", 2)])
def test_an_unsafe_call_cut_off_with_its_worker_is_settled_on_the_other(
    workers: tuple[Any, str, str, Path], reply: str, paid: int
) -> None:
    first, a, b, effects = workers
    session, before = kill_mid_effect(first, a, effects)
    assert [kind for kind, _ in before][:3] == ["user", "thought", "action"]
    assert "end" not in [kind for kind, _ in before]  # the client never saw the turn end
    ((call_id, name, pid_a),) = lines(effects)
    assert name == "bob"

    # worker 2 took the turn over and asks instead of paying again
    view = wait_for(b, session, "waiting")
    pending = view["pending"]
    assert (pending["kind"], pending["tool"], pending["input"], pending["reply_to"]) == (
        "in_doubt",
        "pay",
        {"to": "bob"},
        call_id,
    )
    assert "interrupted" in pending["question"]
    assert len(lines(effects)) == 1

    body = {"message": reply, "reply_to": call_id}
    frames = parse_sse(httpx.post(f"{b}/v1/sessions/{session}/messages", json=body, timeout=30).text)
    end = frames[-1]
    assert end[0] == "end" and end[1]["status"] == "done", frames
    ran = lines(effects)
    assert len(ran) == paid and all(line[0] == call_id for line in ran)
    if reply == "retry":  # run again, once, by worker 2
        assert ran[1][2] != pid_a and end[1]["answer"] == "paid bob"
    else:
        assert "not run" in end[1]["answer"].lower() or "skip" in end[1]["answer"].lower()

    # the same reply again is already answered: nothing runs a third time
    again = httpx.post(f"{b}/v1/sessions/{session}/messages", json=body, timeout=30)
    assert again.status_code == 409
    assert len(lines(effects)) == paid
    turn = httpx.get(f"{b}/v1/sessions/{session}").json()["turns"][0]
    observations = [e for e in turn["events"] if e["type"] == "observation"]
    assert [o["call_id"] for o in observations] == [call_id]  # one observation for the one call
    assert [e["seq"] for e in turn["events"]] == list(range(1, len(turn["events"]) + 1))
