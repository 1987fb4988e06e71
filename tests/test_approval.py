"""Tool approval: the run pauses before a call that needs a human's yes, and resumes on the reply."""

from __future__ import annotations

import pytest

from reactchat.approval import decide, question, refusal


@pytest.mark.parametrize("reply", ["yes", "Yes.", " y ", "OK", "approve", "go ahead", "oui", "はい"])
def test_yes_runs_the_call_as_it_is(reply: str) -> None:
    verdict = decide(reply, {"to": "bob", "amount": 5})
    assert verdict.approved and not verdict.edited and verdict.arguments == {"to": "bob", "amount": 5}


def test_a_json_object_runs_the_call_with_the_users_arguments() -> None:
    verdict = decide('{"to": "bob", "amount": 2}', {"to": "bob", "amount": 5})
    assert verdict.approved and verdict.edited and verdict.arguments == {"to": "bob", "amount": 2}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("no", ""),
        ("No, too expensive", "too expensive"),
        ("no: wrong account", "wrong account"),
        ("deny - not today", "not today"),
        ("maybe later", "maybe later"),  # not a yes: refused, the words are the reason
        ("{not json", "{not json"),
        ("[1, 2]", "[1, 2]"),
        ("nobody asked", "nobody asked"),  # "no" must be a word of its own
    ],
)
def test_anything_else_refuses_with_the_reason(reply: str, reason: str) -> None:
    verdict = decide(reply, {"x": 1})
    assert not verdict.approved and verdict.reason == reason
    assert refusal(verdict).startswith("The user refused this call")
    assert (reason in refusal(verdict)) if reason else refusal(verdict).startswith("The user refused this call.")


def test_the_question_names_the_tool_and_the_arguments() -> None:
    text = question("send_money", {"to": "bob", "amount": 5})
    assert 'send_money with {"to": "bob", "amount": 5}' in text and "yes" in text and "no" in text
