"""Replay of recorded sessions: no model or tool is called; the first divergence is a readable diff."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from reactchat import Agent, Reflexion, tool
from reactchat.cli.tool_refs import configured_tools
from reactchat.errors import ReactchatError
from reactchat.messages import CompactionEvent, ObservationEvent, QuestionEvent, Reply, TextPart
from reactchat.testing import (
    Diverged,
    Recorder,
    ScriptedModel,
    export_lines,
    import_record,
    read_record,
    recorded_replies,
    replay,
    tool_call,
)
from reactchat.toolbox import calculator
from test_compaction import Oracle, value

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


async def test_strict_replay_compares_the_requests_a_recorder_kept(tmp_path: Path) -> None:
    recorder = Recorder(ScriptedModel(ASK_PAY_ADD))
    agent = Agent(model=recorder, tools=[add, pay])
    result = await agent.arun("Add 1 and 2 where I am.")
    result = await agent.arun("Lyon", result.session)
    result = await agent.arun("yes", result.session)
    path = tmp_path / "s.jsonl"
    lines = await export_lines(agent.store, result.session, requests=recorder.requests)
    path.write_text("".join(line + "\n" for line in lines))
    assert (json.loads(lines[0])["version"], json.loads(lines[0])["requests"]) == (2, 4)
    assert (await replay(today(), path, strict=True)).requests_compared == 4
    # today's instructions differ: the calls and answers are the same, the prompts are not
    french = Agent(model=ScriptedModel([]), tools=[add, pay], system="Always answer in French.")
    assert (await replay(french, path)).requests_compared == 0
    with pytest.raises(Diverged) as caught:
        await replay(french, path, strict=True)
    diverged = caught.value
    assert (diverged.turn, diverged.step) == (1, 1)
    assert diverged.expected.startswith("request 1: message 1 (system): ")
    assert diverged.got.startswith("request 1: message 1 (system): ") and "Always answer in French." in diverged.got

    # a tool described otherwise today: the prompt that lists the tools changes at its description
    @tool(name="add")
    def add_described(a: int, b: int) -> str:
        """Add two whole numbers and say the sum."""
        return str(a + b)

    with pytest.raises(Diverged) as caught:
        await replay(Agent(model=ScriptedModel([]), tools=[add_described, pay]), path, strict=True)
    assert "Add two whole numbers" in caught.value.got and "Add two whole numbers" not in caught.value.expected


@tool
def divide(a: int, b: int) -> str:
    """Divide a by b."""
    CALLS.append(f"divide {a} {b}")
    return str(a / b)


async def test_a_failed_call_replays_as_the_same_error_observation() -> None:
    agent = Agent(
        model=ScriptedModel(['Action: divide\nAction Input: {"a": 1, "b": 0}', "Final Answer: no"]), tools=[divide]
    )
    session = (await agent.arun("1 / 0?")).session
    CALLS.clear()
    done = await replay(Agent(model=ScriptedModel([]), tools=[divide], store=agent.store), session, strict=True)
    assert CALLS == []  # the recorded failure was raised again, not the tool
    (observation,) = [e for e in done.events if isinstance(e, ObservationEvent)]
    assert observation.is_error and observation.text == "Error: divide raised ZeroDivisionError: division by zero"


def boss_of_the_version_1_file(store: str) -> Agent:
    """The agent tests/fixtures/session_v1.jsonl was recorded with (by reactchat's version-1 writer)."""
    helper = Agent(model=ScriptedModel([]), tools=[add], name="helper", description="Adds two numbers.")
    return Agent(model=ScriptedModel([]), tools=[add, pay, helper], name="boss", store=store)


async def test_a_version_1_file_is_read_imported_and_replayed(store_url: str) -> None:
    """A file written by the first version of the format: every later reactchat reads it."""
    fixture = Path(__file__).parent / "fixtures" / "session_v1.jsonl"
    record = read_record(fixture.read_text(encoding="utf-8").splitlines())
    assert json.loads(fixture.read_text(encoding="utf-8").splitlines()[0])["version"] == 1
    assert [e.kind for e in record.events if isinstance(e, QuestionEvent)] == ["question", "approval"]
    assert {e.agent for e in record.events} == {"boss", "boss/helper"} and record.requests == []
    boss = boss_of_the_version_1_file(store_url)
    session = await import_record(boss.store, record)
    CALLS.clear()
    done = await replay(boss, session, strict=True)
    assert CALLS == [] and (done.messages, done.model_calls, done.requests_compared) == (3, 6, 0)
    assert [e.type for e in done.events] == [e.type for e in record.events]
    await boss.store.close()


def docs_example() -> dict[str, str]:
    """The files of docs/testing.md's pytest example, by path: each Python block whose first
    line is a comment naming a file under tests/."""
    docs = Path(__file__).resolve().parents[1] / "docs" / "testing.md"
    blocks = re.findall(r"```python\n(# (tests/\S+\.py)[^\n]*\n.*?)```", docs.read_text(encoding="utf-8"), re.S)
    return {path: code for code, path in blocks}


def test_the_docs_pytest_example_records_on_the_embedded_model_and_replays_in_ci(tmp_path: Path) -> None:
    files = docs_example()
    assert set(files) == {"tests/record_roses.py", "tests/test_roses_replay.py"}
    for path, code in files.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(code, encoding="utf-8")
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "PATH": "/usr/bin:/bin", "HOME": "/tmp"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )

    recorded = run("tests/record_roses.py")  # the real embedded model, once
    assert recorded.returncode == 0, recorded.stderr
    record = read_record((tmp_path / "tests" / "records" / "roses.jsonl").read_text(encoding="utf-8").splitlines())
    assert len(record.requests) == len(recorded_replies(record.events)) >= 1
    pytest_args = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_roses_replay.py")
    replayed = run(*pytest_args)  # what CI runs: no model is loaded or called
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "1 passed" in replayed.stdout
    # today's agent has other instructions: the same test now fails, on the prompt
    factory = tmp_path / "tests" / "record_roses.py"
    changed = factory.read_text(encoding="utf-8").replace(
        "tools=[calculator])", 'tools=[calculator], system="Be brief.")'
    )
    factory.write_text(changed, encoding="utf-8")
    failed = run(*pytest_args)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "replay diverged at turn 1, step 1" in failed.stdout and "Be brief." in failed.stdout


