"""Scale-out: two uvicorn processes on one PostgreSQL serve the same sessions.

A run paused on an ask_user question in one process resumes in the other; a turn
running in one process makes the other answer 409; nothing in a process's memory is
needed to carry on.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from hosts_parts import pipe
from server_support import parse_sse, start_worker, stop_workers


@pytest.fixture
def workers(postgres_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    started = [start_worker(postgres_url, tmp_path / "a.log"), start_worker(postgres_url, tmp_path / "b.log")]
    try:
        yield started[0][1], started[1][1]
    finally:
        stop_workers(started)


def test_a_question_asked_by_one_worker_is_answered_on_the_other(workers: tuple[str, str]) -> None:
    a, b = workers
    session = httpx.post(f"{a}/v1/sessions").json()["session"]
    frames = parse_sse(httpx.post(f"{a}/v1/sessions/{session}/messages", json={"message": "How far is Paris?"}).text)
    end = frames[-1][1]
    assert end["status"] == "waiting"

    view = httpx.get(f"{b}/v1/sessions/{session}").json()
    assert view["pending"] == end["pending"]
    assert (view["pending"]["question"], view["pending"]["reply_to"]) == ("Where are you?", end["reply_to"])
    answer = {"message": "Lyon", "reply_to": end["reply_to"]}
    frames = parse_sse(httpx.post(f"{b}/v1/sessions/{session}/messages", json=answer, timeout=20).text)
    assert frames[-1][1]["answer"] == "From Lyon, Paris is 400 km away."
    assert frames[-1][1]["turn"] == 1

    again = httpx.post(f"{a}/v1/sessions/{session}/messages", json=answer)
    assert again.status_code == 409
    view = httpx.get(f"{a}/v1/sessions/{session}").json()
    assert view["status"] == "done"
    assert view["history"] == [["How far is Paris?", "From Lyon, Paris is 400 km away."]]


def test_a_turn_running_on_one_worker_makes_the_other_answer_409(workers: tuple[str, str]) -> None:
    a, b = workers
    session = httpx.post(f"{a}/v1/sessions").json()["session"]
    with httpx.stream(
        "POST", f"{a}/v1/sessions/{session}/messages", json={"message": "slow compute 2*21"}, timeout=20
    ) as running:
        lines = running.iter_lines()
        assert [next(lines), next(lines)] == ["id: 1", "event: user"]  # the first event of the session
        busy = httpx.post(f"{b}/v1/sessions/{session}/messages", json={"message": "hello"})
        assert busy.status_code == 409
        assert "busy" in busy.json()["error"]["message"]
        rest = "\n".join(lines)
    assert '"answer": "42"' in rest
    assert httpx.get(f"{b}/v1/sessions/{session}").json()["turns"][0]["answer"] == "42"


def test_openai_clients_resume_on_any_worker(workers: tuple[str, str]) -> None:
    a, b = workers
    history = [{"role": "user", "content": "how far is Paris from me?"}]
    with OpenAI(base_url=f"{a}/v1", api_key="none", max_retries=0) as first:
        asked = first.chat.completions.create(model="rules", messages=history)  # type: ignore[arg-type]
    assert asked.choices[0].message.content == "Where are you?"
    history += [{"role": "assistant", "content": "Where are you?"}, {"role": "user", "content": "Rennes"}]
    with OpenAI(base_url=f"{b}/v1", api_key="none", max_retries=0) as second:
        answered = second.chat.completions.create(model="rules", messages=history)  # type: ignore[arg-type]
    assert answered.choices[0].message.content == "From Rennes, Paris is 400 km away."
    assert answered.model_extra["reactchat"]["session"] == asked.model_extra["reactchat"]["session"]


def sse_frames(text: str) -> list[tuple[int | None, str, dict[str, Any]]]:
    """SSE text → ``[(id, event, data), ...]`` (comments skipped)."""
    frames = []
    for block in text.strip().split("\n\n"):
        seq, kind, data = None, "message", ""
        for line in block.splitlines():
            if line.startswith("id: "):
                seq = int(line[4:])
            elif line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
        if data:
            frames.append((seq, kind, json.loads(data)))
    return frames


def test_a_turn_whose_worker_dies_is_finished_by_another(postgres_url: str, tmp_path: Path) -> None:
    """Kill -9 the worker mid-turn: another finishes the turn by itself, and a client that
    reconnects there with Last-Event-ID sees the remaining events, none repeated, none missing."""
    (a, a_url), (b, b_url) = (
        start_worker(postgres_url, tmp_path / "a.log"),
        start_worker(postgres_url, tmp_path / "b.log"),
    )
    try:
        session = httpx.post(f"{a_url}/v1/sessions").json()["session"]
        seen = ""
        with httpx.stream(
            "POST", f"{a_url}/v1/sessions/{session}/messages", json={"message": "slow compute 2*21"}, timeout=20
        ) as running:
            for chunk in running.iter_text():
                seen += chunk
                if "event: observation" in seen and seen.endswith("\n\n"):
                    break  # one model call done, the second one running: kill the worker now
            a.kill()
            killed = time.monotonic()
        before = sse_frames(seen)
        assert [kind for _, kind, _ in before] == ["user", "thought", "action", "observation"]
        last = before[-1][0]
        assert [seq for seq, _, _ in before] == [1, 2, 3, 4]

        with httpx.stream(
            "GET", f"{b_url}/v1/sessions/{session}/events", headers={"Last-Event-ID": str(last)}, timeout=30
        ) as follow:
            after = sse_frames(follow.read().decode())
        finished = time.monotonic() - killed
        assert [(seq, kind) for seq, kind, _ in after] == [(5, "answer"), (None, "end")]
        assert after[0][2]["text"] == "42"
        assert after[-1][2]["status"] == "done"
        assert finished < 10, f"the turn was finished {finished:.1f} s after its worker died"

        stored = httpx.get(f"{b_url}/v1/sessions/{session}").json()
        assert [e["type"] for e in stored["turns"][0]["events"]] == [
            "user",
            "thought",
            "action",
            "observation",
            "answer",
        ]
        # the whole log again, from the start, on the surviving worker
        replay = sse_frames(httpx.get(f"{b_url}/v1/sessions/{session}/events", timeout=10).text)
        assert [seq for seq, _, _ in replay] == [1, 2, 3, 4, 5, None]
    finally:
        for process in (a, b):
            process.kill()
            process.wait()


class Balancer:
    """A TCP proxy in front of the workers, like a load balancer: new connections go to ``target``."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.writers: list[asyncio.StreamWriter] = []
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connect, "127.0.0.1", 0), self.loop
        ).result(10)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.target.removeprefix("http://").split(":")
        self.writers.append(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        self.writers.append(up_writer)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def _close(self) -> None:
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def test_the_page_carries_on_when_its_worker_dies(postgres_url: str, tmp_path: Path) -> None:
    """The page follows a turn whose worker is killed: the rest of the turn arrives from the
    worker that takes it over, through the same balancer, each step once."""
    from playwright.sync_api import expect, sync_playwright

    from test_page import ARGS, CHROMIUM

    (a, a_url), (b, b_url) = (
        start_worker(postgres_url, tmp_path / "a.log"),
        start_worker(postgres_url, tmp_path / "b.log"),
    )
    balancer = Balancer(a_url)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(base_url=f"http://127.0.0.1:{balancer.port}")
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto("/")
            page.get_by_test_id("input").fill("slow compute 2*21")
            page.get_by_test_id("input").press("Enter")
            steps = page.get_by_test_id("step")
            expect(steps).to_have_count(3)  # thought, action, observation: the second model call runs
            balancer.target = b_url
            a.kill()
            expect(page.get_by_test_id("answer")).to_have_text("42")
            expect(steps).to_have_count(4)
            expect(page.get_by_test_id("error")).to_have_count(0)
            expect(page.get_by_test_id("status")).to_have_text("")
            browser.close()
        assert not errors, errors
    finally:
        balancer.close()
        for process in (a, b):
            process.kill()
            process.wait()
