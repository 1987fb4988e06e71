"""In doubt at every depth: an unsafe call of a sub-sub-agent, of a plan step's worker or of a
Reflexion trial, cut off after its effect, is never run again by itself, on SQLite and
PostgreSQL. The turn waits with ``pending.kind == "in_doubt"`` naming the agent that made the
call; ``retry`` runs it once more, ``skip`` records it as not run, and the turn goes on to
its answer.

The turn is cut off the way a worker that shuts down cuts it (``task.cancel(SHUTDOWN)``)
while the tool is inside its call, after its side effect: the action is stored, its result
never is. Each step after that is taken by a new agent object over its own connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from agents_team import plan_steps, plan_team
from reactchat import Agent, Reflexion, RunContext, tool
from reactchat.engine.approval import SKIPPED
from reactchat.engine.loop import SHUTDOWN
from reactchat.messages import AssistantMessage, ObservationEvent, Reply, Request, TextPart
from reactchat.tools import Tool


def pay_tool(effects: Path, hold: bool) -> Tool:
    """``pay``, unsafe: appends its call to ``effects``; ``hold``: then waits a minute."""

    @tool
    async def pay(to: str, ctx: RunContext) -> str:
        """Send money (never twice)."""
        with effects.open("a", encoding="utf-8") as out:
            out.write(f"{ctx.run} {ctx.call_id} {to}\n")
        if hold:
            await asyncio.sleep(60)
        return f"paid {to}"

    return pay


class StepModel:
    """One action, then once the scratchpad holds its observation, one answer: a function of
    the transcript, so a new process goes on where the last one stopped."""

    supports_tools = False
    context_tokens = None

    def __init__(self, name: str, action: str, answer: str) -> None:
        self.name, self.action, self.answer = name, action, answer

    async def complete(self, request: Request) -> Reply:
        last = request.messages[-1]
        done = isinstance(last, AssistantMessage) and "Observation:" in last.text
        return Reply(parts=[TextPart(text=f" Done.\nFinal Answer: {self.answer}" if done else self.action)])


def team(url: str, effects: Path, hold: bool = False) -> Agent:
    """boss → middle → inner; the inner agent pays bob, then each answers in turn."""
    inner = Agent(
        model=StepModel("inner", ' Paying.\nAction: pay\nAction Input: {"to": "bob"}', "inner settled"),
        tools=[pay_tool(effects, hold)],
        name="inner",
        description="Pays.",
    )
    middle = Agent(
        model=StepModel("middle", ' Delegating.\nAction: inner\nAction Input: {"task": "pay"}', "middle ok"),
        tools=[inner],
        name="middle",
        description="Delegates.",
    )
    return Agent(
        model=StepModel("boss", ' Delegating.\nAction: middle\nAction Input: {"task": "pay"}', "boss ok"),
        tools=[middle],
        name="boss",
        store=url,
    )


def payments(effects: Path) -> int:
    return len(effects.read_text().splitlines()) if effects.exists() else 0


async def cut_off(agent: Agent, message: str, effects: Path) -> str:
    """Run ``message`` until the first side effect, then stop the turn as a shutdown does."""
    session = await agent.store.create_session()
    running = asyncio.create_task(agent.arun(message, session))
    for _ in range(1000):
        if payments(effects):
            break
        await asyncio.sleep(0.01)
    running.cancel(SHUTDOWN)
    with contextlib.suppress(asyncio.CancelledError):
        await running
    assert (await agent.state(session)).turns[0].status == "interrupted"
    await agent.store.close()
    return session


@pytest.mark.parametrize(("reply", "paid"), [("retry", 2), ("skip", 1)])
async def test_an_unsafe_call_at_depth_two_is_in_doubt_until_the_user_decides(
    durable_url: str, tmp_path: Path, reply: str, paid: int
) -> None:
    effects = tmp_path / "effects"
    session = await cut_off(team(durable_url, effects, hold=True), "Pay bob through your team.", effects)
    resumed = team(durable_url, effects)
    waiting = await resumed.resume(session)
    await resumed.store.close()
    assert waiting.status == "waiting" and waiting.pending is not None
    pending = waiting.pending
    assert (pending.kind, pending.agent, pending.tool, pending.input) == (
        "in_doubt",
        "boss/middle/inner",
        "pay",
        {"to": "bob"},
    )
    assert payments(effects) == 1

    answering = team(durable_url, effects)
    done = await answering.arun(reply, session)
    events = await answering.store.events(session)
    await answering.store.close()
    assert (done.status, done.answer) == ("done", "boss ok")
    assert payments(effects) == paid
    paid_calls = [e for e in events if isinstance(e, ObservationEvent) and e.tool == "pay"]
    assert len(paid_calls) == 1 and paid_calls[0].agent == "boss/middle/inner"
    assert paid_calls[0].text == ("paid bob" if reply == "retry" else SKIPPED)


@pytest.mark.parametrize(("reply", "bumped"), [("retry", 2), ("skip", 1)])
async def test_an_unsafe_call_of_a_plan_step_is_in_doubt_until_the_user_decides(
    durable_url: str, tmp_path: Path, reply: str, bumped: int
) -> None:
    """The same rule in plan-and-execute: a plan step a ``worker`` sub-agent runs, cut off
    inside its unsafe ``bump``, waits for the user before the plan goes on."""
    effects = tmp_path / "effects"
    steps = plan_steps("w1,w2")
    session = await cut_off(plan_team(durable_url, str(effects), steps, delay=1.0), "Do it.", effects)
    resumed = plan_team(durable_url, str(effects), steps)
    waiting = await resumed.resume(session)
    await resumed.store.close()
    assert waiting.status == "waiting" and waiting.pending is not None
    pending = waiting.pending
    assert (pending.kind, pending.agent, pending.tool) == ("in_doubt", "boss/step 1/worker", "bump")
    assert payments(effects) == 1
    answering = plan_team(durable_url, str(effects), steps)
    done = await answering.arun(reply, session)
    await answering.store.close()
    assert done.status == "done", done
    runs = [line.split()[1] for line in effects.read_text().splitlines()]
    assert runs.count("1") == bumped and runs.count("2") == 1  # the next step ran once
    assert [step.status for step in done.plan] == ["done", "done"]


def reflecting(url: str, effects: Path, hold: bool = False) -> Agent:
    """An agent whose trials pay bob (Reflexion with an evaluator that accepts any answer)."""
    return Agent(
        model=StepModel("payer", ' Paying.\nAction: pay\nAction Input: {"to": "bob"}', "settled"),
        tools=[pay_tool(effects, hold)],
        name="payer",
        store=url,
        reflect=Reflexion(evaluator=lambda answer: True, max_trials=2),
    )


@pytest.mark.parametrize(("reply", "paid"), [("retry", 2), ("skip", 1)])
async def test_an_unsafe_call_of_a_reflexion_trial_is_in_doubt_until_the_user_decides(
    durable_url: str, tmp_path: Path, reply: str, paid: int
) -> None:
    effects = tmp_path / "effects"
    session = await cut_off(reflecting(durable_url, effects, hold=True), "Pay bob.", effects)
    resumed = reflecting(durable_url, effects)
    waiting = await resumed.resume(session)
    await resumed.store.close()
    assert waiting.status == "waiting" and waiting.pending is not None
    assert (waiting.pending.kind, waiting.pending.agent, waiting.pending.tool) == ("in_doubt", "payer/trial 1", "pay")
    assert payments(effects) == 1
    answering = reflecting(durable_url, effects)
    done = await answering.arun(reply, session)
    await answering.store.close()
    assert (done.status, done.answer) == ("done", "settled")
    assert [(t.number, t.accepted) for t in done.trials] == [(1, True)]
    assert payments(effects) == paid
