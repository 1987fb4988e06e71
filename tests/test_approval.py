"""Tool approval: the run pauses before a call that needs a human's yes, and resumes on the reply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel, tool
from reactchat.engine.approval import decide, question, refusal
from reactchat.engine.session import RunResult
from reactchat.messages import Event, StartedEvent, UserEvent
from reactchat.models._scripted import tool_call


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


# ------------------------------------------------------------------- in a run

SENT: list[dict[str, object]] = []


@tool(approval=True)
def send_money(to: str, amount: int) -> str:
    """Send money to someone."""
    SENT.append({"to": to, "amount": amount})
    return f"sent {amount} to {to}"


@tool(approval=lambda arguments: arguments["amount"] > 100)
def pay(to: str, amount: int) -> str:
    """Pay a bill."""
    SENT.append({"to": to, "amount": amount})
    return f"paid {amount} to {to}"


def call(name: str, arguments: dict[str, object]) -> str:
    return f" I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


FINAL = " Done.\nFinal Answer: done"


@pytest.fixture(autouse=True)
def _nothing_sent() -> None:
    SENT.clear()


def waiting_agent(*replies: str, protocol: str = "react", **options: object) -> tuple[Agent, RunResult]:
    first: object = call("send_money", {"to": "bob", "amount": 5})
    if protocol == "native":
        first = tool_call("send_money", {"to": "bob", "amount": 5})
    agent = Agent(model=ScriptedModel([first, *replies]), tools=[send_money], protocol=protocol, **options)  # type: ignore[arg-type]
    return agent, agent.run("pay bob 5")


@pytest.mark.parametrize("protocol", ["react", "native"])
def test_the_run_waits_before_the_call_and_yes_runs_it(protocol: str) -> None:
    agent, result = waiting_agent("done" if protocol == "native" else FINAL, protocol=protocol)
    assert result.status == "waiting" and SENT == []
    pending = result.pending
    assert pending is not None and pending.kind == "approval"
    assert (pending.tool, pending.input) == ("send_money", {"to": "bob", "amount": 5})
    assert result.question and "send_money" in result.question and '"amount": 5' in result.question
    done = agent.run("yes", result.session)
    assert done.status == "done" and SENT == [{"to": "bob", "amount": 5}]
    assert done.steps[0].observation == "sent 5 to bob"


def test_a_refusal_reason_is_the_observation() -> None:
    agent, result = waiting_agent(FINAL)
    done = agent.run("no, Bob was paid yesterday", result.session)
    assert SENT == [] and done.status == "done"
    observation = done.steps[0].observation or ""
    assert observation.startswith("The user refused this call: Bob was paid yesterday.")
    # the model saw the refusal before it answered
    assert "Bob was paid yesterday" in json.dumps([m.model_dump() for m in agent.model.requests[-1].messages])  # type: ignore[attr-defined]


def test_edited_arguments_run_instead() -> None:
    agent, result = waiting_agent(FINAL)
    done = agent.run('{"to": "bob", "amount": 3}', result.session)
    assert SENT == [{"to": "bob", "amount": 3}]
    assert (done.steps[0].observation or "").endswith("before it ran. sent 3 to bob")
    invalid_agent, waiting = waiting_agent(FINAL)
    bad = invalid_agent.run('{"to": "bob", "amount": "lots"}', waiting.session)
    assert SENT == [{"to": "bob", "amount": 3}] and "amount: Input should be a valid integer" in (
        bad.steps[0].observation or ""
    )


def test_a_policy_function_asks_only_when_it_says_so() -> None:
    model = ScriptedModel([call("pay", {"to": "gas", "amount": 40}), call("pay", {"to": "rent", "amount": 900}), FINAL])
    agent = Agent(model=model, tools=[pay])
    result = agent.run("pay the bills")
    assert result.status == "waiting" and SENT == [{"to": "gas", "amount": 40}]
    assert result.pending is not None and result.pending.input == {"to": "rent", "amount": 900}


def test_an_agent_wide_policy_covers_tools_it_does_not_own() -> None:
    from reactchat.toolbox import calculator

    model = ScriptedModel([call("calculator", {"expression": "2 + 2"}), FINAL])
    agent = Agent(model=model, tools=[calculator], approval=lambda name, arguments: name == "calculator")
    result = agent.run("2+2?")
    assert result.status == "waiting" and result.pending is not None and result.pending.tool == "calculator"
    assert agent.run("yes", result.session).steps[0].observation == "4"


async def test_a_crash_after_the_decision_never_runs_a_side_effect_twice() -> None:
    # the reply is durable and the approved call had started (its StartedEvent is stored) when
    # the process stopped: whether it ran is unknown, so it is in doubt (or, with
    # in_doubt="tell_model", reported interrupted); a refusal is simply recorded
    for reply, in_doubt, expected in [
        ("yes", "tell_model", "interrupted"),
        ("no, not now", "ask", "The user refused this call: not now."),
    ]:
        agent = Agent(
            model=ScriptedModel([call("send_money", {"to": "bob", "amount": 5}), FINAL]),
            tools=[send_money],
            in_doubt=in_doubt,  # type: ignore[arg-type]
        )
        waiting = await agent.arun("pay bob 5")
        assert waiting.pending is not None
        await crash_after(agent, waiting, reply)
        done = await agent.resume(waiting.session)
        assert SENT == [] and done.status == "done"
        assert expected in (done.steps[0].observation or "")
    agent = Agent(model=ScriptedModel([call("send_money", {"to": "bob", "amount": 5}), FINAL]), tools=[send_money])
    waiting = await agent.arun("pay bob 5")
    await crash_after(agent, waiting, "yes")
    doubt = await agent.resume(waiting.session)
    assert SENT == [] and doubt.status == "waiting" and doubt.pending is not None
    assert (doubt.pending.kind, doubt.pending.tool) == ("in_doubt", "send_money")
    done = await agent.arun("skip", doubt.session)
    assert SENT == [] and done.status == "done" and "not to run it again" in (done.steps[0].observation or "")


async def test_a_crash_between_the_decision_and_the_call_runs_it_once() -> None:
    # the reply is durable, the call had not started: it runs now, once
    agent = Agent(model=ScriptedModel([call("send_money", {"to": "bob", "amount": 5}), FINAL]), tools=[send_money])
    waiting = await agent.arun("pay bob 5")
    assert waiting.pending is not None
    await agent.store.append(
        UserEvent(session=waiting.session, turn=waiting.turn, step=waiting.pending.step, text="yes")
    )
    done = await agent.resume(waiting.session)
    assert done.status == "done" and SENT == [{"to": "bob", "amount": 5}]
    SENT.clear()


async def crash_after(agent: Agent, waiting: RunResult, reply: str) -> None:
    """What a process leaves that stops right after it recorded the user's reply and, for a yes,
    that the approved call started."""
    assert waiting.pending is not None
    place = {"session": waiting.session, "turn": waiting.turn, "step": waiting.pending.step}
    events: list[Event] = [UserEvent(**place, text=reply)]
    if reply == "yes":
        events.append(StartedEvent(**place, call_id=waiting.pending.call_id))
    await agent.store.append(*events)


def test_paused_in_one_process_approved_in_another(tmp_path: Path) -> None:
    package = tmp_path / "bank"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(
        "from pathlib import Path\nfrom reactchat import tool\n\n"
        "@tool(approval=True)\n"
        "def transfer(to: str, amount: int) -> str:\n"
        '    """Transfer money."""\n'
        f"    Path({str(tmp_path / 'ledger.txt')!r}).write_text(f'{{amount}} to {{to}}')\n"
        "    return f'transferred {amount} to {to}'\n"
    )
    db = str(tmp_path / "sessions.db")
    first = tmp_path / "first.txt"
    first.write_text(call("transfer", {"to": "ann", "amount": 7}))
    second = tmp_path / "second.txt"
    second.write_text(" It went through.\nFinal Answer: 7 sent to Ann")

    def reactchat(*args: str) -> subprocess.CompletedProcess[str]:
        flags = ["--db", db, "--tools", "bank.tools:transfer", "--json"]
        return subprocess.run(
            [sys.executable, "-m", "reactchat.cli", "ask", *args, *flags],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(tmp_path)},
        )  # fmt: skip

    paused = reactchat("send Ann 7", "--model", f"scripted:{first}")
    assert paused.returncode == 3, paused.stderr
    state = json.loads(paused.stdout)
    assert state["status"] == "waiting" and "transfer" in state["question"]
    assert not (tmp_path / "ledger.txt").exists()
    approved = reactchat("yes", "--session", state["session"], "--model", f"scripted:{second}")
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout)["answer"] == "7 sent to Ann"
    assert (tmp_path / "ledger.txt").read_text() == "7 to ann"