def test_the_replay_command_compares_recorded_requests_with_the_model_named(tmp_path: Path) -> None:
    """``--strict`` on a file with requests: the prompts of the model the command is told the
    session was recorded with (``--model``, never loaded) must be the recorded ones."""
    replies = ['Thought: x\nAction: calculator\nAction Input: {"expression": "2 * 3"}', "Thought: ok\nFinal Answer: 6"]
    recorder = Recorder(ScriptedModel(replies))
    agent = Agent(model=recorder, tools=[calculator, *configured_tools(None, None)])  # the command's tools
    session = agent.run("2 * 3?").session
    exported = tmp_path / "s.jsonl"
    lines = asyncio.run(export_lines(agent.store, session, requests=recorder.requests))
    exported.write_text("".join(line + "\n" for line in lines))
    (tmp_path / "replies.txt").write_text("unused")
    recorded_on = f"scripted:{tmp_path / 'replies.txt'}"
    passed = run_command("replay", str(exported), "--strict", "--model", recorded_on)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.splitlines()[-1] == "requests compared: 2 requests"
    # told it was the embedded model: its prompts show the worked example, the recorded ones did not
    embedded = run_command("replay", str(exported), "--strict", "--model", "local")
    assert embedded.returncode == 1, embedded.stdout + embedded.stderr
    assert embedded.stdout.startswith("replay diverged at turn 1, step 1")
    assert "expected: request 1: message 1 (system)" in embedded.stdout
    # a session exported from a store holds no requests: the command says none were compared
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(line + "\n" for line in asyncio.run(export_lines(agent.store, session))))
    unchecked = run_command("replay", str(plain), "--strict", "--model", recorded_on)
    assert unchecked.returncode == 0 and "requests compared: none: the record holds no requests" in unchecked.stdout


async def test_a_compacted_session_replays_and_a_missing_compaction_diverges() -> None:
    """A compaction is a model call: its summary is served again where the record made it."""
    agent = Agent(Oracle(), compact_at=0.8, context_tokens=700, ask_user=False)
    session = None
    for n in range(1, 40):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    assert session is not None
    compactions = [e for e in await agent.store.events(session) if isinstance(e, CompactionEvent)]
    assert compactions, "the record must hold a compaction"
    like = {"compact_at": 0.8, "context_tokens": 700, "ask_user": False, "store": agent.store}
    done = await replay(Agent(ScriptedModel([]), **like), session, strict=True)  # type: ignore[arg-type]
    assert done.model_calls == 39 + len(compactions)
    like["compact_at"] = None
    with pytest.raises(Diverged) as caught:
        await replay(Agent(ScriptedModel([]), **like), session)  # type: ignore[arg-type]
    first = compactions[0]
    assert caught.value.turn == first.turn
    assert caught.value.expected.startswith(f"compacts the turns through turn {first.through_turn}")


async def test_a_reflexion_session_judged_by_the_model_replays() -> None:
    """The model judge's verdicts are model calls too: each is served again before its reflection."""
    judged = Reflexion(evaluator="model", max_trials=3)
    replies = ["Final Answer: 4", "REJECT: the sum is wrong", "I added wrongly.", "Final Answer: 3", "ACCEPT"]
    agent = Agent(model=ScriptedModel(replies), reflect=judged)
    result = await agent.arun("1 + 2?")
    assert [(t.accepted, t.reflection) for t in result.trials] == [(False, "I added wrongly."), (True, "")]
    done = await replay(Agent(model=ScriptedModel([]), reflect=judged, store=agent.store), result.session, strict=True)
    assert done.model_calls == 5
    # judged by a function today, which accepts the first answer: the replay stops there
    with pytest.raises(Diverged, match="trial 1 rejected: the sum is wrong"):
        lenient = Reflexion(evaluator=lambda answer: True, max_trials=3)
        await replay(Agent(model=ScriptedModel([]), reflect=lenient, store=agent.store), result.session, strict=True)


@tool
def run_checks(answer: str) -> bool | str:
    """Run the checks on an answer (a judge that acts)."""
    CALLS.append(f"run_checks {answer}")
    return True if answer == "3" else "the checks fail"


async def test_a_tool_evaluator_is_not_run_again_its_recorded_verdicts_stand_in() -> None:
    acting = Reflexion(evaluator=run_checks, max_trials=3)
    agent = Agent(model=ScriptedModel(["Final Answer: 4", "I must add again.", "Final Answer: 3"]), reflect=acting)
    result = await agent.arun("1 + 2?")
    assert [t.accepted for t in result.trials] == [False, True]
    assert CALLS[-2:] == ["run_checks 4", "run_checks 3"]
    CALLS.clear()
    done = await replay(Agent(model=ScriptedModel([]), reflect=acting, store=agent.store), result.session, strict=True)
    assert CALLS == [] and done.model_calls == 3  # the judge did not run: its verdicts were served
