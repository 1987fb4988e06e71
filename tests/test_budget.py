"""Budgets that pause: a limit reached makes the turn wait (``pending.kind == "budget"``), "yes"
grants as much again, "no" ends it with the best answer; sub-agents draw from the turn's budget;
the pause is durable like a question."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reactchat import Agent, Budget, ConfigError, ScriptedModel, tool
from reactchat.messages import ActionEvent, QuestionEvent, Reply, TextPart, Usage

CALLS: list[int] = []


@tool
def count(n: int) -> str:
    """Count one."""
    CALLS.append(n)
    return f"counted {n}"


def act(n: int) -> str:
    return f' Counting.\nAction: count\nAction Input: {{"n": {n}}}'


def counting(steps: int, answer: str = "Final Answer: counted") -> ScriptedModel:
    return ScriptedModel([act(n) for n in range(1, steps + 1)] + [answer])


async def test_tool_calls_limit_pauses_and_yes_grants_as_much_again(tmp_path: Path) -> None:
    CALLS.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    agent = Agent(model=counting(4), tools=[count], store=db, budget=Budget(tool_calls=2))
    waiting = await agent.arun("Count to four.")
    assert waiting.status == "waiting" and waiting.pending is not None
    assert waiting.pending.kind == "budget" and "2 tool calls of 2" in (waiting.question or "")
    assert CALLS == [1, 2]
    # answered from another agent object on the same store (another process would do the same)
    model = ScriptedModel([act(3), "Final Answer: three", act(5), act(6), "Final Answer: six"])
    again = Agent(model=model, tools=[count], store=db, budget=Budget(tool_calls=2))
    done = await again.arun("yes", waiting.session)
    assert (done.status, done.answer) == ("done", "three") and CALLS == [1, 2, 3]
    # the next turn has a budget of its own
    done = await again.arun("Count on.", waiting.session)
    assert waiting.session == done.session and done.status == "waiting" and CALLS == [1, 2, 3, 5, 6]


async def test_no_asks_for_the_best_answer_and_stops_for_budget() -> None:
    CALLS.clear()
    model = ScriptedModel([act(1), act(2), "Final Answer: one so far"])
    agent = Agent(model=model, tools=[count], budget=Budget(tool_calls=1))
    waiting = await agent.arun("Count.")
    assert waiting.pending is not None and waiting.pending.kind == "budget"
    stopped = await agent.arun("no", waiting.session)
    assert (stopped.status, stopped.reason) == ("stopped", "budget")
    assert CALLS == [1]


async def test_a_token_limit_pauses_before_the_next_model_call() -> None:
    usage = Usage(input_tokens=600, output_tokens=10)
    replies = [Reply(parts=[TextPart(text=act(n))], usage=usage) for n in (1, 2, 3)]
    agent = Agent(model=ScriptedModel([*replies, "Final Answer: x"]), tools=[count], budget=Budget(tokens=1000))
    waiting = await agent.arun("Count.")
    assert waiting.pending is not None and waiting.pending.kind == "budget"
    assert "1,220 tokens of 1,000" in (waiting.question or "")
    assert len([e for e in waiting.events if isinstance(e, ActionEvent)]) == 2


async def test_sub_agents_draw_from_the_turns_budget_at_depth_one_and_two() -> None:
    CALLS.clear()
    inner = Agent(model=counting(3, "Final Answer: inner done"), tools=[count], name="inner", description="Counts.")
    middle = Agent(
        model=ScriptedModel(
            [' Delegating.\nAction: inner\nAction Input: {"task": "count"}', "Final Answer: middle done"]
        ),
        tools=[inner],
        name="middle",
        description="Delegates.",
    )
    boss = Agent(
        model=ScriptedModel(
            [' Delegating.\nAction: middle\nAction Input: {"task": "count"}', "Final Answer: boss done"]
        ),
        tools=[middle],
        name="boss",
        budget=Budget(tool_calls=3),  # middle's and inner's calls count too: a sub-agent gets no fresh budget
    )
    waiting = await boss.arun("Count through your team.")
    assert waiting.status == "waiting" and waiting.pending is not None
    assert (waiting.pending.kind, waiting.pending.agent) == ("budget", "boss/middle/inner")
    assert CALLS == [1]  # boss -> middle (1), middle -> inner (2), inner's first count (3)
    done = await boss.arun("yes", waiting.session)
    assert (done.status, done.answer) == ("done", "boss done") and CALLS == [1, 2, 3]
    questions = [e for e in done.events if isinstance(e, QuestionEvent)]
    assert len(questions) == 1  # granted once: the rest of the turn fits in 6 calls


async def test_no_at_depth_two_ends_every_run_of_the_turn_with_its_best_answer() -> None:
    inner = Agent(model=counting(3, "Final Answer: partial"), tools=[count], name="inner", description="Counts.")
    boss = Agent(
        model=ScriptedModel(
            [' Delegating.\nAction: inner\nAction Input: {"task": "count"}', "Final Answer: boss best"]
        ),
        tools=[inner],
        name="boss",
        budget=Budget(tool_calls=2),
    )
    waiting = await boss.arun("Count.")
    assert waiting.pending is not None and waiting.pending.agent == "boss/inner"
    stopped = await boss.arun("no", waiting.session)
    assert (stopped.status, stopped.reason, stopped.answer) == ("stopped", "budget", "boss best")


async def test_an_unpriced_model_under_a_cost_limit_is_a_config_error() -> None:
    agent = Agent(model=ScriptedModel(["Final Answer: free?"], name="openai:no-such-model"), budget=Budget(cost=0.1))
    with pytest.raises(ConfigError, match="price"):
        await agent.arun("Hi")


def test_budget_parse_and_bounds() -> None:
    assert Budget.parse("tokens=20000,cost=0.1") == Budget(tokens=20000, cost=0.1)
    assert Budget(tokens=100, seconds=5).within(Budget(tokens=50, tool_calls=3)) == Budget(
        tokens=50, seconds=5, tool_calls=3
    )
    with pytest.raises(ConfigError):
        Budget.parse("words=3")
    with pytest.raises(ConfigError):
        Budget(tokens=0)


def test_http_budget_is_held_within_the_servers_maximum() -> None:
    from server_support import make_app, running

    with running(make_app(max_budget=Budget(tool_calls=5))) as base, httpx.Client(base_url=base, timeout=20) as client:
        session = client.post("/v1/sessions").json()["session"]
        # one tool call allowed: the calculator runs, then the turn waits for more
        body = {"message": "compute 6*7", "stream": False, "budget": {"tool_calls": 1}}
        waiting = client.post(f"/v1/sessions/{session}/messages", json=body).json()
        assert waiting["status"] == "waiting" and waiting["pending"]["kind"] == "budget"
        done = client.post(f"/v1/sessions/{session}/messages", json={"message": "yes", "stream": False}).json()
        assert (done["status"], done["answer"]) == ("done", "42")
        refused = client.post(f"/v1/sessions/{session}/messages", json={**body, "budget": {"tool_calls": 0}})
        assert refused.status_code == 422


def test_reactchat_ask_budget(tmp_path: Path) -> None:
    script = tmp_path / "replies.txt"
    script.write_text("\n---\n".join([act(1), act(2), "Final Answer: two"]))
    command = [sys.executable, "-m", "reactchat", "ask", "Count.", "--model", f"scripted:{script}"]
    flags = ["--db", str(tmp_path / "s.db"), "--tools", "test_budget:count", "--budget", "tool_calls=1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    out = subprocess.run([*command, *flags], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "1 tool calls of 1" in out.stdout and "Grant as much again" in out.stdout


def test_http_cost_budget_for_a_model_without_prices_is_a_409() -> None:
    from server_support import make_app, running

    with running(make_app()) as base, httpx.Client(base_url=base, timeout=20) as client:
        session = client.post("/v1/sessions").json()["session"]
        body = {"message": "compute 6*7", "stream": False, "budget": {"cost": 0.1}}
        refused = client.post(f"/v1/sessions/{session}/messages", json=body)
        assert refused.status_code == 409 and "price" in refused.json()["error"]["message"]


# ------------------------------------------------------------------ each kind at each depth

#: a model the price table knows, so that the cost limit can be kept
PRICED = "openai:gpt-4o-mini"
#: what every model call of the team below spends
PER_CALL = Usage(input_tokens=100, output_tokens=0)
#: how long the counting agent's model takes per call (the only slow part: the seconds limit)
SLOW = 0.2


def billed(text: str) -> Reply:
    return Reply(parts=[TextPart(text=text)], usage=PER_CALL)


def limit(kind: str, depth: int) -> Budget:
    """A budget of one ``kind`` that the counting agent at ``depth`` reaches with its first model
    call and tool call, and none of the ``depth`` delegating calls above it reaches before."""
    from reactchat.engine.usage import cost

    per_call = cost(PER_CALL.stamped(PRICED))
    assert per_call is not None and per_call > 0, "the price table knows the priced model"
    limits = {
        "tokens": Budget(tokens=100 * depth + 50),
        "cost": Budget(cost=float(per_call) * (depth + 0.5)),
        "seconds": Budget(seconds=SLOW / 2),
        "tool_calls": Budget(tool_calls=depth + 1),  # the delegations are tool calls too
    }
    return limits[kind]


def team(depth: int, budget: Budget) -> Agent:
    """The counting agent under ``depth`` delegating agents (``boss``, ``boss/middle/inner``…);
    the top one has the turn's ``budget``."""
    names = ["boss", "middle", "inner"][: depth + 1]
    counter = ScriptedModel([billed(act(1)), billed(act(2)), billed("Final Answer: counted")], name=PRICED, delay=SLOW)
    agent: Agent | None = None
    for level in reversed(range(depth + 1)):
        if agent is None:
            model, tools = counter, [count]
        else:
            delegate = billed(f' Delegating.\nAction: {agent.name}\nAction Input: {{"task": "count"}}')
            model, tools = ScriptedModel([delegate, billed(f"Final Answer: {names[level]} best")], name=PRICED), [agent]
        agent = Agent(
            model=model, tools=tools, name=names[level], description="Counts.", budget=budget if level == 0 else None
        )
    assert agent is not None
    return agent


