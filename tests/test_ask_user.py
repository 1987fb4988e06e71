"""ask_user refuses to hand the user's own message back to them, on either protocol."""

from __future__ import annotations

import pytest

from reactchat import Agent, ScriptedModel, calculator
from reactchat.messages import Reply, ToolCallPart
from reactchat.toolbox._ask_user import echoes


@pytest.mark.parametrize(
    ("question", "message", "echo"),
    [
        ("What is the capital of France?", "What is the capital of France?", True),
        ("what is the capital of france", "What is the capital of France?", True),
        ("Who are you?", "Hello! Who are you?", True),
        ("Where are you?", "How far is Paris from where I am?", False),
        ("Where am I?", "How far is Paris from where I am?", False),
        ("For how many people?", "Book a table for tonight", False),
        # the whole question handed back with a few words more is an echo too
        ("What is the capital of Brazil? (in decimal)", "What is the capital of Brazil?", True),
        ("Hi there! Where are you?", "Hi there?", False),  # a message of fewer than three words
        ("Book a table for tonight, for how many people?", "Book a table for tonight", False),
        ("", "anything", False),
    ],
)
def test_echoes(question: str, message: str, echo: bool) -> None:
    assert echoes(question, message) is echo


def test_an_echo_question_is_refused_with_a_correction_and_the_run_goes_on() -> None:
    model = ScriptedModel(
        [
            'Thought: ask\nAction: ask_user\nAction Input: {"question": "What is the capital of France?"}',
            "Thought: I know it\nFinal Answer: Paris",
        ]
    )
    result = Agent(model=model, tools=[calculator]).run("What is the capital of France?")
    assert result.status == "done" and result.answer == "Paris"
    refused = result.steps[0]
    assert refused.tool == "ask_user" and "repeats the user's own message" in (refused.observation or "")
    assert "repeats the user's own message" in model.requests[1].messages[-1].text


def test_a_real_question_still_waits_for_the_user() -> None:
    model = ScriptedModel(['Thought: need it\nAction: ask_user\nAction Input: {"question": "Where are you?"}'])
    result = Agent(model=model, tools=[calculator]).run("How far is Paris from where I am?")
    assert result.status == "waiting" and result.question == "Where are you?"


def test_the_native_protocol_refuses_an_echo_too() -> None:
    echo = ToolCallPart(id="c1", name="ask_user", input={"question": "Hello! Who are you?"})
    model = ScriptedModel([Reply(parts=[echo], stop_reason="tool_use"), "I am an assistant."])
    result = Agent(model=model, tools=[calculator], protocol="native").run("Hello! Who are you?")
    assert result.status == "done" and result.answer == "I am an assistant."
    assert "repeats the user's own message" in (result.steps[0].observation or "")
