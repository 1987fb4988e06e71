"""Replay of recorded sessions: no model or tool is called; the first divergence is a readable diff."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from reactchat import Agent, Reflexion, tool
from reactchat.errors import ReactchatError
from reactchat.messages import Reply, TextPart
from reactchat.testing import Diverged, ScriptedModel, export_lines, replay, tool_call
from reactchat.toolbox import calculator

CALLS: list[str] = []


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    CALLS.append(f"add {a} {b}")
    return str(a + b)


@tool(approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    CALLS.append(f"pay {amount}")
    return f"paid {amount}"


ASK_PAY_ADD = [
    'Thought: I need the city.\nAction: ask_user\nAction Input: {"question": "Which city?"}',
    'Thought: Pay first.\nAction: pay\nAction Input: {"amount": 3}',
    'Thought: Now add.\nAction: add\nAction Input: {"a": 1, "b": 2}',
    "Thought: Done.\nFinal Answer: 3 in Lyon",
]


async def recorded(store: str = "memory:") -> tuple[Agent, str]:
    """A session that asks the user, waits for an approval and calls a tool."""
    agent = Agent(model=ScriptedModel(ASK_PAY_ADD), tools=[add, pay], store=store)
    result = await agent.arun("Add 1 and 2 where I am.")
    result = await agent.arun("Lyon", result.session)
    result = await agent.arun("yes", result.session)
    assert (result.status, result.answer) == ("done", "3 in Lyon")
    return agent, result.session


def today(**options: object) -> Agent:
    """Today's agent: a model that must never be called, the same tools."""
    return Agent(model=ScriptedModel([]), tools=[add, pay], **options)  # type: ignore[arg-type]


async def test_a_replay_with_ask_user_and_approval_calls_no_model_and_no_tool(store_url: str) -> None:
    agent, session = await recorded(store_url)
    CALLS.clear()
    before = await agent.store.events(session)
    done = await replay(today(store=agent.store), session, strict=True)
    assert CALLS == []  # the tools answered from the record
    assert (done.messages, done.model_calls) == (3, 4)
    assert [e.type for e in done.events] == [e.type for e in before]
    assert await agent.store.events(session) == before  # the source is untouched
    await agent.store.close()


async def test_a_replay_from_an_exported_file(tmp_path: Path) -> None:
    agent, session = await recorded()
    path = tmp_path / "s.jsonl"
    path.write_text("".join(line + "\n" for line in await export_lines(agent.store, session)))
    assert (await replay(today(), path)).model_calls == 4


async def test_a_changed_tool_signature_diverges_with_turn_step_expected_and_got() -> None:
    agent, session = await recorded()

    @tool(name="add")
    def add_three(a: int, b: int, c: int) -> str:
        """Add three integers."""
        return str(a + b + c)

    changed = Agent(model=ScriptedModel([]), tools=[add_three, pay], store=agent.store)
    with pytest.raises(Diverged) as caught:
        await replay(changed, session)
    diverged = caught.value
    assert isinstance(diverged, ReactchatError)
    assert (diverged.turn, diverged.step) == (1, 3)
    # the recorded call no longer validates: today's tool refuses the arguments the record ran
    assert str(diverged) == (
        "replay diverged at turn 1, step 3 (agent reactchat):\n"
        "  expected: result of add [reactchat]\n  got:      result of add (error) [reactchat]"
    )


async def test_a_lower_step_limit_diverges_where_the_turn_now_stops() -> None:
    agent, session = await recorded()
    with pytest.raises(Diverged) as caught:
        await replay(today(store=agent.store, max_steps=2), session)
    message = str(caught.value)
    assert message.startswith("replay diverged at turn 1, step 3")
    assert 'expected: call add {"a": 1, "b": 2} [reactchat]' in message
    assert "got:      answer (stopped, max_steps)" in message


async def test_native_sub_agent_plan_and_reflexion_sessions_replay() -> None:
    native = Agent(
        model=ScriptedModel([tool_call("add", {"a": 2, "b": 2}, text="adding"), Reply(parts=[TextPart(text="4")])]),
        tools=[add],
        protocol="native",
    )
    session = (await native.arun("2 + 2?")).session
    await replay(Agent(model=ScriptedModel([]), tools=[add], protocol="native", store=native.store), session)

    def team(model: ScriptedModel, helper_model: ScriptedModel, **options: object) -> Agent:
        helper = Agent(model=helper_model, tools=[add], name="helper", description="Adds.")
        return Agent(model=model, tools=[helper], name="boss", **options)  # type: ignore[arg-type]

    helper_replies = ['Action: add\nAction Input: {"a": 1, "b": 2}', "Final Answer: 3"]
    boss = team(
        ScriptedModel(['Action: helper\nAction Input: {"task": "add 1 2"}', "Final Answer: 3"]),
        ScriptedModel(helper_replies),
    )
    session = (await boss.arun("1 + 2?")).session
    await replay(team(ScriptedModel([]), ScriptedModel([]), store=boss.store), session, strict=True)

    plan = json.dumps({"steps": [{"task": "add 1 and 2", "agent": "helper"}, {"task": "say it"}]})
    planner = team(
        ScriptedModel([plan, '{"action": "continue"}', "Final Answer: three", '{"action": "answer", "answer": "3"}']),
        ScriptedModel(helper_replies),
        plan=True,
    )
    session = (await planner.arun("1 + 2?")).session
    await replay(team(ScriptedModel([]), ScriptedModel([]), plan=True, store=planner.store), session, strict=True)

    reflect = Reflexion(evaluator=lambda answer: answer == "3" or "wrong", max_trials=3)
    trying = Agent(model=ScriptedModel(["Final Answer: 4", "I was wrong.", "Final Answer: 3"]), reflect=reflect)
    session = (await trying.arun("1 + 2?")).session
    await replay(Agent(model=ScriptedModel([]), reflect=reflect, store=trying.store), session, strict=True)
    # today's evaluator accepts the first trial: the replay stops before the recorded reflection
    lenient = Reflexion(evaluator=lambda answer: True, max_trials=3)
    with pytest.raises(Diverged, match="trial 1 rejected"):
        await replay(Agent(model=ScriptedModel([]), reflect=lenient, store=trying.store), session, strict=True)