SPENT = {"tokens": " tokens of ", "cost": "$", "seconds": " s of ", "tool_calls": " tool calls of "}


@pytest.mark.parametrize("depth", [0, 1, 2])
@pytest.mark.parametrize("kind", ["tokens", "cost", "seconds", "tool_calls"])
async def test_each_kind_of_limit_is_reached_at_each_depth(kind: str, depth: int) -> None:
    """Every kind of limit pauses the turn in the agent that reaches it, whether that is the
    turn's own agent or a sub-agent or sub-sub-agent drawing from the turn's budget; "no" then
    ends every run of the turn with its best answer, and no further tool call runs."""
    CALLS.clear()
    boss = team(depth, limit(kind, depth))
    waiting = await boss.arun("Count through your team.")
    assert waiting.status == "waiting" and waiting.pending is not None, waiting
    path = "/".join(["boss", "middle", "inner"][: depth + 1])
    assert (waiting.pending.kind, waiting.pending.agent) == ("budget", path)
    assert SPENT[kind] in (waiting.question or ""), waiting.question
    assert CALLS == [1]  # the counter's first call ran, its second did not
    stopped = await boss.arun("no", waiting.session)
    assert (stopped.status, stopped.reason) == ("stopped", "budget")
    assert CALLS == [1]


@tool
async def wait(seconds: float) -> str:
    """Wait a while."""
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


async def test_a_sub_agents_seconds_count_once() -> None:
    """The time of a call to a sub-agent is the time of the sub-agent's own model and tool calls,
    already counted: it is not counted again when the call returns (at depth 1 and 2)."""
    waits = [f' Waiting.\nAction: wait\nAction Input: {{"seconds": {s}}}' for s in (0.2, 0.21)]
    inner = Agent(model=ScriptedModel([*waits, "Final Answer: waited"]), tools=[wait], name="inner", description="W")
    middle = Agent(
        model=ScriptedModel([' Delegating.\nAction: inner\nAction Input: {"task": "wait"}', "Final Answer: middle"]),
        tools=[inner],
        name="middle",
        description="Delegates.",
    )
    boss = Agent(
        model=ScriptedModel([' Delegating.\nAction: middle\nAction Input: {"task": "wait"}', "Final Answer: boss"]),
        tools=[middle],
        name="boss",
        budget=Budget(seconds=0.7),  # 0.41 s spent; counted twice (0.82 s) it would be over
    )
    done = await boss.arun("Wait through your team.")
    assert (done.status, done.answer) == ("done", "boss"), done.question
