"""Property-based tests: arbitrary and mutated model output never breaks parse or the loop."""

from __future__ import annotations

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactchat import Action, Agent, FinalAnswer, FormatError, ScriptedModel, calculator, tool
from reactchat.protocols.formats import calls_in_text
from reactchat.react import parse

VALID_STEPS = [
    ' I compute.\nAction: calculator\nAction Input: {"expression": "2+2"}',
    " Done.\nFinal Answer: 4",
    "Thought: look\nAction: lookup\nAction Input: {'key': 'a',}",
    "Thought: x\nAction: Search[Colorado orogeny]",
    "Pensée : fini\nRéponse finale : 4",
    "Thought 2: x\nAction 2: Search[High Plains]",
    "Thought 3: done\nAction 3: Finish[4]",
    'Thought: t\nAction:\n```json\n{"action": "lookup", "action_input": {"key": "a"}}\n```',
    "<think>\nAction: lookup\n</think>\nThought: t\nFinal Answer: 4",
]
LABELS = [
    "Thought:",
    "Action:",
    "Action Input:",
    "Observation:",
    "Final Answer:",
    "Answer:",
    "PAUSE",
    "```",
    "{",
    "}",
    "Thought 2:",
    "Finish[",
    "]",
    "<think>",
    "</think>",
    '{"action": "lookup", "action_input": ',
    "<tool_call>",
    "[TOOL_CALLS]",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid step with random edits: cut, insertions of labels and junk, duplication."""
    text = draw(st.sampled_from(VALID_STEPS))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["cut", "insert", "label", "dup", "case"]))
        pos = draw(st.integers(0, len(text)))
        if op == "cut":
            end = draw(st.integers(pos, len(text)))
            text = text[:pos] + text[end:]
        elif op == "insert":
            text = text[:pos] + draw(st.text(max_size=20)) + text[pos:]
        elif op == "label":
            text = text[:pos] + "\n" + draw(st.sampled_from(LABELS)) + " " + text[pos:]
        elif op == "dup":
            text = text + "\n" + text
        else:
            text = text.swapcase()
    return text


model_output = st.one_of(st.text(max_size=300), mutated())


@given(model_output, st.sampled_from(["en", "fr", "ja"]))
@settings(max_examples=400, deadline=None)
def test_parse_raises_nothing_but_format_error(text: str, language: str) -> None:
    try:
        step = parse(text, language)
    except FormatError as error:
        assert str(error)
        return
    assert isinstance(step, Action | FinalAnswer)
    if isinstance(step, Action):
        assert step.tool and isinstance(step.input, dict | str)
        json.dumps(step.input)
    else:
        assert step.answer.strip()


def _reading(text: str) -> object:
    try:
        return parse(text)
    except FormatError as error:
        return error.kind


@given(st.sampled_from(VALID_STEPS), model_output)
@settings(max_examples=200, deadline=None)
def test_a_reasoning_block_never_changes_the_step(step: str, reasoning: str) -> None:
    """Whatever a ``<think>`` block holds (labels, actions, answers), the step reads the
    same as without it, before the step or opened by the template."""
    reasoning = re.sub(r"</?think(ing)?>", "", reasoning, flags=re.IGNORECASE)
    expected = _reading(step)
    assert _reading(f"<think>{reasoning}</think>\n{step}") == expected
    assert _reading(f"{reasoning}\n</think>\n{step}") == expected


CALL_TEXTS = [
    '<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}\n</tool_call>',
    '[TOOL_CALLS][{"name": "lookup", "arguments": {"key": "a"}}]',
    '[TOOL_CALLS]lookup[ARGS]{"key": "a"}',
    '<|python_tag|>{"name": "lookup", "parameters": {"key": "a"}}',
    '{"name": "lookup", "parameters": {"key": "a"}}; {"name": "lookup", "parameters": {"key": "b"}}',
    '<function=lookup>{"key": "a"}</function>',
    "[lookup(key='a')]",
]


@given(st.one_of(st.text(max_size=200), st.sampled_from(CALL_TEXTS).map(lambda t: t * 2)), st.data())
@settings(max_examples=300, deadline=None)
def test_in_text_tool_calls_never_raise_and_get_unique_ids(text: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(text)))
    for candidate in (text, text[:cut], text[cut:]):
        found = calls_in_text(candidate, ["lookup"])
        if found is None:
            continue
        ids = [call_id for call_id, _, _ in found.calls]
        assert found.calls and len(set(ids)) == len(ids)
        for _, name, value in found.calls:
            assert isinstance(name, str) and isinstance(value, dict | str)
            json.dumps(value)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@given(st.lists(model_output, min_size=1, max_size=12), st.sampled_from(["react", "native"]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_loop_always_ends(replies: list[str], protocol: str) -> None:
    # enough replies for every step plus the best-effort answer; the run must end by itself
    script = replies + ["Final Answer: out of ideas"] * 8
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[calculator, lookup], max_steps=6, protocol=protocol)  # type: ignore[arg-type]
    result = agent.run("question?")
    assert result.status in ("done", "stopped", "waiting")
    assert len(model.requests) <= 7
    if result.status == "waiting":
        assert result.question is not None
    else:
        assert result.answer is not None
