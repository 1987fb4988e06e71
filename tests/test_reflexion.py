"""Reflexion through the public API: a rejected trial, its reflection in the next prompt, the cap, memory."""

from __future__ import annotations

from reactchat import Agent, Reflexion, ScriptedModel, tool
from reactchat.messages import TrialEvent


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return {"80.16 * 1.15": "92.184", "80.16 + 1.15": "81.31"}.get(expression, "?")


def check(answer: str) -> bool | str:
    return True if "92.18" in answer else "The price must include 15% more, not 1.15 added."


def first_wrong_then_right() -> ScriptedModel:
    return ScriptedModel(
        [
            'Add.\nAction: calculator\nAction Input: {"expression": "80.16 + 1.15"}',
            "Final Answer: 81.31",
            "I added 1.15 instead of multiplying by 1.15. Next time multiply the price by 1.15.",  # the reflection
            'Multiply.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',
            "Final Answer: 92.184",
        ]
    )


async def test_a_rejected_trial_reflects_and_the_next_prompt_carries_it(store_url: str) -> None:
    model = first_wrong_then_right()
    agent = Agent(
        model=model,
        tools=[calculator],
        name="pricer",
        store=store_url,
        reflect=Reflexion(evaluator=check, max_trials=3, window=3),
    )
    result = await agent.arun("What is 80.16 EUR with 15% more?")
    assert (result.status, result.answer) == ("done", "92.184")
    assert [(t.number, t.answer, t.accepted) for t in result.trials] == [(1, "81.31", False), (2, "92.184", True)]
    first = result.trials[0]
    assert first.feedback == "The price must include 15% more, not 1.15 added."
    assert first.reflection.startswith("I added 1.15 instead of multiplying")
    assert first.evaluator == "function"
    # the reflection call saw the trial's steps, its answer and the feedback
    reflect_prompt = model.requests[2].messages[1].content  # type: ignore[union-attr]
    assert "80.16 + 1.15" in reflect_prompt and "81.31" in reflect_prompt and "not 1.15 added" in reflect_prompt
    # trial 1's prompt carried no lessons; trial 2's carries the reflection
    assert "Lessons from those attempts" not in model.requests[0].messages[0].content  # type: ignore[union-attr]
    trial_two = model.requests[3].messages[0].content  # type: ignore[union-attr]
    assert "Lessons from those attempts" in trial_two and "multiply the price by 1.15" in trial_two
    assert {e.agent for e in result.events} == {"pricer", "pricer/trial 1", "pricer/trial 2"}
    stored = [e for e in await agent.store.events(result.session) if isinstance(e, TrialEvent)]
    assert [(e.trial, e.accepted) for e in stored] == [(1, False), (2, True)]
    model.assert_complete()
    await agent.store.close()


async def test_max_trials_is_a_hard_cap_and_the_window_bounds_the_lessons() -> None:
    replies: list[str] = []
    for i in range(3):
        replies += [f"Final Answer: wrong {i}", f"Reflection number {i}."]
    model = ScriptedModel(replies)
    agent = Agent(
        model=model, name="pricer", ask_user=False, reflect=Reflexion(evaluator=check, max_trials=3, window=1)
    )
    result = await agent.arun("What is 80.16 EUR with 15% more?")
    assert (result.status, result.reason, result.answer) == ("stopped", "max_trials", "wrong 2")
    assert [t.accepted for t in result.trials] == [False, False, False]
    third = model.requests[4].messages[0].content  # type: ignore[union-attr]
    assert "Reflection number 1." in third and "Reflection number 0." not in third  # window=1: the last one only
    model.assert_complete()


async def test_the_model_as_judge_is_marked() -> None:
    model = ScriptedModel(
        [
            "Final Answer: 81.31",
            "REJECT: 15% more means multiplying by 1.15.",
            "I should multiply.",
            "Final Answer: 92.184",
            "ACCEPT",
        ]
    )
    agent = Agent(model=model, name="pricer", ask_user=False, reflect=Reflexion(evaluator="model", max_trials=2))
    result = await agent.arun("What is 80.16 EUR with 15% more?")
    assert result.answer == "92.184"
    assert [(t.accepted, t.evaluator) for t in result.trials] == [(False, "model"), (True, "model")]
    assert result.trials[0].feedback == "15% more means multiplying by 1.15."
    assert sum(u.output_tokens for u in result.usage_by_agent.values()) == result.usage.output_tokens


async def test_reflections_are_remembered_across_sessions_and_restarts(sqlite_url: str) -> None:
    reflexion = Reflexion(evaluator=check, max_trials=2, window=2, remember=True)
    first = Agent(
        model=first_wrong_then_right(), tools=[calculator], name="pricer", store=sqlite_url, reflect=reflexion
    )
    await first.arun("What is 80.16 EUR with 15% more?")
    await first.store.close()
    # a new process, a new session, the same task: trial 1 starts with the lesson
    model = ScriptedModel(
        ['Multiply.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}', "Final Answer: 92.184"]
    )
    second = Agent(model=model, tools=[calculator], name="pricer", store=sqlite_url, reflect=reflexion)
    result = await second.arun("what is 80.16 EUR with 15% more? ")
    assert result.trials[0].accepted
    assert "multiply the price by 1.15" in model.requests[0].messages[0].content  # type: ignore[union-attr]
    # another task does not get it
    other = ScriptedModel(["Final Answer: 92.18"])
    third = Agent(model=other, name="pricer", store=sqlite_url, reflect=reflexion, ask_user=False)
    await third.arun("What is 92.18?")
    assert "Lessons" not in other.requests[0].messages[0].content  # type: ignore[union-attr]
    await second.store.close()
    await third.store.close()
