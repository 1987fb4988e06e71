"""The shared token beside per-user tokens is one more user, on every route: two users and
the shared token against a real uvicorn on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from reactchat.errors import ConfigError
from reactchat.server import ServerConfig
from server_support import free_port, make_app, running

USERS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}
SHARED = "shared-token-0123456789"


@contextmanager
def callers() -> Iterator[tuple[httpx.Client, httpx.Client, httpx.Client]]:
    """Clients of alice, bob and the shared token on one server that has all three."""
    with (
        running(make_app(token=SHARED, users=USERS)) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {USERS['alice']}"}, timeout=20) as alice,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {USERS['bob']}"}, timeout=20) as bob,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {SHARED}"}, timeout=20) as shared,
    ):
        yield alice, bob, shared


def waiting_session(client: httpx.Client) -> str:
    """A new session of the client's, waiting on the question "Where are you?"."""
    session = client.post("/v1/sessions").json()["session"]
    asked = client.post(f"/v1/sessions/{session}/messages", json={"message": "how far is Paris?", "stream": False})
    assert asked.json()["status"] == "waiting"
    return str(session)


def test_the_shared_token_reaches_no_users_session_on_any_route() -> None:
    with callers() as (alice, bob, shared):
        theirs = [waiting_session(alice), waiting_session(bob)]
        for session in theirs:
            for method, path, options in (
                ("GET", "", {}),
                ("POST", "/messages", {"json": {"message": "Lyon", "stream": False}}),
                ("GET", "/events", {}),
                ("POST", "/files", {"files": {"file": ("a.txt", b"roses")}}),
                ("DELETE", "/context", {}),
                ("POST", "/cancel", {}),
            ):
                answer = shared.request(method, f"/v1/sessions/{session}{path}", **options)  # type: ignore[arg-type]
                assert answer.status_code == 404, (method, path, answer.text)
        assert shared.get("/v1/sessions").json()["sessions"] == [], "no one else's sessions, nor their questions"
        # the OpenAI endpoint naming bob's session neither answers nor reads it
        chat = shared.post(
            "/v1/chat/completions",
            json={"model": "rules", "messages": [{"role": "user", "content": "Lyon"}]},
            headers={"X-Session-Id": theirs[1]},
        )
        assert chat.status_code == 200 and chat.headers["x-session-id"] == f"shared:{theirs[1]}"
        assert chat.json()["choices"][0]["message"]["content"] == "echo: Lyon"
        for client, session in zip((alice, bob), theirs, strict=True):
            view = client.get(f"/v1/sessions/{session}").json()
            assert view["pending"]["question"] == "Where are you?" and len(view["turns"]) == 1, "untouched"


def test_the_shared_token_plants_nothing_in_a_users_namespace() -> None:
    with callers() as (alice, bob, shared):
        planted = shared.post("/v1/sessions", json={"session": "bob:inbox"}).json()["session"]
        assert planted == "shared:bob:inbox"
        hi = {"model": "rules", "messages": [{"role": "user", "content": "hi"}]}
        by_body = shared.post("/v1/chat/completions", json={**hi, "session_id": "bob:notes"})
        assert by_body.headers["x-session-id"] == "shared:bob:notes"
        derived = shared.post("/v1/chat/completions", json=hi)
        assert derived.headers["x-session-id"].startswith("shared:oa-")
        assert bob.get("/v1/sessions").json()["sessions"] == []
        for planted_id in ("bob:inbox", "bob:notes"):
            assert bob.get(f"/v1/sessions/{planted_id}").status_code == 404, "nothing was made in bob's name"
        own = sorted(s["session"] for s in shared.get("/v1/sessions").json()["sessions"])
        assert own[:2] == ["shared:bob:inbox", "shared:bob:notes"] and own[2].startswith("shared:oa-")
        # and the shared token's sessions are its own: the users get a 404 for them
        for session in own:
            assert alice.get(f"/v1/sessions/{session}").status_code == 404
            assert bob.post(f"/v1/sessions/{session}/messages", json={"message": "x"}).status_code == 404


def test_the_shared_token_keeps_its_sessions_across_requests() -> None:
    with callers() as (_, _, shared):
        session = waiting_session(shared)
        assert session.startswith("shared:")
        done = shared.post(f"/v1/sessions/{session}/messages", json={"message": "Lyon", "stream": False}).json()
        assert done["answer"] == "From Lyon, Paris is 400 km away."
        assert [s["session"] for s in shared.get("/v1/sessions").json()["sessions"]] == [session]


def test_without_users_the_shared_token_still_sees_every_session() -> None:
    with (
        running(make_app(token=SHARED)) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {SHARED}"}, timeout=20) as shared,
    ):
        made = shared.post("/v1/sessions", json={"session": "bob:inbox"}).json()["session"]
        assert made == "bob:inbox" and shared.get(f"/v1/sessions/{made}").status_code == 200


@pytest.mark.parametrize(
    ("users", "message"),
    [
        ({**USERS, "shared": "another-token-0123456789"}, "names a user 'shared'"),
        ({**USERS, "carol": SHARED}, "also the token of user 'carol'"),
    ],
)
def test_a_shared_token_that_cannot_be_a_user_of_its_own_is_refused(users: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServerConfig(token=SHARED, users=users)


def test_reactchat_serve_refuses_a_token_file_that_takes_the_shared_name(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {USERS['alice']}\nshared another-token-0123456789\n", encoding="utf-8")
    env = {**os.environ, "REACTCHAT_TOKEN": SHARED}
    env.pop("REACTCHAT_TOKEN_FILE", None)
    command = [sys.executable, "-m", "reactchat.cli", "serve", "--port", str(free_port()), "--db", "memory:"]
    command += ["--model", "scripted:/dev/null", "--token-file", str(tokens)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "names a user 'shared'" in done.stderr
