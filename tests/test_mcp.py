"""MCP servers as tool sources: real servers written with the ``mcp`` SDK, over stdio and
streamable HTTP on loopback (``tests/fixtures/mcp_server.py``)."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from mcp_latency import children  # the benchmark counts the same way
from reactchat import Agent, ScriptedModel, tool
from reactchat.mcp import MCPConfigError, MCPServer, load_servers
from reactchat.models import tool_call

SERVER = str(Path(__file__).parent / "fixtures" / "mcp_server.py")


def stdio(name: str = "flowers", **options: object) -> MCPServer:
    return MCPServer(sys.executable, [SERVER, "stdio"], name=name, **options)  # type: ignore[arg-type]


def call(name: str, arguments: dict[str, object]) -> str:
    return f" I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


FINAL = " Done.\nFinal Answer: done"


# ----------------------------------------------------------------- schemas and calls


async def test_tools_keep_their_schemas() -> None:
    async with stdio() as server:
        tools = {t.name: t for t in await server.list_tools()}
    assert set(tools) == {"ping", "paint", "place_order", "stats", "fail", "sleep", "crash", "started"}
    assert tools["ping"].input_schema["properties"] == {}
    paint = tools["paint"].input_schema
    assert paint["properties"]["color"]["enum"] == ["red", "white", "yellow"] and paint["required"] == ["color"]
    order = tools["place_order"].input_schema
    assert order["properties"]["order"] == {"$ref": "#/$defs/Order"}
    assert order["$defs"]["Order"]["properties"]["deliver_to"] == {"$ref": "#/$defs/Address"}


async def test_tools_take_their_effect_class_from_the_servers_hints() -> None:
    async with stdio() as server:
        tools = {t.name: t for t in await server.list_tools()}
    assert (tools["ping"].effect, tools["paint"].effect, tools["fail"].effect) == ("read", "idempotent", "unsafe")


def test_an_invalid_schema_leaves_out_one_tool_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([call("ping", {}), FINAL])
    server = stdio()
    with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
        result = Agent(model=model, tools=[server]).run("ping it")
    assert "tool 'broken' is left out, its input schema is invalid" in caplog.text
    assert "broken" not in [t.name for t in model.requests[0].react_tools]
    assert result.steps[0].observation == "pong"


def test_calls_in_the_react_protocol_are_validated_against_the_schema() -> None:
    order = {"order": {"stems": 12, "deliver_to": {"street": "1 rue des Roses", "city": "Lyon"}}}
    model = ScriptedModel(
        [
            call("paint", {"color": "blue"}),
            call("paint", {"color": "white"}),
            call("paint", {"color": "red", "shade": 3}),
            call("place_order", {"order": {"stems": 0}}),
            call("place_order", order),
            call("stats", {"values": [1, 2, 6]}),
            call("fail", {"reason": "out of roses"}),
            FINAL,
        ]
    )
    result = Agent(model=model, tools=[stdio()], max_steps=10).run("paint and order")
    observations = [(s.observation or "", s.is_error) for s in result.steps[:-1]]
    assert observations[0][1] and "'blue' is not one of ['red', 'white', 'yellow']" in observations[0][0]
    assert observations[1] == ("a white rose", False)
    assert observations[2] == ("a red rose of shade 3", False)  # the optional argument
    assert observations[3][1] and "'deliver_to' is a required property" in observations[3][0]
    assert "stems: 0 is less than the minimum of 1" in observations[3][0]
    assert observations[4] == ("12 stems to 1 rue des Roses, Lyon", False)
    assert json.loads(observations[5][0]) == {"count": 3, "mean": 3.0}  # structured output
    assert observations[6][1] and "fail" in observations[6][0]


def test_native_protocol_sends_the_json_schemas() -> None:
    model = ScriptedModel(
        [tool_call("place_order", {"order": {"stems": 2, "deliver_to": {"street": "A", "city": "B"}}}), "done"]
    )
    result = Agent(model=model, tools=[stdio()], protocol="native").run("order")
    offered = {t.name: t.input_schema for t in model.requests[0].tools}
    assert offered["place_order"]["$defs"]["Address"]["required"] == ["street", "city"]
    assert offered["paint"]["properties"]["shade"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "default": None,
        "title": "Shade",
    }
    assert result.steps[0].observation == "2 stems to A, B"


def test_names_that_collide_get_the_server_prefix() -> None:
    @tool
    def ping() -> str:
        """Local ping."""
        return "local pong"

    model = ScriptedModel([call("ping", {}), call("a__ping", {}), call("b__paint", {"color": "red"}), FINAL])
    agent = Agent(model=model, tools=[ping, stdio("a"), stdio("b")])
    result = agent.run("ping")
    names = [t.name for t in model.requests[0].react_tools]
    assert "a__ping" in names and "b__ping" in names and names.count("ping") == 1
    assert "paint" not in names and {"a__paint", "b__paint"} <= set(names)  # offered by both servers
    assert [s.observation for s in result.steps[:3]] == ["local pong", "pong", "a red rose"]


# ------------------------------------------------------------- crashes and hangs


def test_a_crashed_server_is_an_observation_and_the_run_goes_on() -> None:
    model = ScriptedModel([call("crash", {}), call("ping", {}), FINAL])
    result = Agent(model=model, tools=[stdio()]).run("crash it")
    crashed, after = result.steps[0], result.steps[1]
    assert crashed.is_error and "stopped during the call" in (crashed.observation or "")
    assert after.observation == "pong" and result.answer == "done"


async def test_restart_starts_a_new_process() -> None:
    async with stdio() as server:
        before, _ = await server.call("started", {})
        text, is_error = await server.call("crash", {})
        assert is_error and "started again on the next call" in text
        after, is_error = await server.call("started", {})
    assert not is_error and after.split("pid ")[1] != before.split("pid ")[1]


async def test_a_hung_call_times_out_and_the_server_is_restarted() -> None:
    async with stdio(timeout=1) as server:
        before, _ = await server.call("started", {})
        started = time.perf_counter()
        text, is_error = await server.call("sleep", {"seconds": 30})
        assert is_error and "did not return within 1 s" in text
        assert time.perf_counter() - started < 5
        after, is_error = await server.call("started", {})
    assert not is_error and after != before


async def test_a_server_that_cannot_start_offers_no_tools(caplog: pytest.LogCaptureFixture) -> None:
    server = MCPServer("/nonexistent/mcp-server", name="ghost")
    with caplog.at_level(logging.WARNING, logger="reactchat.mcp"):
        assert await server.list_tools() == []
    assert "MCP server ghost could not be started" in caplog.text
    text, is_error = await server.call("anything", {})
    assert is_error and "could not be started" in text


async def test_open_close_cycles_leave_no_process() -> None:
    # 5 here (each start of a Python MCP server costs about a second of CPU);
    # benchmarks/mcp_latency.py runs the 50 cycles and counts the processes left
    before = set(children())
    for _ in range(5):
        server = stdio()
        text, _ = await server.call("ping", {})
        assert text == "pong"
        await server.aclose()
    assert set(children()) - before == set()


def test_sync_runs_use_the_server_run_after_run() -> None:
    server = stdio()
    for _ in range(2):
        result = Agent(model=ScriptedModel([call("ping", {}), FINAL]), tools=[server]).run("ping")
        assert result.steps[0].observation == "pong" and result.answer == "done"


# ----------------------------------------------------------------- streamable HTTP


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_http(port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the MCP HTTP test server did not start")


@pytest.fixture
def http_port() -> Iterator[tuple[int, list[subprocess.Popen[bytes]]]]:
    port = _free_port()
    processes = [_start_http(port)]
    yield port, processes
    for process in processes:
        process.terminate()
        process.wait(10)


def test_http_server_in_a_run(http_port: tuple[int, list[subprocess.Popen[bytes]]]) -> None:
    port, _ = http_port
    model = ScriptedModel([call("stats", {"values": [2, 4]}), FINAL])
    server = MCPServer(url=f"http://127.0.0.1:{port}/mcp", name="remote")
    result = Agent(model=model, tools=[server]).run("stats")
    assert json.loads(result.steps[0].observation or "") == {"count": 2, "mean": 3.0}


async def test_an_expired_http_session_is_initialised_again(
    http_port: tuple[int, list[subprocess.Popen[bytes]]], caplog: pytest.LogCaptureFixture
) -> None:
    port, processes = http_port
    # the initialize handshake gives a session id; a restarted server no longer knows it
    async with MCPServer(url=f"http://127.0.0.1:{port}/mcp", name="remote", mode="legacy") as server:
        before, _ = await server.call("started", {})
        processes[0].terminate()
        processes[0].wait(10)
        processes.append(_start_http(port))
        with caplog.at_level(logging.INFO, logger="reactchat.mcp"):
            after, is_error = await server.call("started", {})
    assert not is_error and after != before
    assert "the session expired; initialising a new one" in caplog.text


async def test_fifty_http_open_close_cycles(http_port: tuple[int, list[subprocess.Popen[bytes]]]) -> None:
    port, _ = http_port
    for _ in range(50):
        async with MCPServer(url=f"http://127.0.0.1:{port}/mcp", name="remote") as server:
            assert await server.call("ping", {}) == ("pong", False)


# ------------------------------------------------------------------ configuration


def test_mcp_servers_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWERS_TOKEN", "secret")
    config = {
        "mcpServers": {
            "local": {"command": sys.executable, "args": [SERVER, "stdio"], "env": {"A": "1"}},
            "remote": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${FLOWERS_TOKEN}"}},
            "off": {"command": "nothing", "disabled": True},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("REACTCHAT_MCP", str(path))
    local, remote = load_servers()
    assert (local.name, local.command, local.args, local.env) == (
        "local",
        sys.executable,
        [SERVER, "stdio"],
        {"A": "1"},
    )
    assert (remote.name, remote.url, remote.headers) == (
        "remote",
        "http://127.0.0.1:1/mcp",
        {"Authorization": "Bearer secret"},
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"servers": {}}, 'no "mcpServers" object'),
        ({"mcpServers": {"x": {"args": []}}}, 'needs "command"'),
        ({"mcpServers": {"x": {"url": "http://h/mcp", "type": "sse"}}}, "SSE transport is not supported"),
        (
            {"mcpServers": {"x": {"command": "c", "env": {"K": "${NOT_SET_ANYWHERE}"}}}},
            r"\$\{NOT_SET_ANYWHERE\}, which is not set",
        ),
        ({"mcpServers": {"x": {"command": "c", "args": "one string"}}}, "args must be a list of strings"),
    ],
)
def test_bad_mcp_servers_files_say_what_to_fix(tmp_path: Path, config: object, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    with pytest.raises(MCPConfigError, match=message):
        load_servers(path)


def test_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("{mcpServers: nope")
    with pytest.raises(MCPConfigError, match="not valid JSON"):
        load_servers(path)
    with pytest.raises(MCPConfigError, match="cannot read"):
        load_servers(tmp_path / "missing.json")


# ------------------------------------------------------- reactchat as an MCP server


async def test_reactchat_mcp_serves_the_agent_as_one_tool(tmp_path: Path) -> None:
    replies = [
        ' I need the city.\nAction: ask_user\nAction Input: {"question": "Which city?"}',
        ' Now I can compute.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',
        " I know it.\nFinal Answer: 92.184 in Lyon",
    ]
    script = tmp_path / "replies.txt"
    script.write_text("\n---\n".join(replies), encoding="utf-8")
    command = ["-m", "reactchat.cli", "mcp", "--model", f"scripted:{script}", "--db", str(tmp_path / "s.db")]
    async with MCPServer(sys.executable, command, name="reactchat", env={"HOME": str(tmp_path)}) as server:
        (ask,) = await server.list_tools()
        assert ask.name == "ask_agent" and set(ask.input_schema["properties"]) == {"question", "session"}
        text, is_error = await server.call("ask_agent", {"question": "Price of roses with 15%?"})
        waiting = json.loads(text)
        assert not is_error and waiting["status"] == "waiting" and waiting["question"] == "Which city?"
        text, is_error = await server.call("ask_agent", {"question": "Lyon", "session": waiting["session"]})
    done = json.loads(text)
    assert (done["status"], done["answer"], done["session"]) == ("done", "92.184 in Lyon", waiting["session"])
