"""The BFCL adapter of benchmarks/suites: the wheel's data, its AST checker, the tools it makes."""

from __future__ import annotations

import asyncio
import json

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.evals import Case, run_case

pytest.importorskip("bfcl_eval", reason="the BFCL data is the bfcl-eval wheel: scripts/setup.sh installs it")
from benchmarks.suites import bfcl  # after the check that its data is installed


def test_the_sample_is_the_first_cases_with_their_answers() -> None:
    sample = bfcl.load("simple", 40)
    assert len(sample) == 40 and sample[0][0]["id"] == "simple_python_0"
    assert sample[0][1] == [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]
    assert all(truth is None for _, truth in bfcl.load("irrelevance", 5))


def test_bfcl_types_become_json_schema() -> None:
    schema = bfcl.json_schema(
        {"type": "dict", "properties": {"x": {"type": "float"}, "p": {"type": "tuple", "items": {"type": "any"}}}}
    )
    assert schema == {"type": "object", "properties": {"x": {"type": "number"}, "p": {"type": "array", "items": {}}}}


@pytest.mark.parametrize(
    ("call", "passes"),
    [
        ({"calculate_triangle_area": {"base": 10, "height": 5}}, True),
        ({"calculate_triangle_area": {"base": 10, "height": 6}}, False),
        ({"calculate_area": {"base": 10, "height": 5}}, False),
    ],
)
def test_a_recorded_call_is_judged_by_the_bfcl_checker(call: dict[str, object], passes: bool) -> None:
    entry, truth = bfcl.load("simple", 1)[0]
    assert bfcl.verdict("simple", entry, truth, bfcl.CALLED + json.dumps(call)) is passes


def test_the_agent_first_action_is_recorded_as_its_answer() -> None:
    entry, truth = bfcl.load("simple", 2)[1]  # math.factorial: a dotted name, spelt math_factorial
    reply = ' I call it.\nAction: math_factorial\nAction Input: {"number": 5}'
    agent = Agent(model=ScriptedModel([reply]), tools=[bfcl.recording_tool(f) for f in entry["function"]])
    result = asyncio.run(run_case(agent, Case(id="f", input=["5!"], scorer="exact", expected="")))
    assert result.answer == bfcl.CALLED + '{"math_factorial": {"number": 5}}'
    assert bfcl.verdict("simple", entry, truth, result.answer)
    assert not bfcl.verdict("irrelevance", entry, None, result.answer)
    assert bfcl.verdict("irrelevance", entry, None, "I cannot help with that.")
