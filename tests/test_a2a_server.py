"""``reactchat serve`` as an A2A agent, driven by the official ``a2a-sdk`` client against a
real uvicorn on loopback (the rule model of ``server_support``)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a", reason="the a2a extra is not installed: pip install 'reactchat[a2a]'")

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    ROLE_USER,
    TASK_STATE_CANCELED,
    TASK_STATE_COMPLETED,
    TASK_STATE_INPUT_REQUIRED,
    TASK_STATE_WORKING,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    SendMessageRequest,
    StreamResponse,
)
from a2a.utils.errors import A2AError

from reactchat import Agent
from reactchat.server import ServerConfig, create_app
from reactchat.toolbox import calculator
from server_support import RuleModel, make_app, running, start_worker, stop_workers

USERS = {"alice": "alice-token", "bob": "bob-token"}


@pytest.fixture
def url() -> Iterator[str]:
    with running(make_app()) as base:
        yield base


def ask(text: str, task: str = "", context: str = "") -> SendMessageRequest:
    """A user's text message, in a task and context when given."""
    message = Message(message_id=uuid.uuid4().hex, role=ROLE_USER, parts=[Part(text=text)])
    message.task_id, message.context_id = task, context
    return SendMessageRequest(message=message)


@contextlib.asynccontextmanager
async def client(url: str, token: str | None = None, streaming: bool = True) -> AsyncIterator[Any]:
    """The SDK's client for the agent at ``url``, from its card."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def said(message: Message) -> str:
    return "".join(part.text for part in message.parts)


async def test_the_card_names_the_agent_its_tools_streaming_and_the_token_it_needs() -> None:
    with running(make_app(token="s3cret")) as base:
        async with httpx.AsyncClient() as http:  # no token: the card says which one to send
            card = await A2ACardResolver(http, base).get_agent_card()
            legacy = (await http.get(f"{base}/.well-known/agent.json")).json()
            refused = await http.post(f"{base}/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
    assert {s.id for s in card.skills} == {"calculator", "ask_user"}
    assert card.capabilities.streaming
    assert card.supported_interfaces[0].url == f"{base}/a2a"
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert "bearer" in card.security_requirements[0].schemes
    assert legacy["name"] == card.name and legacy["url"] == f"{base}/a2a"  # the 0.3 fields too
    assert refused.status_code == 401


async def test_send_then_get_a_finished_task(url: str) -> None:
    async with client(url, streaming=False) as agent:
        [response] = [r async for r in agent.send_message(ask("compute 6*7"))]
        task = response.task
        assert task.status.state == TASK_STATE_COMPLETED
        assert said(task.artifacts[0]) == "42"
        again = await agent.get_task(GetTaskRequest(id=task.id))
        assert again.status.state == TASK_STATE_COMPLETED and said(again.status.message) == "42"
        async with httpx.AsyncClient() as http:  # the context is the session
            session = (await http.get(f"{url}/v1/sessions/{task.context_id}")).json()
        assert session["turns"][0]["answer"] == "42"


async def test_a_question_in_the_middle_streamed_and_answered_in_the_same_task(url: str) -> None:
    async with client(url) as agent:
        first: list[StreamResponse] = [r async for r in agent.send_message(ask("how far is Paris?"))]
        task = first[0].task
        assert task.status.state == TASK_STATE_WORKING
        steps = [said(r.status_update.status.message) for r in first[1:-1] if r.HasField("status_update")]
        assert any(step.startswith("Action: ask_user") for step in steps)
        asked = first[-1].status_update
        assert asked.status.state == TASK_STATE_INPUT_REQUIRED and said(asked.status.message) == "Where are you?"

        second = [r async for r in agent.send_message(ask("Lyon", task=task.id, context=task.context_id))]
        assert second[0].task.id == task.id  # the same task goes on
        answer = [r.artifact_update.artifact for r in second if r.HasField("artifact_update")]
        assert said(answer[0]) == "From Lyon, Paris is 400 km away."
        assert second[-1].status_update.status.state == TASK_STATE_COMPLETED

        done = await agent.get_task(GetTaskRequest(id=task.id))
        assert [said(m) for m in done.history] == ["how far is Paris?", "Where are you?", "Lyon"]
        with pytest.raises(A2AError, match="waits for no answer"):
            [r async for r in agent.send_message(ask("Nice", task=task.id, context=task.context_id))]


async def test_the_older_protocol_methods_answer_too(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m1",
                "role": "user",
                "parts": [{"kind": "text", "text": "compute 2+3"}],
            }
        },
    }
    async with httpx.AsyncClient() as http:
        sent = (await http.post(f"{url}/a2a", json=body)).json()["result"]
        got = await http.post(
            f"{url}/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": sent["id"]}}
        )
    assert sent["status"]["state"] == "completed"
    assert got.json()["result"]["artifacts"][0]["parts"][0]["text"] == "5"


async def test_per_user_tokens_keep_each_users_tasks_their_own() -> None:
    with running(make_app(users=USERS)) as base:
        async with client(base, "alice-token", False) as alice, client(base, "bob-token", False) as bob:
            [response] = [r async for r in alice.send_message(ask("compute 1+1"))]
            task = response.task
            assert task.context_id.startswith("alice:")
            with pytest.raises(A2AError, match="no task"):
                await bob.get_task(GetTaskRequest(id=task.id))
            with pytest.raises(A2AError, match="no task"):  # nor can bob answer in it
                [r async for r in bob.send_message(ask("x", task=task.id))]
            [mine] = [r async for r in bob.send_message(ask("compute 2+2", context="notes"))]
            assert mine.task.context_id == "bob:notes"
            assert (await alice.get_task(GetTaskRequest(id=task.id))).status.state == TASK_STATE_COMPLETED


async def test_cancel_stops_a_running_task_and_refuses_a_finished_one(url: str) -> None:
    async with client(url) as agent:
        stream = agent.send_message(ask("slow: compute 3*3"))
        first = await anext(stream)
        task = first.task
        cancelled = await agent.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TASK_STATE_CANCELED
        rest = [r async for r in stream]
        assert rest[-1].status_update.status.state == TASK_STATE_CANCELED
        with pytest.raises(A2AError, match="not running"):
            await agent.cancel_task(CancelTaskRequest(id=task.id))


async def test_an_approval_makes_the_task_wait_and_the_next_message_decides_it() -> None:
    def agent(store: Any) -> Agent:
        return Agent(model=RuleModel(), tools=[calculator], store=store, approval=lambda name, _: name == "calculator")

    with running(create_app(agent, config=ServerConfig(model="rules", store="memory:"))) as base:
        async with client(base, streaming=False) as remote:
            [first] = [r async for r in remote.send_message(ask("compute 2+3"))]
            task = first.task
            assert task.status.state == TASK_STATE_INPUT_REQUIRED
            assert "calculator" in said(task.status.message)
            [second] = [r async for r in remote.send_message(ask("yes", task=task.id, context=task.context_id))]
    assert second.task.status.state == TASK_STATE_COMPLETED and said(second.task.artifacts[0]) == "5"


async def test_a_polling_client_gets_the_task_at_once_then_follows_it_with_get(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        polling = ClientFactory(ClientConfig(httpx_client=http, streaming=False, polling=True)).create(card)
        [response] = [r async for r in polling.send_message(ask("slow: compute 3*3"))]
        assert response.task.status.state == TASK_STATE_WORKING
        for _ in range(100):
            task = await polling.get_task(GetTaskRequest(id=response.task.id))
            if task.status.state != TASK_STATE_WORKING:
                break
            await asyncio.sleep(0.1)
    assert task.status.state == TASK_STATE_COMPLETED and said(task.artifacts[0]) == "9"


async def test_any_worker_answers_for_any_task(durable_url: str, tmp_path: Path) -> None:
    """Asked on one worker, answered on another, read back on the first: all from the store."""
    started = [start_worker(durable_url, tmp_path / f"worker{n}.log") for n in range(2)]
    try:
        (_, one), (_, two) = started
        async with client(one) as first, client(two) as second:
            asked = [r async for r in first.send_message(ask("how far is Paris?"))]
            task = asked[0].task
            assert asked[-1].status_update.status.state == TASK_STATE_INPUT_REQUIRED
            answered = [r async for r in second.send_message(ask("Lyon", task=task.id, context=task.context_id))]
            assert answered[-1].status_update.status.state == TASK_STATE_COMPLETED
            done = await first.get_task(GetTaskRequest(id=task.id))
    finally:
        stop_workers(started)
    assert said(done.artifacts[0]) == "From Lyon, Paris is 400 km away."
    assert [said(m) for m in done.history] == ["how far is Paris?", "Where are you?", "Lyon"]
