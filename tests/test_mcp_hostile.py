"""A hostile MCP server costs its own tools, nothing else: real servers written with the
``mcp`` SDK's low-level ``Server`` over stdio (``tests/fixtures/mcp_hostile.py``), each beside
a local tool, through agent runs with a scripted model. Every run is bounded in time, so a
hang is a failure here rather than a stuck suite."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

import pytest

from reactchat import Agent, RunResult, ScriptedModel, tool
from reactchat.mcp import MCPServer
from reactchat.mcp._client import MAX_PAGES, MAX_TOOLS
from reactchat.mcp._tools import MAX_SCHEMA_DEPTH

HOSTILE = str(Path(__file__).parent / "fixtures" / "mcp_hostile.py")
#: what one turn may take here, the start of a Python MCP server on a loaded machine included
TURN_SECONDS = 90


@tool
def tally(items: list[str]) -> str:
    """Count the items."""
    return f"{len(items)} items"


def hostile(mode: str, *args: str, **options: float) -> MCPServer:
    return MCPServer(sys.executable, [HOSTILE, mode, *args], name=mode, **options)


def call(name: str, arguments: dict[str, object]) -> str:
    return f" I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


FINAL = " Done.\nFinal Answer: done"


async def run(server: MCPServer, replies: list[str], question: str = "go") -> tuple[ScriptedModel, RunResult]:
    """One turn of an agent with ``tally`` and ``server``, within ``TURN_SECONDS``."""
    model = ScriptedModel(replies)
    agent = Agent(model=model, tools=[tally, server])
    try:
        async with asyncio.timeout(TURN_SECONDS):
            result = await agent.arun(question)
    finally:
        await server.aclose()
    return model, result


def offered(model: ScriptedModel) -> list[str]:
    return [t.name for t in model.requests[0].react_tools if t.name != "ask_user"]  # the agent's own


async def test_endless_pages_are_cut_and_the_turn_finishes(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
        model, result = await run(hostile("pages"), [call("tally", {"items": ["a", "b"]}), FINAL])
    assert result.status == "done" and result.steps[0].observation == "2 items"
    assert offered(model) == ["tally", *(f"t{n}" for n in range(1, MAX_PAGES + 1))]
    assert f"its tool listing was cut after {MAX_PAGES} pages" in caplog.text


async def test_a_listing_that_never_answers_costs_that_servers_tools_only(caplog: pytest.LogCaptureFixture) -> None:
    server = hostile("silent", list_timeout=2)
    for _ in range(2):  # the next turn tries the server again, and is bounded the same way
        with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
            model, result = await run(server, [call("tally", {"items": ["a"]}), FINAL])
        assert result.status == "done" and result.steps[0].observation == "1 items"
        assert offered(model) == ["tally"]
    assert "MCP server silent did not list its tools within 2 s; its tools are left out" in caplog.text


async def test_a_schema_too_deep_to_check_leaves_out_that_tool_only(caplog: pytest.LogCaptureFixture) -> None:
    # 97 levels pass the SDK's JSON parser but not a recursive validator under Python's limit
    with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
        model, result = await run(hostile("deep", "97"), [call("ping", {}), FINAL])
    assert offered(model) == ["tally", "ping"]
    assert result.status == "done" and result.steps[0].observation == "pong"
    assert f"tool 'deep' is left out, its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels" in caplog.text


async def test_a_listing_the_server_cannot_send_costs_that_servers_tools_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 5,000 levels: the SDK's server cannot serialise its own listing and answers an error
    with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
        model, result = await run(hostile("deep", "5000"), [call("tally", {"items": []}), FINAL])
    assert offered(model) == ["tally"]
    assert result.status == "done" and result.steps[0].observation == "0 items"
    assert "MCP server deep could not list its tools" in caplog.text


async def test_a_ref_loop_is_an_error_observation() -> None:
    replies = [call("loop", {"x": 1}), call("ping", {}), FINAL]
    _, result = await run(hostile("loop"), replies)
    looped, pinged = result.steps[0], result.steps[1]
    assert looped.is_error
    assert "loop cannot be called: its input schema cannot be resolved" in (looped.observation or "")
    assert pinged.observation == "pong" and result.status == "done"


async def test_twenty_thousand_tools_offer_the_first_ones_and_turns_stay_quick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = hostile("many", "20000")
    model = ScriptedModel([call("t7", {}), FINAL, call("tally", {"items": ["a"]}), FINAL])
    agent = Agent(model=model, tools=[tally, server])
    try:
        with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
            async with asyncio.timeout(TURN_SECONDS):
                first = await agent.arun("go")
        started = time.perf_counter()
        second = await agent.arun("again", first.session)
        seconds = time.perf_counter() - started
    finally:
        await server.aclose()
    assert first.steps[0].observation == "t7" and second.steps[0].observation == "1 items"
    assert len(offered(model)) == 1 + MAX_TOOLS
    assert f"MCP server many lists more than {MAX_TOOLS} tools; the first {MAX_TOOLS} are offered" in caplog.text
    assert seconds < 5, f"a turn after the listing took {seconds:.1f} s"
