"""Memory over HTTP (a real uvicorn on loopback) and the ``reactchat memory`` command: on a
server with per-user tokens each user sees, and forgets, only their own facts."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from reactchat import Agent, ConfigError, Memory, ScriptedModel
from reactchat.cli.main import main
from reactchat.messages import Request
from reactchat.server import ServerConfig, create_app
from reactchat.store import resolve_store
from server_support import running
from test_page import browser  # noqa: F401  (the module's Chromium fixture)

USERS = {"alice": "token-alice", "bob": "token-bob"}


def rule(request: Request) -> str:
    """'remember X' calls the remember tool with X; any other question gets its prompt's notes."""
    text = "\n".join(str(getattr(m, "content", "") or m) for m in request.messages)
    if "Remembered:" in text:
        return "Thought: done\nFinal Answer: kept"
    asked = re.findall(r"^Question: (.*)$", text, re.MULTILINE)[-1]
    if asked.startswith("remember "):
        return f"Thought: keep it\nAction: remember\nAction Input: {json.dumps({'fact': asked[9:]})}"
    return "Thought: I know\nFinal Answer: " + ("I remember you" if "What you remember from" in text else "no idea")


def app(store: str, users: dict[str, str] | None = None, scope: str | None = None) -> Any:
    def agent(opened: Any) -> Agent:
        return Agent(model=ScriptedModel([rule] * 100), store=opened, memory=Memory(scope=scope))

    return create_app(agent, config=ServerConfig(store=store, users=users))


def say(client: httpx.Client, message: str) -> str:
    session = client.post("/v1/sessions").json()["session"]
    response = client.post(f"/v1/sessions/{session}/messages", json={"message": message})
    assert response.status_code == 200, response.text
    return str(session)


def answer(client: httpx.Client) -> str:
    """The stored session of a new turn asking for the locker code, as text."""
    session = client.post("/v1/sessions").json()["session"]
    client.post(f"/v1/sessions/{session}/messages", json={"message": "what is my locker code?"})
    return str(client.get(f"/v1/sessions/{session}").json())


def test_each_user_sees_and_forgets_only_their_own_facts(tmp_path: Path) -> None:
    with running(app(f"sqlite:///{tmp_path / 'm.db'}", USERS)) as base:
        alice = httpx.Client(base_url=base, headers={"Authorization": "Bearer token-alice"}, timeout=20)
        bob = httpx.Client(base_url=base, headers={"Authorization": "Bearer token-bob"}, timeout=20)
        session = say(alice, "remember Alice's locker code is 4417")
        facts = alice.get("/v1/memory").json()["facts"]
        assert [f["text"] for f in facts] == ["Alice's locker code is 4417"]
        assert facts[0]["session"] == session
        # bob: none of it, whatever scope he names, and his turns do not see it
        assert bob.get("/v1/memory").json() == {"facts": []}
        assert bob.get("/v1/memory", params={"scope": "alice"}).json() == {"facts": []}
        assert bob.delete(f"/v1/memory/{facts[0]['id']}", params={"scope": "alice"}).status_code == 404
        assert alice.get("/v1/memory").json()["facts"] != []
        # forgotten, it is gone from the list and from the next turn's prompt
        assert "I remember you" in answer(alice)
        assert alice.delete(f"/v1/memory/{facts[0]['id']}").status_code == 204
        assert alice.get("/v1/memory").json() == {"facts": []}
        assert "no idea" in answer(alice)  # the next turn's prompt does not carry it
        assert alice.delete(f"/v1/memory/{facts[0]['id']}").status_code == 404
        assert httpx.get(f"{base}/v1/memory").status_code == 401
        alice.close()
        bob.close()


def test_a_fact_is_in_the_users_next_session_and_not_in_anothers(tmp_path: Path) -> None:
    with running(app(f"sqlite:///{tmp_path / 'm.db'}", USERS)) as base:
        alice = httpx.Client(base_url=base, headers={"Authorization": "Bearer token-alice"}, timeout=20)
        bob = httpx.Client(base_url=base, headers={"Authorization": "Bearer token-bob"}, timeout=20)
        say(alice, "remember the locker code is 4417")
        assert "I remember you" in answer(alice)
        assert "no idea" in answer(bob)
        alice.close()
        bob.close()


def test_one_scope_for_every_user_is_refused_on_a_server_with_users() -> None:
    with pytest.raises(ConfigError, match="scope=None"):
        app("memory:", USERS, scope="everyone")


def test_without_users_the_scope_is_the_agents(tmp_path: Path) -> None:
    with running(app(f"sqlite:///{tmp_path / 'm.db'}", scope="team")) as base, httpx.Client(base_url=base) as client:
        say(client, "remember the deploy is on Fridays")
        assert [f["text"] for f in client.get("/v1/memory").json()["facts"]] == ["the deploy is on Fridays"]


def test_the_command_lists_and_forgets_a_scopes_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    store = resolve_store(f"sqlite:///{db}")
    memory = Memory(scope="user-42").on(store)
    fact = asyncio.run(memory.remember("The user prefers tea.", "s1"))
    asyncio.run(store.close())
    assert main(["memory", "list", "--scope", "user-42", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(f["id"], f["text"], f["session"]) for f in listed] == [(fact.id, "The user prefers tea.", "s1")]
    assert main(["memory", "list", "--scope", "other", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["memory", "forget", fact.id, "--scope", "other", "--db", str(db)]) == 1
    assert main(["memory", "forget", fact.id, "--scope", "user-42", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["memory", "list", "--scope", "user-42", "--db", str(db)]) == 0
    assert "no fact" in capsys.readouterr().err


def test_the_pages_memory_panel_lists_and_forgets_facts(browser: Browser, tmp_path: Path) -> None:  # noqa: F811
    with running(app(f"sqlite:///{tmp_path / 'm.db'}", scope="me")) as base:
        context = browser.new_context(base_url=base)
        context.set_default_timeout(15_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("/")
        page.get_by_test_id("input").fill("remember my bike is blue")
        page.get_by_test_id("send").click()
        expect(page.get_by_test_id("answer").last).to_contain_text("kept")
        page.get_by_role("button", name="Memory").click()
        facts = page.get_by_test_id("memory").get_by_test_id("fact")
        expect(facts).to_have_count(1)
        expect(facts.first).to_contain_text("my bike is blue")
        facts.first.get_by_test_id("forget").click()
        expect(page.get_by_test_id("memory")).to_contain_text("Nothing remembered yet.")
        assert httpx.get(f"{base}/v1/memory").json() == {"facts": []}
        assert errors == []
        context.close()
