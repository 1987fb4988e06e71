"""Scale-out: two uvicorn processes on one PostgreSQL serve the same sessions.

A run paused on an ask_user question in one process resumes in the other; a turn
running in one process makes the other answer 409; nothing in a process's memory is
needed to carry on.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from test_server_support import parse_sse, start_worker


@pytest.fixture
def workers(postgres_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    started = [start_worker(postgres_url, tmp_path / "a.log"), start_worker(postgres_url, tmp_path / "b.log")]
    try:
        yield started[0][1], started[1][1]
    finally:
        for process, _ in started:
            process.terminate()
        for process, _ in started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
        assert next(lines) == "event: user"
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
