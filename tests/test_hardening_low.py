"""Small failures a real server must answer well: an unexpected error is a 500 with a body
(and the connection is not left for a client to reuse), a missing session's 404 says so
once, and following a session that never ran a turn says ``idle`` at once, with the
number of followers bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.exceptions import HTTPException

from reactchat import Agent
from reactchat.server import ServerConfig, create_app
from reactchat.server._takeover import MAX_FOLLOWERS_PER_SESSION, Followers
from server_support import RuleModel, parse_sse, running


def _broken_agent(store: Any) -> Agent:
    """An agent whose every new message meets a bug (a hook that raises)."""
    agent = Agent(model=RuleModel(), store=store)

    async def bug(session: str, store: Any, text: str) -> None:
        raise RuntimeError("a bug in a hook")

    agent.hooks.new_message.append(bug)
    return agent


@pytest.fixture
def broken(tmp_path: Path) -> Iterator[str]:
    with running(create_app(_broken_agent, config=ServerConfig(store=f"sqlite:///{tmp_path / 'b.db'}"))) as base:
        yield base


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    make = lambda store: Agent(model=RuleModel(), store=store)  # noqa: E731
    with running(create_app(make, config=ServerConfig(store=f"sqlite:///{tmp_path / 's.db'}"))) as base:
        yield base


INTERNAL = "internal error (RuntimeError); the details are in the server log"


def test_an_unexpected_error_is_a_500_with_a_body_on_every_route_and_the_next_request_works(broken: str) -> None:
    chat = {"model": "rules", "messages": [{"role": "user", "content": "hello"}]}
    with httpx.Client(base_url=broken, timeout=30) as client:  # one client: its connections are reused
        for _ in range(2):
            messages = [f"/v1/sessions/{client.post('/v1/sessions').json()['session']}/messages" for _ in range(2)]
            answers = [
                client.post(messages[0], json={"message": "hi", "stream": False}),
                client.post(messages[1], json={"message": "hi"}),
                client.post("/v1/chat/completions", json=chat),
                client.post("/v1/chat/completions", json={**chat, "stream": True}),
            ]
            for answer in answers:
                assert answer.status_code == 500
                assert answer.json()["error"]["message"] == INTERNAL


def test_the_openai_sdk_gets_the_500_and_its_message_not_a_connection_error(broken: str) -> None:
    client = openai.OpenAI(base_url=f"{broken}/v1", api_key="none", max_retries=2)
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model="rules", messages=[{"role": "user", "content": "hello"}])
    assert raised.value.status_code == 500
    assert INTERNAL in str(raised.value)
    client.close()


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/sessions/nope"), ("DELETE", "/v1/sessions/nope/context")])
def test_a_missing_session_is_named_once(server: str, method: str, path: str) -> None:
    answer = httpx.request(method, server + path, timeout=10)
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert message.startswith("no session 'nope': it was never created")
    assert message.count("no session") == 1


def test_following_a_session_with_no_turn_ends_at_once_as_idle(server: str) -> None:
    with httpx.Client(base_url=server, timeout=30) as client:
        session = client.post("/v1/sessions").json()["session"]
        started = time.monotonic()
        frames = parse_sse(client.get(f"/v1/sessions/{session}/events").text)
        assert time.monotonic() - started < 2
        assert [kind for kind, _ in frames] == ["end"]
        assert frames[0][1]["status"] == "idle"
        done = client.post(f"/v1/sessions/{session}/messages", json={"message": "hi", "stream": False})
        assert done.json()["status"] == "done"
        after = parse_sse(client.get(f"/v1/sessions/{session}/events").text)
        assert after[-1] == ("end", {**after[-1][1], "status": "done"})


async def test_followers_are_bounded_per_session(server: str) -> None:
    async with httpx.AsyncClient(base_url=server, timeout=30) as client:
        session = (await client.post("/v1/sessions", json={})).json()["session"]
        # a turn that takes a few seconds, so that its followers stay open
        slow = client.post(f"/v1/sessions/{session}/messages", json={"message": "slow question", "stream": False})
        turn = asyncio.ensure_future(slow)
        await asyncio.sleep(0.3)
        streams = [client.stream("GET", f"/v1/sessions/{session}/events") for _ in range(MAX_FOLLOWERS_PER_SESSION)]
        opened = [await stream.__aenter__() for stream in streams]
        assert [r.status_code for r in opened] == [200] * MAX_FOLLOWERS_PER_SESSION
        refused = await client.get(f"/v1/sessions/{session}/events")
        assert refused.status_code == 429
        message = refused.json()["error"]["message"]
        assert f"{MAX_FOLLOWERS_PER_SESSION} clients already follow session {session}" in message
        for stream in streams:
            await stream.__aexit__(None, None, None)
        await turn
        assert (await client.get(f"/v1/sessions/{session}/events")).status_code == 200


def test_followers_are_bounded_per_client_across_sessions() -> None:
    followers = Followers(per_session=2, per_client=3)
    for session in ("a", "b", "c"):
        followers.enter(session, "10.0.0.7")
    with pytest.raises(HTTPException) as raised:
        followers.enter("d", "10.0.0.7")
    assert raised.value.status_code == 429
    assert raised.value.detail == "this client already follows 3 sessions: close one first"
    followers.enter("d", "10.0.0.8")  # another client is not held back
    followers.leave("a", "10.0.0.7")
    followers.enter("d", "10.0.0.7")
