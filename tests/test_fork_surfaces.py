"""Forks with uploaded files (every store), and from the command line and over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from reactchat import Agent, ScriptedModel
from reactchat.knowledge import KnowledgeBase, attach
from reactchat.store import resolve_store
from server_support import make_app, running

ROSES = b"# Market\n\nA bouquet of roses costs 80.16 dollars on average.\n\n# Tulips\n\nTulips are cheaper in spring.\n"
USERS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}


def search(query: str) -> str:
    return " Look in the file.\nAction: search_files\nAction Input: " + json.dumps({"query": query})


def final(answer: str) -> str:
    return f" I know it.\nFinal Answer: {answer}"


@pytest.fixture
async def agent(store_url: str) -> AsyncIterator[Agent]:
    made = Agent(
        model=ScriptedModel([final("hello"), search("price of roses"), final("80.16 dollars")]), store=store_url
    )
    yield made
    await KnowledgeBase.for_store(made.store).close()
    await made.store.close()


async def test_a_fork_has_copies_of_the_uploaded_files_and_searches_them(agent: Agent) -> None:
    kb = attach(agent, retention=3)
    first = await agent.arun("hi")
    await kb.add_file(first.session, "roses.md", ROSES)
    new = await agent.fork(first.session)
    [copy] = await kb.files(new)
    assert (copy.name, copy.rounds_left, copy.retention) == ("roses.md", 3, 3)
    assert await kb.data(new, copy.id) == ROSES
    result = await agent.arun("How much are roses?", new)
    observation = result.steps[0].observation or ""
    assert result.steps[0].tool == "search_files" and "80.16" in observation and "roses.md" in observation
    # the fork's round is its own: the original's file still has all its rounds
    assert [(f.name, f.rounds_left) for f in await kb.files(first.session)] == [("roses.md", 3)]
    assert [f.rounds_left for f in await kb.files(new)] == [2]


# ------------------------------------------------------------------ the command line


def reactchat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        # the code under test, where a checkout runs it from its sources (PYTHONPATH)
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(cwd),
            "NO_COLOR": "1",
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )


async def test_reactchat_fork_prints_the_new_id_and_show_names_the_original(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = resolve_store(f"sqlite:///{db}")
    agent = Agent(model=ScriptedModel([final("one"), final("two")]), store=store)
    kb = attach(agent)
    session = (await agent.arun("first")).session
    await agent.arun("second", session)
    await kb.add_file(session, "roses.md", ROSES)
    await kb.close()
    await store.close()

    done = reactchat("fork", session, "--before", "3", "--db", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    new = done.stdout.strip()
    assert new and new != session
    shown = reactchat("show", new, "--db", str(db), cwd=tmp_path)
    assert f"Forked from {session} before event 3" in shown.stdout
    assert "Turn 2" not in shown.stdout and "You: first" in shown.stdout
    exported = json.loads(reactchat("show", new, "--json", "--db", str(db), cwd=tmp_path).stdout)
    assert exported["forked_from"] == {"session": session, "before": 3} and exported["turns"][0]["question"] == "first"
    assert json.loads(reactchat("show", session, "--json", "--db", str(db), cwd=tmp_path).stdout)["forked_from"] is None
    files = KnowledgeBase(f"sqlite:///{db}")
    assert [f.name for f in await files.files(new)] == ["roses.md"]
    await files.close()

    wrong = reactchat("fork", session, "--before", "9", "--db", str(db), cwd=tmp_path)
    assert wrong.returncode == 1 and "has no event 9 to fork before (its events are 1 to 4)" in wrong.stderr
    missing = reactchat("fork", "nope", "--db", str(db), cwd=tmp_path)
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr


# ------------------------------------------------------------------ HTTP


def test_post_fork_answers_201_with_the_new_session_in_the_callers_namespace(durable_url: str) -> None:
    alice = {"Authorization": f"Bearer {USERS['alice']}"}
    bob = {"Authorization": f"Bearer {USERS['bob']}"}
    with running(make_app(durable_url, users=USERS)) as url, httpx.Client(base_url=url, timeout=30) as client:
        session = client.post("/v1/sessions", headers=alice).json()["session"]
        for message in ("compute 2+3", "compute 4*5"):
            client.post(f"/v1/sessions/{session}/messages", json={"message": message, "stream": False}, headers=alice)
        events = [
            e for turn in client.get(f"/v1/sessions/{session}", headers=alice).json()["turns"] for e in turn["events"]
        ]
        second = next(e["seq"] for e in events if e["type"] == "user" and e["text"] == "compute 4*5")

        forked = client.post(f"/v1/sessions/{session}/fork", json={"before": second}, headers=alice)
        assert forked.status_code == 201, forked.text
        new = forked.json()["session"]
        assert new.startswith("alice:") and forked.json() == {"session": new, "forked_from": session, "before": second}
        view = client.get(f"/v1/sessions/{new}", headers=alice).json()
        assert view["forked_from"] == {"session": session, "before": second}
        assert [t["question"] for t in view["turns"]] == ["compute 2+3"] and view["status"] == "done"
        assert client.get(f"/v1/sessions/{session}", headers=alice).json()["forked_from"] is None
        resent = client.post(
            f"/v1/sessions/{new}/messages", json={"message": "compute 6*7", "stream": False}, headers=alice
        )
        assert resent.json()["answer"] == "42"

        whole = client.post(f"/v1/sessions/{session}/fork", headers=alice)
        assert whole.status_code == 201 and whole.json()["before"] == len(events) + 1

        assert client.post(f"/v1/sessions/{session}/fork", json={"before": 2}, headers=bob).status_code == 404
        wrong = client.post(f"/v1/sessions/{session}/fork", json={"before": 99}, headers=alice)
        assert wrong.status_code == 409 and "has no event 99 to fork before" in wrong.json()["error"]["message"]
        assert client.post(f"/v1/sessions/{session}/fork", json={"before": 0}, headers=alice).status_code == 422
        assert client.post(f"/v1/sessions/{session}/fork", json={"seq": 2}, headers=alice).status_code == 422
        assert client.post("/v1/sessions/alice:nope/fork", json={"before": 1}, headers=alice).status_code == 404
