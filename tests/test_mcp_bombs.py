"""Compressed bombs from an MCP server over HTTP: a few KB on the wire that unpack to
hundreds of MB. The server's tools are left out (or its call is an error observation),
the rest of the agent works, and the process grows by less than 50 MB (peak RSS in a
fresh child process, measured by ``benchmarks/fetch_bombs.py``).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel, tool
from reactchat.mcp import MCPServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from fetch_bombs import MCP_BOMBS, mcp_bomb_site, measure_mcp

# the probes start processes of their own
pytestmark = pytest.mark.slow

#: what each bomb unpacks to: far past the 16 MB bound of a response
BOMB_MB = 128

#: why each bomb is refused, as the log says it
REASONS = {
    "/gzip/mcp": "sent its response larger than the 16 MB limit",
    "/deflate/mcp": "sent its response larger than the 16 MB limit",
    "/zstd/mcp": "is compressed with zstd, which was not offered (only gzip, deflate)",
    "/gzip-gzip/mcp": "is compressed more than once (gzip, gzip)",
    # the SDK bounds each event of a stream itself, below this client's bound
    "/events-gzip/mcp": "Server-sent event exceeded the 1048576 byte limit",
    "/call-gzip/mcp": "sent its response larger than the 16 MB limit",
}


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with mcp_bomb_site(BOMB_MB) as base:
        yield base


@pytest.mark.parametrize("route", MCP_BOMBS)
def test_a_bomb_costs_the_client_process_little(site: str, route: str) -> None:
    result = measure_mcp(site, route)
    assert REASONS[route] in result["log"], result
    if route.startswith("/call"):  # listed honestly, then a bomb for the call's result
        assert result["outcome"].startswith("1 tools listed; the call: error: the MCP server at ")
        assert result["outcome"].endswith("16 MB limit; the call's result is not read")
    else:
        assert result["outcome"] == "0 tools listed"
        assert "its tools are left out of this turn" in result["log"]
    assert result["grew_mb"] < 50, result


@tool
def roses() -> str:
    """The price of a bouquet of roses."""
    return "80 dollars"


async def test_the_rest_of_the_agent_works(site: str, caplog: pytest.LogCaptureFixture) -> None:
    bombs = MCPServer(url=site + "/gzip-gzip/mcp", name="bombs")
    honest = MCPServer(url=site + "/honest/mcp", name="honest")
    call = " I ask.\nAction: {name}\nAction Input: {arguments}"
    model = ScriptedModel(
        [
            call.format(name="roses", arguments="{}"),
            call.format(name="echo", arguments=json.dumps({"text": "gzip read whole"})),
            " Done.\nFinal Answer: 80 dollars",
        ]
    )
    agent = Agent(model=model, tools=[roses, bombs, honest])
    with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
        result = await agent.arun("how much are roses?")
    assert result.answer == "80 dollars"
    assert [step.observation for step in result.steps[:2]] == ["80 dollars", "gzip read whole"]
    assert "is compressed more than once (gzip, gzip)" in caplog.text
    await bombs.aclose()
    await honest.aclose()
    await agent.store.close()
