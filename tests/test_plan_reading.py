"""Reading planner and replanner replies: the forms models write, validation, corrections in each language."""

from __future__ import annotations

import pytest

from reactchat.messages import PlanStep, ToolSpec
from reactchat.orchestration.plan import (
    PlanError,
    describe_executors,
    planner_request,
    read_plan,
    read_replan,
    replanner_request,
)
from reactchat.protocols.packs import get_pack

EN = get_pack("en")
AGENTS = {"researcher", "writer"}


def tasks(steps: list[PlanStep]) -> list[tuple[str, str | None]]:
    return [(s.task, s.agent) for s in steps]


@pytest.mark.parametrize(
    "text",
    [
        '{"steps": [{"task": "find the price", "agent": "researcher"}, {"task": "add 15%"}]}',
        '```json\n{"steps": [{"task": "find the price", "agent": "researcher"}, {"task": "add 15%"}]}\n```',
        "Here is my plan:\n{'steps': [{'task': 'find the price', 'agent': 'researcher'}, {'task': 'add 15%',}]}",
        '[{"task": "find the price", "agent": "researcher"}, "add 15%"]',
        "1. researcher: find the price\n2. add 15%",
        "- [researcher]: find the price\n- add 15%",
    ],
)
def test_a_plan_is_read_from_the_forms_models_write(text: str) -> None:
    assert tasks(read_plan(EN, text, AGENTS, 5)) == [("find the price", "researcher"), ("add 15%", None)]


def test_default_executor_names_mean_no_agent() -> None:
    steps = read_plan(EN, '{"steps": [{"task": "a", "agent": "default"}, {"task": "b", "agent": null}]}', AGENTS, 5)
    assert tasks(steps) == [("a", None), ("b", None)]
    assert all(s.status == "pending" and s.result is None for s in steps)


def test_an_unknown_executor_is_a_correction_naming_the_executors() -> None:
    with pytest.raises(PlanError, match=r"no executor named 'painter'.*researcher, writer"):
        read_plan(EN, '{"steps": [{"task": "paint", "agent": "painter"}]}', AGENTS, 5)


def test_too_many_steps_and_no_steps_are_corrections() -> None:
    with pytest.raises(PlanError, match="3 steps; the limit is 2"):
        read_plan(EN, '["a", "b", "c"]', AGENTS, 2)
    with pytest.raises(PlanError, match="no steps"):
        read_plan(EN, "I think we should just do it.", AGENTS, 2)
    with pytest.raises(PlanError, match="aucune étape"):
        read_plan(get_pack("fr"), '{"steps": []}', AGENTS, 2)
    with pytest.raises(PlanError, match="上限は 2 個"):
        read_plan(get_pack("ja"), '["a", "b", "c"]', AGENTS, 2)


@pytest.mark.parametrize(
    ("text", "action", "answer", "steps"),
    [
        ('{"action": "continue"}', "continue", "", []),
        ("Continue.", "continue", "", []),
        ('{"action": "answer", "answer": "92.18"}', "answer", "92.18", []),
        ("Final Answer: 92.18", "answer", "92.18", []),
        (
            '{"action": "revise", "steps": [{"task": "ask the florist", "agent": "researcher"}]}',
            "revise",
            "",
            [("ask the florist", "researcher")],
        ),
        ('{"steps": ["x"]}', "revise", "", [("x", None)]),
    ],
)
def test_replanner_decisions(text: str, action: str, answer: str, steps: list[tuple[str, str | None]]) -> None:
    decision = read_replan(EN, text, AGENTS, 5)
    assert (decision.action, decision.answer, tasks(decision.steps)) == (action, answer, steps)


def test_replanner_answer_in_the_packs_own_label() -> None:
    assert read_replan(get_pack("fr"), "Réponse finale : 92,18 €", AGENTS, 5).answer == "92,18 €"
    assert read_replan(get_pack("ja"), "最終回答: 92.18 ユーロ", AGENTS, 5).answer == "92.18 ユーロ"


def test_a_replanner_reply_that_decides_nothing_is_a_correction() -> None:
    with pytest.raises(PlanError, match='"action": "continue"'):
        read_replan(EN, "Hmm, let me think.", AGENTS, 5)
    with pytest.raises(PlanError, match="un seul objet JSON"):
        read_replan(get_pack("fr"), '{"action": "dance"}', AGENTS, 5)


@pytest.mark.parametrize("language", ["en", "fr", "ja"])
def test_prompts_name_the_executors_and_show_each_steps_status(language: str) -> None:
    pack = get_pack(language)
    tools = [ToolSpec(name="calculator", description="math", input_schema={})]
    agents = [ToolSpec(name="researcher", description="Finds\n facts.", input_schema={})]
    executors = describe_executors(pack, [*tools, *agents], agents)
    assert "calculator" in executors and "- researcher: Finds facts." in executors
    request = planner_request(pack, "How much are 12 roses?", [("Hi", "Hello")], executors, 4)
    system, user = request.messages[0].content, request.messages[1].content  # type: ignore[union-attr]
    assert "4" in system and "researcher" in system and "{" in system
    assert user.endswith("How much are 12 roses?") and "Hello" in user
    steps = [
        PlanStep(task="find the price", agent="researcher", status="done", result="80.16 EUR"),
        PlanStep(task="add 15%"),
    ]
    request = replanner_request(pack, "How much are 12 roses?", steps, executors, 2, 3)
    text = request.messages[1].content  # type: ignore[union-attr]
    assert "1. (" in text and "[researcher] find the price" in text and "→ 80.16 EUR" in text and "2. (" in text
    assert "2" in request.messages[0].content and "3" in request.messages[0].content  # type: ignore[union-attr]
