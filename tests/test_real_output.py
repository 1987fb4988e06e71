"""The real-output corpus (tests/fixtures/real_output.txt): every case is read as intended.

The reading itself lives in ``benchmarks/real_output.py``, which prints the share per
form; here each case is one test, so a regression names the shape it broke.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _corpus_module() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "real_output.py"
    spec = importlib.util.spec_from_file_location("real_output", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_output"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


corpus = _corpus_module()
CASES = corpus.load()


def test_the_corpus_covers_every_form_the_issue_names() -> None:
    forms = {case.form for case in CASES}
    for form in (
        "react-paper",
        "langchain-structured-chat",
        "r1-reasoning",
        "hermes-qwen",
        "llama3-json",
        "mistral-v3",
    ):
        assert form in forms
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_is_read_as_its_source_intended(case: object) -> None:
    assert corpus.read(case) == case.expect  # type: ignore[attr-defined]


def test_a_native_run_executes_a_tool_call_written_in_the_text() -> None:
    """An OpenAI-compatible server without a tool-call parser returns the call as text:
    the native protocol still runs it, with a call id, and the model sees the result."""
    from reactchat import Agent, ScriptedModel, calculator
    from reactchat.messages import ToolCallPart, ToolResultMessage

    model = ScriptedModel(
        [
            '<think>17 * 23, use the tool</think>\n<tool_call>\n{"name": "calculator", '
            '"arguments": {"expression": "17 * 23"}}\n</tool_call>',
            '[TOOL_CALLS]calculator[ARGS]{"expression": "391 + 1"}',
            "17 * 23 is 391, and one more is 392.",
        ]
    )
    result = Agent(model=model, tools=[calculator], protocol="native").run("What is 17 * 23, plus one?")
    assert result.status == "done" and result.answer == "17 * 23 is 391, and one more is 392."
    assert [(s.tool, s.input, s.observation) for s in result.steps[:2]] == [
        ("calculator", {"expression": "17 * 23"}, "391"),
        ("calculator", {"expression": "391 + 1"}, "392"),
    ]
    last = model.requests[-1].messages
    calls = [p for m in last for p in getattr(m, "parts", []) if isinstance(p, ToolCallPart)]
    results = [m for m in last if isinstance(m, ToolResultMessage)]
    assert len({c.id for c in calls}) == 2 and [r.call_id for r in results] == [c.id for c in calls]
    assert [r.content for r in results] == ["391", "392"]
