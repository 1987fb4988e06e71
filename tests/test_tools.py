"""Tools: schema from the signature, validation before the call, context injection."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Literal

import pytest
from pydantic import BaseModel

from reactchat import Agent, RunContext, ScriptedModel, tool
from reactchat.messages import SystemMessage
from reactchat.protocols.packs import get_pack
from reactchat.protocols.react import _instructions, _ToolSet
from reactchat.toolbox import CalculatorError, calculator, evaluate
from reactchat.tools import Tool, ToolInputError, ToolTimeout
from reactchat.tools.threads import ToolThreads


@tool
def convert(value: float, unit: Literal["km", "mi"], ctx: RunContext, precision: int = 2) -> str:
    """Convert a distance.

    Args:
        value: the distance to convert
        unit: the unit of ``value``
        precision: digits after the point
    """
    factor = 1.609344 if unit == "mi" else 1 / 1.609344
    return f"{round(value * factor, precision)} (session {ctx.session[:4]})"


def test_schema_comes_from_signature_and_docstring() -> None:
    assert convert.name == "convert"
    assert convert.description == "Convert a distance."
    schema = convert.input_schema
    assert set(schema["properties"]) == {"value", "unit", "precision"}  # ctx is hidden
    assert schema["required"] == ["value", "unit"]
    assert schema["properties"]["unit"]["enum"] == ["km", "mi"]
    assert schema["properties"]["value"]["description"] == "the distance to convert"
    assert schema["properties"]["precision"]["default"] == 2


def test_arguments_are_validated_before_the_call() -> None:
    assert convert.validate({"value": "3", "unit": "mi"}) == {"value": 3.0, "unit": "mi", "precision": 2}
    with pytest.raises(ToolInputError, match="unit"):
        convert.validate({"value": 3, "unit": "parsec"})
    with pytest.raises(ToolInputError, match=r"Extra inputs|extra"):
        convert.validate({"value": 3, "unit": "km", "colour": "red"})
    with pytest.raises(ToolInputError, match="JSON object"):
        convert.validate("3 miles")


def test_run_context_is_injected() -> None:
    model = ScriptedModel(
        [' go\nAction: convert\nAction Input: {"value": 10, "unit": "mi"}', " ok\nFinal Answer: done"]
    )
    agent = Agent(model=model, tools=[convert])
    result = agent.run("10 miles in km?")
    assert result.steps[0].observation == f"16.09 (session {result.session[:4]})"


def test_async_tool_and_direct_call() -> None:
    @tool(timeout=1)
    async def double(n: int) -> int:
        """Double a number."""
        await asyncio.sleep(0)
        return n * 2

    model = ScriptedModel([' x\nAction: double\nAction Input: {"n": 21}', " x\nFinal Answer: 42"])
    result = Agent(model=model, tools=[double]).run("double 21")
    assert result.steps[0].observation == "42"
    assert asyncio.run(double.fn(n=2)) == 4


def test_plain_functions_are_accepted_as_tools() -> None:
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    model = ScriptedModel([" x\nAction: shout\nAction Input: hi there", " x\nFinal Answer: HI THERE"])
    result = Agent(model=model, tools=[shout]).run("shout")
    assert result.steps[0].observation == "HI THERE"


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="share a name"):
        Agent(model=ScriptedModel([]), tools=[calculator, calculator])


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("80.16 * 1.15", "92.184"),
        ("80.16 + 15%", "92.184"),
        ("80.16 * 115%", "92.184"),
        ("15% of 80.16", "12.024"),
        ("100 - 20%", "80"),
        ("7 % 3", "1"),
        ("2 ** 10", "1024"),
        ("2^10", "1024"),
        ("3 × 4 ÷ 2", "6"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(2.5555, 2)", "2.56"),
        ("0.1 + 0.2", "0.3"),
        ("-(3 - 5)", "2"),
        # what people and small models write
        ("2 to the power of 10", "1024"),
        ("the square root of 81", "9"),
        ("sqrt 81", "9"),
        ("9 squared", "81"),
        ("3.5 x 4", "14"),
        ("(2)x(3)", "6"),
        ("0x10", "16"),
        ("7 times 8 plus 5", "61"),
        ("144 divided by 12 minus 2", "10"),
        ("15 percent of 80", "12"),
        ("1,234 + 5,678", "6912"),
        ("1,234,567 * 2", "2469134"),
        ("max(1,234)", "234"),
    ],
)
def test_calculator(expression: str, expected: str) -> None:
    assert calculator(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "unknown function|unsupported"),
        ("open('/etc/passwd')", "unknown function|unsupported"),
        ("x + 1", "unknown name"),
        ("2 ** 100000", "exponent"),
        ("9 ** 999 * 9 ** 999 * 9 ** 999 * 9 ** 999 * 9 ** 999", "too large"),
        ("1 / 0", "division by zero"),
        ("1e308 * 10", "finite"),
        ("(1).__class__", "unsupported"),
        ("[1, 2]", "unsupported"),
        ("1 +", "not an arithmetic"),
        ("1" * 600, "longer than"),
    ],
)
def test_calculator_refuses_what_is_not_bounded_arithmetic(expression: str, message: str) -> None:
    with pytest.raises(CalculatorError, match=message):
        evaluate(expression)


class Box(BaseModel):
    width: float
    label: str = "box"


def test_validated_arguments_are_plain_values_whatever_the_parameter_types() -> None:
    @tool
    def scalars(n: int, x: float, flag: bool = False, name: str = "a") -> str:
        """Scalars only."""
        return f"{n} {x} {flag} {name}"

    @tool
    def nested(box: Box, count: int = 1) -> str:
        """A model as a parameter."""
        return box.label * count

    arguments = scalars.validate({"n": "2", "x": 3})
    assert arguments == {"n": 2, "x": 3.0, "flag": False, "name": "a"}
    assert type(arguments["x"]) is float and type(arguments["n"]) is int
    assert nested.validate({"box": {"width": "1.5"}}) == {"box": {"width": 1.5, "label": "box"}, "count": 1}


async def test_sync_tools_run_on_a_bounded_pool_and_a_late_call_never_runs() -> None:
    release = threading.Event()
    ran: list[int] = []

    @tool(timeout=0.2)
    def hang(n: int) -> str:
        """Wait until released."""
        ran.append(n)
        release.wait(5)
        return "late"

    threads = ToolThreads(2)
    calls = [hang.run({"n": i}, None, threads) for i in range(4)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ToolTimeout) for r in results)
    assert threads.threads == 2 and sorted(ran) == [0, 1]  # two hang on the only two threads
    release.set()
    await asyncio.sleep(0.2)
    assert sorted(ran) == [0, 1]  # the two that timed out while waiting for a thread never run


async def test_calls_waiting_for_a_busy_pool_run_in_turn_on_its_threads() -> None:
    @tool(timeout=2.0)
    def slow(n: int) -> str:
        """Take a moment."""
        time.sleep(0.05)
        return f"{n} on {threading.current_thread().name}"

    threads = ToolThreads(2)
    results = await asyncio.gather(*(slow.run({"n": i}, None, threads) for i in range(5)))
    assert results == [f"{i} on reactchat-tool" for i in range(5)]
    assert threads.threads == 2
    assert await slow.run({"n": 9}, None, threads) == "9 on reactchat-tool"  # an idle thread takes it
    assert threads.threads == 2


def test_an_agent_owns_the_threads_of_its_sync_tools() -> None:
    seen: set[str] = set()

    @tool
    def where() -> str:
        """Say which thread runs this."""
        seen.add(threading.current_thread().name)
        return "here"

    script = [" I look.\nAction: where\nAction Input: {}", " Done.\nFinal Answer: ok"]
    agent = Agent(model=ScriptedModel(script), tools=[where], tool_threads=1)
    assert agent.run("where?").answer == "ok"
    assert agent.threads.threads == 1 and seen == {"reactchat-tool"}


def test_a_tools_spec_is_made_once_and_again_when_the_tool_changes() -> None:
    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return word

    spec = lookup.spec
    assert lookup.spec is spec  # every turn asks for it: not validated again
    assert spec.input_schema == lookup.input_schema
    lookup.description = "Look a word up in the glossary."
    assert lookup.spec is not spec and lookup.spec.description == "Look a word up in the glossary."
    lookup.input_schema = {"type": "object", "properties": {"term": {"type": "string"}}}
    assert lookup.spec.input_schema == {"type": "object", "properties": {"term": {"type": "string"}}}


def test_the_prompt_lists_a_tool_as_it_is_now_and_is_made_once_per_tool_set() -> None:
    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return word

    agent = Agent(model=ScriptedModel([]), tools=[lookup], ask_user=False)

    def system(*tools: Tool, language: str = "en") -> str:
        specs = [t.spec for t in tools]
        prompt = agent.transcript(specs, [], "q").request().messages[0]
        assert isinstance(prompt, SystemMessage)
        # the same text as the instructions made afresh, uncached
        fresh = _instructions.__wrapped__(_ToolSet(get_pack(language), specs, False))
        assert prompt.content == fresh
        return prompt.content

    first = system(lookup)
    assert system(lookup) is first  # the same tool set: made once
    assert "lookup: Look a word up." in first and '"word": string' in first
    lookup.description = "Look a word up in the glossary."
    assert "lookup: Look a word up in the glossary." in system(lookup)
    lookup.input_schema = {"type": "object", "properties": {"term": {"type": "string"}}}
    assert '"term": string' in system(lookup) and '"word"' not in system(lookup)
    lookup.name = "glossary"
    assert "glossary: Look a word up in the glossary." in system(lookup) and "lookup" not in system(lookup)
    both = system(lookup, calculator)
    assert "glossary:" in both and "calculator:" in both
    english = system(lookup)
    agent.pack = get_pack("fr")
    assert system(lookup, language="fr") != english  # another pack, another key
