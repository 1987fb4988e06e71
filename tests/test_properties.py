"""Property-based tests: arbitrary and mutated model output never breaks parse or the loop."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactchat import Action, Agent, FinalAnswer, FormatError, ScriptedModel, calculator, tool
from reactchat.react import parse

VALID_STEPS = [
    ' I compute.\nAction: calculator\nAction Input: {"expression": "2+2"}',
    " Done.\nFinal Answer: 4",
    "Thought: look\nAction: lookup\nAction Input: {'key': 'a',}",
    "Thought: x\nAction: Search[Colorado orogeny]",
    "Pensée : fini\nRéponse finale : 4",
]
LABELS = ["Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:", "Answer:", "PAUSE", "```", "{", "}"]


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
