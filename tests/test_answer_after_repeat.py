"""After a refused repeat of a call that had succeeded, the next text-protocol step is the
answer (no tool offered); the step budget's note is the engine's, not the model's thought."""

from __future__ import annotations

import json

from reactchat import Agent, ScriptedModel, calculator, tool


def act(tool_name: str, arguments: dict[str, object]) -> str:
    return f" I should use a tool.\nAction: {tool_name}\nAction Input: {json.dumps(arguments)}"


def final(text: str) -> str:
    return f" I now know the final answer.\nFinal Answer: {text}"


def test_a_refused_repeat_of_a_good_call_makes_the_next_step_the_answer() -> None:
    same = act("calculator", {"expression": "80.16 * 1.15"})
    model = ScriptedModel([same, same, final("92.184")])
    result = Agent(model=model, tools=[calculator], max_steps=10).run("What is 80.16 * 1.15?")
    assert result.status == "done" and result.answer == "92.184"
    offered = [[t.name for t in request.react_tools] for request in model.requests]
    assert offered == [["calculator", "ask_user"], ["calculator", "ask_user"], []]


def test_a_repeated_failing_call_a_new_call_or_a_volatile_tool_keeps_the_tools() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        if key == "bad":
            raise ValueError("no such key")
        return f"value of {key}"

    ticks = iter(range(100))

    @tool(volatile=True)
    def clock() -> str:
        """The current tick."""
        return str(next(ticks))

    bad, good, other, tick = (
        act("lookup", {"key": "bad"}),
        act("lookup", {"key": "a"}),
        act("lookup", {"key": "b"}),
        act("clock", {}),
    )
    model = ScriptedModel([bad, bad, good, other, tick, tick, final("done")])
    result = Agent(model=model, tools=[lookup, clock], max_steps=10).run("find")
    assert result.status == "done" and [s.observation for s in result.steps[4:6]] == ["0", "1"]
    assert all(request.react_tools for request in model.requests)


def test_the_budget_note_follows_the_last_observation_in_brackets() -> None:
    model = ScriptedModel([act("calculator", {"expression": f"{i}+1"}) for i in range(2)] + [" About 3."])
    result = Agent(model=model, tools=[calculator], max_steps=2).run("count")
    assert result.status == "stopped" and result.answer == "About 3."
    prompt = model.requests[-1].messages[-1].text
    # the note sits after the observation, not in a "Thought:" the model seems to have written
    assert prompt.endswith(
        "Observation: 2\n(The step budget is used up: no more actions. Write your "
        "best final answer from the observations above, and say what is "
        "uncertain.)\nFinal Answer:"
    )
