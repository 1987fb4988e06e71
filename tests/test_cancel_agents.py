"""A plan-and-execute or Reflexion turn the caller stops ends ``cancelled``, like a plain one:
its nested run records its own cancelled answer, and the turn itself does too."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from reactchat import Agent, Reflexion, ScriptedModel, tool


def blocking_tool() -> tuple[Any, threading.Event, threading.Event]:
    started, release = threading.Event(), threading.Event()

    @tool(timeout=30)
    def slow_lookup(key: str) -> str:
        """Look a key up in a slow database."""
        started.set()
        release.wait(10)
        return f"value of {key}"

    return slow_lookup, started, release


ANSWER = '{"action": "answer", "answer": "hello"}'
LOOKUP = ' Look it up.\nAction: slow_lookup\nAction Input: {"key": "rose"}'


async def cancel_mid_tool(agent: Agent, started: threading.Event) -> str:
    session = await agent.store.create_session()
    turn = asyncio.create_task(agent.arun("What is the rose's value?", session))
    assert await asyncio.to_thread(started.wait, 10)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    return session


async def test_a_cancelled_plan_and_execute_turn_ends_cancelled(store_url: str) -> None:
    slow_lookup, started, release = blocking_tool()
    plan = json.dumps({"steps": [{"task": "look the rose up"}, {"task": "report it"}]})
    agent = Agent(model=ScriptedModel([plan, LOOKUP]), tools=[slow_lookup], plan=True, store=store_url)
    try:
        session = await cancel_mid_tool(agent, started)
        (turn,) = (await agent.state(session)).turns
        assert turn.status == "cancelled"
        cancelled = [(e.agent, e.reason) for e in turn.events if e.type == "answer"]
        assert cancelled == [("reactchat/step 1", "cancelled"), ("reactchat", "cancelled")]
        # the next message starts a new turn; the cancelled one is not finished behind it
        replies = [json.dumps({"steps": [{"task": "greet"}]}), " Hi.\nFinal Answer: hello", ANSWER]
        later = Agent(model=ScriptedModel(replies), tools=[slow_lookup], plan=True, store=agent.store)
        result = await later.arun("hello", session)
        assert (result.status, result.turn, result.answer) == ("done", 2, "hello")
    finally:
        release.set()
        await agent.store.close()


async def test_a_cancelled_reflexion_turn_ends_cancelled(store_url: str) -> None:
    slow_lookup, started, release = blocking_tool()
    agent = Agent(
        model=ScriptedModel([LOOKUP]),
        tools=[slow_lookup],
        reflect=Reflexion(evaluator=lambda answer: True, max_trials=2),
        store=store_url,
    )
    try:
        session = await cancel_mid_tool(agent, started)
        (turn,) = (await agent.state(session)).turns
        assert turn.status == "cancelled"
        cancelled = [(e.agent, e.reason) for e in turn.events if e.type == "answer"]
        assert cancelled == [("reactchat/trial 1", "cancelled"), ("reactchat", "cancelled")]
    finally:
        release.set()
        await agent.store.close()
