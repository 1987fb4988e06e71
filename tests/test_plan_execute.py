"""Plan-and-execute through the public API: plan → steps → replan → answer, on both protocols."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents_team import plan_steps, plan_team
from reactchat import Agent, ScriptedModel, tool
from reactchat.messages import ActionEvent, ObservationEvent, PlanEvent, Reply, TextPart, ToolCallPart


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return {"80.16 * 1.15": "92.184"}.get(expression, "?")


@tool
def web_search(query: str) -> str:
    """Search the web."""
    return "Roses cost 80.16 EUR a dozen."


def plan(*steps: dict[str, str]) -> str:
    return json.dumps({"steps": list(steps)})


def researcher(replies: list[str]) -> Agent:
    return Agent(model=ScriptedModel(replies), tools=[web_search], name="researcher", description="Finds prices.")


async def test_plan_steps_replan_answer(store_url: str) -> None:
    sub = researcher(['Search.\nAction: web_search\nAction Input: {"query": "rose price"}', "Final Answer: 80.16 EUR"])
    boss_model = ScriptedModel(
        [
            plan({"task": "find the price of a dozen roses", "agent": "researcher"}, {"task": "add 15% to it"}),
            '{"action": "continue"}',  # after step 1
            'Compute.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',  # step 2, the boss's executor
            "Final Answer: 92.184 EUR",
            '{"action": "answer", "answer": "A dozen roses with 15% more cost 92.18 EUR."}',
        ]
    )
    boss = Agent(model=boss_model, tools=[sub, calculator], name="boss", plan=True, max_replans=3, store=store_url)
    result = await boss.arun("How much do a dozen roses cost with 15% more?")
    assert (result.status, result.answer) == ("done", "A dozen roses with 15% more cost 92.18 EUR.")
    assert [(s.task, s.status, s.result) for s in result.plan] == [
        ("find the price of a dozen roses", "done", "80.16 EUR"),
        ("add 15% to it", "done", "92.184 EUR"),
    ]
    assert {e.agent for e in result.events} == {"boss", "boss/step 1/researcher", "boss/step 2"}
    plans = [e for e in result.events if isinstance(e, PlanEvent)]
    assert [(p.version, p.decision) for p in plans] == [(1, "plan"), (1, "continue")]
    # step 2's executor saw step 1's result
    executor_prompt = boss_model.requests[2].messages[1].content  # type: ignore[union-attr]
    assert "add 15% to it" in executor_prompt and "80.16 EUR" in executor_prompt
    # the replanner saw the statuses and results
    replan_prompt = boss_model.requests[4].messages[1].content  # type: ignore[union-attr]
    assert "(done) [researcher] find the price" in replan_prompt and "→ 92.184 EUR" in replan_prompt
    steps = [(s.tool, s.observation) for s in result.steps]
    assert steps == [("researcher", "80.16 EUR"), ("boss", "92.184 EUR"), (None, None)]
    state = await boss.state(result.session)
    assert state.turns[0].status == "done"
    await boss.store.close()


async def test_revisions_are_versions_and_max_replans_is_a_hard_limit() -> None:
    boss_model = ScriptedModel(
        [
            plan({"task": "step a"}, {"task": "step b"}),
            "Final Answer: a done",
            '{"action": "revise", "steps": [{"task": "step c"}]}',
            "Final Answer: c done",
            '{"action": "revise", "steps": [{"task": "step d"}]}',  # over the limit: refused, the plan is done
            '{"action": "answer", "answer": "a and c"}',
        ]
    )
    boss = Agent(model=boss_model, name="boss", plan=True, max_replans=1, ask_user=False)
    result = await boss.arun("Do it.")
    assert result.answer == "a and c"
    assert [[(s.task, s.status) for s in version] for version in result.plans] == [
        [("step a", "done"), ("step b", "skipped")],
        [("step a", "done"), ("step c", "done")],
    ]
    assert [(s.task, s.status) for s in result.plan] == [("step a", "done"), ("step c", "done")]
    boss_model.assert_complete()


async def test_the_step_budget_is_a_hard_limit_and_a_bad_plan_is_corrected() -> None:
    boss_model = ScriptedModel(
        [
            "I will think about it.",  # no plan: a correction follows
            plan({"task": "s1"}, {"task": "s2"}),
            "Final Answer: one",
            '{"action": "continue"}',
            "Final Answer: two",
            '{"action": "answer", "answer": "one, two"}',
        ]
    )
    boss = Agent(model=boss_model, name="boss", plan=True, max_plan_steps=3, ask_user=False)
    result = await boss.arun("Count.")
    assert "no steps" in boss_model.requests[1].messages[-1].content  # type: ignore[union-attr]
    assert result.answer == "one, two"
    assert [s.status for s in result.plan] == ["done", "done"]
    boss_model.assert_complete()

    budget_model = ScriptedModel(
        [
            plan({"task": "s1"}, {"task": "s2"}),
            "Final Answer: one",
            '{"action": "revise", "steps": [{"task": "s3"}, {"task": "s4"}]}',  # two more: over the budget
            '{"action": "revise", "steps": [{"task": "s3"}]}',  # after the correction
            "Final Answer: three",
            # two steps ran: the budget is spent, no step can run, the replanner must answer
            '{"action": "answer", "answer": "stopped at three"}',
        ]
    )
    capped = Agent(model=budget_model, name="boss", plan=True, max_plan_steps=2, ask_user=False)
    result = await capped.arun("Count.")
    assert "the limit is 1" in budget_model.requests[3].messages[-1].content  # type: ignore[union-attr]
    assert [[(s.task, s.status) for s in v] for v in result.plans] == [
        [("s1", "done"), ("s2", "skipped")],
        [("s1", "done"), ("s3", "done")],
    ]
    assert result.answer == "stopped at three"
    assert "answer now" in budget_model.requests[-1].messages[0].content  # type: ignore[union-attr]
    budget_model.assert_complete()


async def test_plan_on_the_native_protocol() -> None:
    sub = Agent(
        model=ScriptedModel(
            [
                Reply(
                    parts=[ToolCallPart(id="c1", name="web_search", input={"query": "roses"})], stop_reason="tool_use"
                ),
                Reply(parts=[TextPart(text="80.16 EUR")]),
            ]
        ),
        tools=[web_search],
        name="researcher",
        description="Finds prices.",
        protocol="native",
    )
    boss_model = ScriptedModel(
        [
            Reply(parts=[TextPart(text=plan({"task": "find the price", "agent": "researcher"}))]),
            Reply(parts=[TextPart(text='{"action": "answer", "answer": "80.16 EUR"}')]),
        ]
    )
    boss = Agent(model=boss_model, tools=[sub], name="boss", plan=True, protocol="native")
    result = await boss.arun("Price of roses?")
    assert result.answer == "80.16 EUR"
    assert [(s.status, s.result) for s in result.plan] == [("done", "80.16 EUR")]


@pytest.mark.parametrize(("language", "word"), [("fr", "planificateur"), ("ja", "計画担当")])
async def test_plan_prompts_follow_the_language_pack(language: str, word: str) -> None:
    boss_model = ScriptedModel([plan({"task": "t"}), "Réponse finale : fait", '{"action": "answer", "answer": "ok"}'])
    if language == "ja":
        boss_model.replies[1] = "最終回答: 完了"
    boss = Agent(model=boss_model, name="boss", plan=True, language=language, ask_user=False)
    result = await boss.arun("Q")
    assert result.answer == "ok"
    assert word in boss_model.requests[0].messages[0].content  # type: ignore[union-attr]
    assert result.plan[0].result in ("fait", "完了")


@pytest.mark.parametrize("spec", ["w1,wa2,3", "w1,wb2,3"])
async def test_ask_user_inside_a_plan_step_pauses_and_resumes_the_plan(
    store_url: str, tmp_path: Path, spec: str
) -> None:
    boss = plan_team(store_url, str(tmp_path / "effects"), plan_steps(spec))
    waiting = await boss.arun("Bump three times.")
    assert waiting.status == "waiting" and waiting.pending is not None
    assert waiting.pending.agent == "boss/step 2/worker"
    assert [s.status for s in waiting.plan] == ["done", "pending", "pending"]
    done = await boss.arun("Lyon", waiting.session)
    assert done.status == "done"
    assert [s.status for s in done.plan] == ["done", "done", "done"]
    assert "user said" not in done.answer if done.answer else True
    assert "Lyon" in (done.answer or "")
    effects = (tmp_path / "effects").read_text().splitlines()
    assert sorted(int(line.split()[1]) for line in effects) == [1, 2, 3]
    opened = [e for e in done.events if isinstance(e, ActionEvent)]
    closed = {(e.run, e.call_id) for e in done.events if isinstance(e, ObservationEvent)}
    assert all((a.run, a.call_id) in closed for a in opened)
    await boss.store.close()
