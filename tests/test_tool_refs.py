"""Tools from elsewhere: by reference (``--tools module:name``), LangChain tools, ``--mcp`` files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from langchain_core.tools import StructuredTool
from langchain_core.tools import tool as lc_tool
from pydantic import BaseModel, Field

from reactchat import Agent, ScriptedModel
from reactchat.cli.tool_refs import ToolReferenceError, tools_by_reference

SERVER = str(Path(__file__).parent / "fixtures" / "mcp_server.py")

TOOLS_MODULE = '''
from reactchat import Agent, ScriptedModel, tool

@tool
def lookup(word: str) -> str:
    """Look a word up in the florists' glossary."""
    return {"stem": "the stalk of a flower"}.get(word, "unknown word")

def shout(text: str) -> str:
    """Repeat the text in capitals."""
    return text.upper()

ALL = [lookup, shout]
NOT_A_TOOL = 42
botanist = Agent(model=ScriptedModel(["Final Answer: the stalk"]), name="botanist", description="Knows plants.")
'''


def call(name: str, arguments: dict[str, object]) -> str:
    return f" I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


FINAL = " Done.\nFinal Answer: done"


@pytest.fixture
def tools_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "florist"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


# ------------------------------------------------------------------ by reference


def test_tools_by_reference(tools_module: Path) -> None:
    found = tools_by_reference("florist.tools:lookup, florist.tools:shout")
    model = ScriptedModel([call("lookup", {"word": "stem"}), call("shout", {"text": "hi"}), FINAL])
    result = Agent(model=model, tools=found).run("what is a stem?")
    assert [s.observation for s in result.steps[:2]] == ["the stalk of a flower", "HI"]
    lookup, shout = tools_by_reference("florist.tools:ALL")
    assert lookup.name == "lookup" and shout("hi") == "HI"


def test_an_agent_by_reference_is_a_sub_agent(tools_module: Path) -> None:
    found = tools_by_reference("florist.tools:botanist")
    model = ScriptedModel([call("botanist", {"task": "what is a stem?"}), FINAL])
    result = Agent(model=model, tools=found, name="boss").run("what is a stem?")
    assert result.steps[0].observation == "the stalk"
    assert "boss/botanist" in {event.agent for event in result.events}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("florist.tools", "write a tool reference as module:name"),
        ("florist.nothing:x", "cannot import florist.nothing"),
        ("florist.tools:missing", "florist.tools has no missing"),
        ("florist.tools:NOT_A_TOOL", "is a int, not a tool, a function, a LangChain tool or an agent"),
    ],
)
def test_bad_references_say_what_is_wrong(tools_module: Path, spec: str, message: str) -> None:
    with pytest.raises(ToolReferenceError, match=message):
        tools_by_reference(spec)


# --------------------------------------------------------------------- LangChain


class Weather(BaseModel):
    city: str = Field(description="the city")
    unit: Literal["c", "f"] = "c"


def test_langchain_tools_work_unchanged() -> None:
    calls: list[str] = []

    @lc_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    def weather_sync(city: str, unit: str = "c") -> str:
        calls.append("sync")
        return f"18 {unit} in {city}"

    async def weather_async(city: str, unit: str = "c") -> str:
        calls.append("async")
        return f"18 {unit} in {city}"

    weather = StructuredTool.from_function(
        func=weather_sync, coroutine=weather_async, name="weather", description="Weather now.", args_schema=Weather
    )
    model = ScriptedModel(
        [
            call("multiply", {"a": 6, "b": 7}),
            call("multiply", {"a": "six", "b": 7}),
            call("weather", {"city": "Lyon", "unit": "k"}),
            call("weather", {"city": "Lyon"}),
            FINAL,
        ]
    )
    result = Agent(model=model, tools=[multiply, weather]).run("multiply and weather")
    offered = {t.name: t for t in model.requests[0].react_tools}
    assert offered["multiply"].description == "Multiply two integers."
    assert offered["weather"].input_schema["properties"]["unit"]["enum"] == ["c", "f"]
    steps = result.steps
    assert steps[0].observation == "42"
    assert steps[1].is_error and "a: Input should be a valid integer" in (steps[1].observation or "")
    assert steps[2].is_error and "unit: Input should be 'c' or 'f'" in (steps[2].observation or "")
    assert steps[3].observation == "18 c in Lyon"
    assert calls == ["async"]  # ainvoke used the coroutine; the invalid call never ran


def test_a_langchain_tool_with_a_json_schema() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    capital = StructuredTool.from_function(
        func=lambda city: f"{city} is a capital", name="capital", description="Is it a capital?", args_schema=schema
    )
    model = ScriptedModel([call("capital", {}), call("capital", {"city": "Paris"}), FINAL])
    result = Agent(model=model, tools=[capital]).run("capital?")
    assert result.steps[0].is_error and "'city' is a required property" in (result.steps[0].observation or "")
    assert result.steps[1].observation == "Paris is a capital"


# ------------------------------------------------------------------- the command


def reactchat(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1", **(env or {})},
    )


def script(path: Path, *replies: str) -> str:
    path.write_text("\n---\n".join(replies), encoding="utf-8")
    return f"scripted:{path}"


def test_ask_with_tools_by_reference_and_an_mcp_file(tools_module: Path) -> None:
    config = tools_module / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"flowers": {"command": sys.executable, "args": [SERVER, "stdio"]}}}))
    model = script(tools_module / "r.txt", call("lookup", {"word": "stem"}), call("paint", {"color": "red"}), FINAL)
    done = reactchat(
        "ask", "go", "--model", model, "--db", str(tools_module / "s.db"), "--json",
        "--tools", "florist.tools:lookup", "--mcp", str(config),
        cwd=tools_module, env={"PYTHONPATH": str(tools_module)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [s["observation"] for s in steps[:2]] == ["the stalk of a flower", "a red rose"]


def test_ask_reads_reactchat_mcp_and_reports_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "mcp.json"
    bad.write_text('{"mcpServers": {"x": {"args": []}}}')
    model = script(tmp_path / "r.txt", FINAL)
    done = reactchat(
        "ask", "go", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path, env={"REACTCHAT_MCP": str(bad)}
    )
    assert done.returncode == 1
    assert "reactchat: error:" in done.stderr and 'needs "command"' in done.stderr


def test_ask_with_a_search_backend_missing_its_key(tmp_path: Path) -> None:
    model = script(tmp_path / "r.txt", FINAL)
    done = reactchat(
        "ask", "go", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path, env={"REACTCHAT_SEARCH": "brave"}
    )
    assert done.returncode == 1 and "set BRAVE_API_KEY" in done.stderr


FETCH_URL_OFFERED = [
    ("local", None, False),  # the embedded default guesses addresses
    ("local:gemma-270m", None, False),
    ("local:smollm2-135m", None, False),
    ("local", "reactchat.toolbox:fetch_url", True),  # asked for by name
    ("local:/models/big.gguf", None, True),
    ("openai:gpt-4o-mini", None, True),
]


@pytest.fixture
def no_tools_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the tools a test names (and the web extra's ``fetch_url``), none from the environment."""
    for name in ("REACTCHAT_TOOLS", "REACTCHAT_SEARCH", "REACTCHAT_MCP"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("model", "tools", "offered"), FETCH_URL_OFFERED)
@pytest.mark.usefixtures("no_tools_from_env")
def test_the_command_offers_fetch_url_except_to_the_embedded_models(
    model: str, tools: str | None, offered: bool
) -> None:
    from reactchat.cli.main import command_tools
    from reactchat.toolbox import calculator, fetch_url

    found, reads_links = command_tools(model, tools)
    assert reads_links  # the web extra is part of the test environment: links are read either way
    assert found[0] is calculator and found.count(fetch_url) == int(offered)


@pytest.mark.parametrize(("model", "tools", "offered"), FETCH_URL_OFFERED)
@pytest.mark.usefixtures("no_tools_from_env")
def test_the_server_offers_fetch_url_as_the_command_does(model: str, tools: str | None, offered: bool) -> None:
    from reactchat.cli.tool_refs import configured_tools
    from reactchat.server import ServerConfig, default_agent
    from reactchat.store.memory import MemoryStore
    from reactchat.toolbox import fetch_url

    # what ``reactchat serve`` (and ``app_from_env``) puts in the config
    config = ServerConfig(model=model, tools=configured_tools(tools))
    agent = default_agent(config, MemoryStore())
    assert [tool.name for tool in agent.tools].count("fetch_url") == int(offered)
    assert len(agent.hooks.new_message) == 1  # links in messages are read either way
    assert fetch_url in config.tools  # the configuration itself is left as it was