def run_command(*args: str) -> subprocess.CompletedProcess[str]:
    here = Path(__file__).resolve().parent
    env = {"PYTHONPATH": f"{here.parent / 'src'}:{here}", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    command = [sys.executable, "-m", "reactchat", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def test_the_replay_command_exits_0_as_recorded_and_1_on_a_divergence(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    replies = ['Thought: x\nAction: calculator\nAction Input: {"expression": "2 * 3"}', "Thought: ok\nFinal Answer: 6"]
    agent = Agent(model=ScriptedModel(replies), tools=[calculator], store=f"sqlite:///{db}")
    session = agent.run("2 * 3?").session
    passed = run_command("replay", session, "--db", str(db), "--strict")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "as recorded" in passed.stdout
    # a session that called a tool the command's agent does not have (no --tools)
    other = Agent(model=ScriptedModel(ASK_PAY_ADD[2:]), tools=[add], store=f"sqlite:///{db}")
    session = other.run("1 + 2?").session
    failed = run_command("replay", session, "--db", str(db))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.startswith("replay diverged at turn 1, step 1")
    assert "expected: result of add [reactchat]" in failed.stdout and "got:      result of add (error)" in failed.stdout
    with_tools = run_command("replay", session, "--db", str(db), "--tools", "test_replay:add")
    assert with_tools.returncode == 0, with_tools.stdout + with_tools.stderr
    # from an exported file, with no database at all
    exported = tmp_path / "s.jsonl"
    exported.write_text(run_command("export", session, "--db", str(db)).stdout)
    unused = tmp_path / "none" / "s.db"
    from_file = run_command("replay", str(exported), "--db", str(unused), "--tools", "test_replay:add")
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
    assert not unused.exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(exported.read_text().replace('"type":"action"', '"type":"act"'))
    refused = run_command("replay", str(bad), "--db", str(db))
    assert refused.returncode == 1 and "line 4: not an event" in refused.stderr


class Price(BaseModel):
    """A typed answer."""

    euros: float


async def test_a_refused_approval_a_format_correction_and_a_typed_answer_replay() -> None:
    replies = ["I will just chat.", 'Thought: Pay.\nAction: pay\nAction Input: {"amount": 3}', "Final Answer: not paid"]
    agent = Agent(model=ScriptedModel(replies), tools=[add, pay])
    result = await agent.arun("Pay 3.")
    result = await agent.arun("no, too much", result.session)
    assert (result.status, result.answer) == ("done", "not paid")
    CALLS.clear()
    assert (await replay(today(store=agent.store), result.session, strict=True)).model_calls == 3
    assert CALLS == []  # refused then, refused now: pay never ran

    typed = Agent(model=ScriptedModel(["Final Answer: cheap", 'Final Answer: {"euros": 3.5}']), output_type=Price)
    session = (await typed.arun("Price?")).session
    await replay(Agent(model=ScriptedModel([]), output_type=Price, store=typed.store), session, strict=True)
    # today's agent takes any text: the recorded correction is never asked for
    with pytest.raises(Diverged) as caught:
        await replay(Agent(model=ScriptedModel([]), store=typed.store), session)
    assert 'expected: answer (done): {"euros":3.5} [reactchat]' in str(caught.value)
    assert "got:      answer (done): cheap [reactchat]" in str(caught.value)


async def test_a_model_asked_more_than_recorded_is_a_divergence() -> None:
    """Today's agent refuses the recorded answer: it asks the model again, which the record cannot serve."""
    plain = Agent(model=ScriptedModel(["Final Answer: cheap"]), ask_user=False)
    session = (await plain.arun("Price?")).session
    with pytest.raises(Diverged) as caught:
        await replay(Agent(model=ScriptedModel([]), ask_user=False, output_type=Price, store=plain.store), session)
    assert "expected: answer (done): cheap [reactchat]" in str(caught.value)
    assert "got:      a further model call, which the record does not have" in str(caught.value)
