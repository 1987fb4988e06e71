"""Cancellation that stops the spending: the provider's connection is closed, the local
model stops generating, the turn is recorded as cancelled and the session goes on."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fixtures.slow_stream import SlowStream
from reactchat import Agent, ScriptedModel, tool
from reactchat.messages import Request, UserMessage
from reactchat.models.local import LocalModel
from reactchat.models.openai import OpenAIModel
from reactchat.server import ServerConfig, create_app
from server_support import parse_sse, running


async def test_a_cancelled_call_closes_the_provider_connection() -> None:
    with SlowStream() as server:
        for stream in (True, False):
            model = OpenAIModel("slow-model", api_key="sk-test", base_url=f"{server.url}/v1", stream=stream)
            call = asyncio.create_task(model.complete(Request(messages=[UserMessage(content="Tell me about roses.")])))
            assert await asyncio.to_thread(server.wait_streaming)
            await asyncio.sleep(0.1)
            call.cancel()
            cancelled_at = time.monotonic()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            count = len(server.started)
            assert await asyncio.to_thread(server.wait_closed, count, 5.0), f"stream={stream}: still connected"
            assert server.closed[-1] - cancelled_at < 1.0
            server._first.clear()


async def test_a_cancelled_local_call_stops_generating_and_frees_the_model() -> None:
    model = LocalModel(n_threads=1, max_tokens=3000, grammar=False, n_ctx=4096)
    # cancelled once its text has begun, not after a fixed pause: on a fast machine a
    # short reply could be over before the pause ends
    generating = asyncio.Event()
    long = Request(
        messages=[UserMessage(content="Count from 1 to 1000, one number per line.")],
        on_delta=lambda text: generating.set(),
    )
    await asyncio.to_thread(model.load)
    call = asyncio.create_task(model.complete(long))
    await asyncio.wait_for(generating.wait(), 60)
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    deadline = time.monotonic() + 10
    while not model.calls and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    stats = model.last_stats
    assert stats is not None and stats.stop_reason == "cancelled"
    assert stats.output_tokens < 3000  # stopped at the next token, not at max_tokens
    # the model is free: the next call runs to its end
    short = Request(messages=[UserMessage(content="Say hello.")], max_tokens=8)
    reply = await asyncio.wait_for(model.complete(short), 60)
    assert reply.usage is not None and 0 < reply.usage.output_tokens <= 8


# ------------------------------------------------------------ a turn, cancelled


def slow_agent(server: SlowStream, store: str, **options: Any) -> Agent:
    model = OpenAIModel("slow-model", api_key="sk-test", base_url=f"{server.url}/v1", retries=0)
    return Agent(model=model, store=store, **options)


async def test_cancelling_a_turn_mid_model_call_records_it_and_the_session_goes_on(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    with SlowStream() as server:
        agent = slow_agent(server, store)
        session = await agent.store.create_session()
        turn = asyncio.create_task(agent.arun("Tell me about roses.", session))
        assert await asyncio.to_thread(server.wait_streaming)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        assert await asyncio.to_thread(server.wait_closed, 1, 5.0), "the provider still streams"
        state = await agent.state(session)
        (cancelled,) = state.turns
        assert cancelled.status == "cancelled"
        assert [e.type for e in cancelled.events] == ["user", "answer"]

    # the next message is a new turn, and the cancelled one is not in its history
    later = Agent(model=ScriptedModel([" Simple.\nFinal Answer: hello"]), store=store)
    result = await later.arun("hello", session)
    assert result.status == "done" and result.turn == 2
    assert "Tell me about roses." not in str(later.model.requests[0].messages)  # type: ignore[attr-defined]


async def test_cancelling_mid_tool_abandons_the_thread_and_resume_reports_the_call(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    @tool(timeout=30)
    def slow_lookup(key: str) -> str:
        """Look a key up in a slow database."""
        started.set()
        release.wait(10)
        return f"value of {key}"

    store = f"sqlite:///{tmp_path / 's.db'}"
    act = ' Look it up.\nAction: slow_lookup\nAction Input: {"key": "rose"}'
    agent = Agent(model=ScriptedModel([act]), tools=[slow_lookup], store=store)
    session = await agent.store.create_session()
    turn = asyncio.create_task(agent.arun("What is the rose's value?", session))
    assert await asyncio.to_thread(started.wait, 10)
    begun = time.monotonic()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert time.monotonic() - begun < 1.0, "cancel waited for the thread"
    state = await agent.state(session)
    assert state.turns[0].status == "cancelled"
    release.set()

    # resume (asked for explicitly) continues the cancelled turn; the cut-off call (unsafe, the
    # default) is not silently run again: it is in doubt until the user says what happened
    asking = Agent(model=ScriptedModel([]), tools=[slow_lookup], store=store)
    doubt = await asking.resume(session)
    assert doubt.status == "waiting" and doubt.pending is not None and doubt.pending.kind == "in_doubt"
    resumer = Agent(model=ScriptedModel([" It was cut off.\nFinal Answer: unknown"]), tools=[slow_lookup], store=store)
    result = await resumer.arun("it did not run", session)
    assert result.status == "done" and result.turn == 1
    observation = next(e for e in result.events if e.type == "observation")
    assert observation.text == "it did not run"


def test_a_second_client_cancels_a_streaming_turn_over_http(tmp_path: Path) -> None:
    with SlowStream() as server:
        store = f"sqlite:///{tmp_path / 's.db'}"
        app = create_app(lambda s: slow_agent(server, s), config=ServerConfig(store=store))
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as first, httpx.Client(base_url=url) as second:
            session = first.post("/v1/sessions").json()["session"]
            frames: list[tuple[str, dict[str, Any]]] = []

            def follow() -> None:
                with first.stream("POST", f"/v1/sessions/{session}/messages", json={"message": "roses?"}) as reply:
                    frames.extend(parse_sse(reply.read().decode()))

            reader = threading.Thread(target=follow)
            reader.start()
            assert server.wait_streaming()
            stopped = second.post(f"/v1/sessions/{session}/cancel")
            assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled"
            assert server.wait_closed(1, 5.0), "the provider still streams"
            reader.join(10)
            assert frames[-1][0] == "end" and frames[-1][1]["status"] == "cancelled"
            view = second.get(f"/v1/sessions/{session}").json()
            assert view["status"] == "cancelled" and view["turns"][0]["status"] == "cancelled"
            again = second.post(f"/v1/sessions/{session}/cancel")
            assert again.status_code == 409


async def test_the_local_model_streams_its_text_as_it_generates() -> None:
    model = LocalModel(n_threads=1, grammar=False)
    pieces: list[str] = []
    request = Request(messages=[UserMessage(content="Name three flowers.")], max_tokens=24, stop=["\n\n\n"])
    request.on_delta = pieces.append
    reply = await model.complete(request)
    assert len(pieces) > 3, pieces
    assert "".join(pieces) == reply.text


async def test_an_agent_on_the_local_model_streams_deltas_before_each_step() -> None:
    agent = Agent(model=LocalModel(n_threads=1, max_tokens=48), ask_user=False)
    deltas, steps = [], []
    async for event in agent.stream("Say hello.", deltas=True):
        (deltas if event.type == "delta" else steps).append(event)
    assert deltas and steps[-1].type == "answer"
    streamed = "".join(d.text for d in deltas)  # type: ignore[attr-defined]
    assert steps[-1].text in streamed  # type: ignore[attr-defined]


def test_a_server_shutting_down_leaves_its_turns_interrupted_not_cancelled(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    with SlowStream() as server:
        app = create_app(lambda s: slow_agent(server, s), config=ServerConfig(store=store))
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            session = client.post("/v1/sessions").json()["session"]

            def follow() -> None:
                with contextlib.suppress(httpx.HTTPError), httpx.Client(base_url=url, timeout=30) as own:
                    own.post(f"/v1/sessions/{session}/messages", json={"message": "roses?"})

            reader = threading.Thread(target=follow)
            reader.start()
            assert server.wait_streaming()
        reader.join(10)
        assert server.wait_closed(1, 5.0)

    async def status() -> str:
        agent = Agent(model=ScriptedModel([]), store=store)
        state = await agent.state(session)
        return state.turns[0].status

    assert asyncio.run(status()) == "interrupted"
