"""A call in doubt on every surface: ``reactchat ask`` (exit 3 with the question, then the
reply), the OpenAI endpoint, A2A and the page's Retry / Skip buttons.

Each session is cut off the way a worker shutting down cuts it (``task.cancel(SHUTDOWN)``)
while ``pay`` (an unsafe tool, ``pay_app``) is inside its call, after its effect: the action
is stored, its result never is. Whoever continues the session must ask before paying again.
The side-effect log says how many times ``pay`` ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI
from playwright.sync_api import Page, expect

from pay_app import make_agent
from reactchat.engine.approval import SKIPPED
from reactchat.engine.loop import SHUTDOWN
from reactchat.server import ServerConfig, create_app
from server_support import parse_sse, running
from test_page import browser, page  # noqa: F401 - the page tests' Chromium, over this module's server


def payments(effects: Path) -> int:
    return len(effects.read_text().splitlines()) if effects.exists() else 0


async def cut_off(db: str, effects: Path) -> str:
    """A session whose turn stopped inside ``pay("bob")``, after the payment: its id."""
    os.environ["REACTCHAT_HOLD"] = "60"
    agent = make_agent(db)
    try:
        session = await agent.store.create_session()
        running = asyncio.create_task(agent.arun("pay bob", session))
        for _ in range(1000):
            if payments(effects):
                break
            await asyncio.sleep(0.01)
        running.cancel(SHUTDOWN)
        with contextlib.suppress(asyncio.CancelledError):
            await running
        state = await agent.state(session)
    finally:
        del os.environ["REACTCHAT_HOLD"]
        await agent.store.close()
    assert state.turns[-1].status == "interrupted" and payments(effects) == 1
    return session


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The SQLite URL and the side-effect log every test of this module uses."""
    folder = tmp_path_factory.mktemp("doubt")
    effects = folder / "effects"
    os.environ["REACTCHAT_EFFECTS"] = str(effects)
    try:
        yield f"sqlite:///{folder / 's.db'}", effects
    finally:
        del os.environ["REACTCHAT_EFFECTS"]


@pytest.fixture(scope="module")
def base(setting: tuple[str, Path]) -> Iterator[str]:
    """The server over the module's database (the page tests' ``page`` fixture uses it)."""
    with running(create_app(make_agent, config=ServerConfig(model="pay-rules", store=setting[0]))) as url:
        yield url


@pytest.fixture
def session(setting: tuple[str, Path]) -> Iterator[str]:
    """A fresh session cut off in doubt; the effects log starts empty."""
    db, effects = setting
    effects.unlink(missing_ok=True)
    with ThreadPoolExecutor(1) as thread:  # a loop of its own: the async tests run in one already
        yield thread.submit(lambda: asyncio.run(cut_off(db, effects))).result()


def test_reactchat_ask_shows_the_call_in_doubt_and_takes_the_reply(
    setting: tuple[str, Path], session: str, tmp_path: Path
) -> None:
    db, effects = setting
    script = tmp_path / "replies.txt"
    script.write_text(" Noted.\nFinal Answer: not paid again")
    flags = ["--db", db.removeprefix("sqlite:///"), "--tools", "pay_app:pay", "--model", f"scripted:{script}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}

    def ask(message: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "reactchat", "ask", "--session", session, message, *flags]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)

    asked = ask("go on")
    assert asked.returncode == 3, asked.stdout + asked.stderr
    assert "pay" in asked.stdout and "interrupted" in asked.stdout
    assert f"reactchat ask --session {session} retry" in asked.stdout
    assert payments(effects) == 1
    done = ask("skip")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not paid again" in done.stdout and payments(effects) == 1


def test_the_openai_endpoint_asks_and_the_next_message_settles_it(
    base: str, setting: tuple[str, Path], session: str
) -> None:
    effects = setting[1]
    with OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=30) as client:

        def say(text: str) -> Any:
            messages = [{"role": "user", "content": text}]
            return client.chat.completions.create(
                model="pay-rules",
                messages=messages,  # type: ignore[arg-type]
                extra_body={"session_id": session},
            )

        asked = say("go on")
        question = asked.choices[0].message.content or ""
        assert "pay" in question and "interrupted" in question and "retry" in question
        assert (asked.model_extra or {})["reactchat"]["status"] == "waiting"
        assert payments(effects) == 1
        skipped = say("skip")
    assert skipped.choices[0].message.content == SKIPPED
    assert payments(effects) == 1


async def test_a2a_makes_the_task_input_required_and_the_next_message_settles_it(
    base: str, setting: tuple[str, Path], session: str
) -> None:
    pytest.importorskip("a2a", reason="the a2a extra is not installed: pip install 'reactchat[a2a]'")
    from test_a2a_server import TASK_STATE_COMPLETED, TASK_STATE_INPUT_REQUIRED, ask, client, said

    effects = setting[1]
    async with client(base, streaming=False) as a2a:
        asked = [item async for item in a2a.send_message(ask("go on", context=session))]
        task = asked[-1].task
        assert task.status.state == TASK_STATE_INPUT_REQUIRED
        assert "interrupted" in said(task.status.message) and payments(effects) == 1
        done = [item async for item in a2a.send_message(ask("retry", task=task.id, context=session))]
    assert done[-1].task.status.state == TASK_STATE_COMPLETED
    assert payments(effects) == 2  # run again because the user said so, once


@pytest.mark.parametrize(("button", "answer", "paid"), [("retry", "paid bob", 2), ("skip", SKIPPED, 1)])
def test_the_page_shows_retry_and_skip(
    page: Page,  # noqa: F811 - the imported fixture
    setting: tuple[str, Path],
    session: str,
    button: str,
    answer: str,
    paid: int,
) -> None:
    effects = setting[1]
    page.evaluate(f"localStorage.setItem('reactchat.session', '{session}')")
    page.reload()
    page.get_by_test_id("input").fill("go on")
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("pending")).to_contain_text("interrupted")
    expect(page.get_by_test_id("retry")).to_be_visible()
    page.reload()  # the question survives a reload, buttons included
    page.get_by_test_id(button).click()
    expect(page.get_by_test_id("answer").last).to_have_text(answer)
    expect(page.get_by_test_id("pending")).to_be_hidden()
    assert payments(effects) == paid


def test_the_sse_end_frame_names_the_call_in_doubt(base: str, setting: tuple[str, Path], session: str) -> None:
    effects = setting[1]
    url = f"{base}/v1/sessions/{session}/messages"
    frames = parse_sse(httpx.post(url, json={"message": "go on"}, timeout=30).text)
    kind, end = frames[-1]
    assert kind == "end" and end["status"] == "waiting"
    pending = end["pending"]
    assert (pending["kind"], pending["tool"], pending["input"]) == ("in_doubt", "pay", {"to": "bob"})
    assert end["reply_to"] == end["pending"]["reply_to"] and "interrupted" in end["question"]
    frames = parse_sse(httpx.post(url, json={"message": "skip", "reply_to": end["reply_to"]}, timeout=30).text)
    assert frames[-1][1]["status"] == "done" and frames[-1][1]["answer"] == SKIPPED
    assert payments(effects) == 1
