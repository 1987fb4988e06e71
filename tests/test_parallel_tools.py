"""Tool calls of one model reply run at once (native protocol), at most ``parallel_tools``, and
their observations are recorded in call order; a call that raises, one that times out and one
that waits for approval each get their own outcome."""

from __future__ import annotations

import asyncio
import time

from reactchat import Agent, Budget, ScriptedModel, tool
from reactchat.messages import ActionEvent, ObservationEvent, QuestionEvent, Reply, TextPart, ToolCallPart

SPANS: dict[str, tuple[float, float]] = {}


@tool(timeout=5)
async def slow(key: str, seconds: float) -> str:
    """Wait, then answer with the key."""
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    SPANS[key] = (started, time.perf_counter())
    return f"done {key}"


@tool
async def broken(key: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no {key}")


@tool(timeout=0.2)
async def hangs(key: str) -> str:
    """Never returns in time."""
    await asyncio.sleep(30)
    return "late"


SENT: list[str] = []


@tool(approval=True)
def pay(to: str) -> str:
    """Send money (a human approves it first)."""
    SENT.append(to)
    return f"paid {to}"


def calls(*parts: tuple[str, dict[str, object]]) -> Reply:
    return Reply(
        parts=[ToolCallPart(id=f"c{i}", name=name, input=args) for i, (name, args) in enumerate(parts)],
        stop_reason="tool_use",
    )


def final(text: str) -> Reply:
    return Reply(parts=[TextPart(text=text)])


async def test_three_calls_run_at_once_and_are_recorded_in_call_order() -> None:
    SPANS.clear()
    reply = calls(
        ("slow", {"key": "a", "seconds": 0.3}),
        ("slow", {"key": "b", "seconds": 0.1}),
        ("slow", {"key": "c", "seconds": 0.2}),
    )
    agent = Agent(model=ScriptedModel([reply, final("all three")]), tools=[slow], protocol="native")
    result = await agent.arun("Do a, b and c.")
    assert result.status == "done"
    # every call started before any ended: they overlapped
    assert max(start for start, _ in SPANS.values()) < min(end for _, end in SPANS.values())
    observed = [e for e in result.events if isinstance(e, ObservationEvent)]
    assert [o.call_id for o in observed] == ["c0", "c1", "c2"] and [o.text for o in observed] == [
        "done a",
        "done b",
        "done c",
    ]
    # every action durable before the first observation
    kinds = [type(e) for e in result.events if isinstance(e, ActionEvent | ObservationEvent)]
    assert kinds == [ActionEvent] * 3 + [ObservationEvent] * 3


async def test_parallel_tools_one_runs_them_one_after_the_other() -> None:
    SPANS.clear()
    reply = calls(("slow", {"key": "a", "seconds": 0.1}), ("slow", {"key": "b", "seconds": 0.1}))
    agent = Agent(model=ScriptedModel([reply, final("both")]), tools=[slow], protocol="native", parallel_tools=1)
    assert (await agent.arun("Do a and b.")).status == "done"
    assert SPANS["a"][1] <= SPANS["b"][0]


async def test_a_raise_a_timeout_and_an_approval_in_one_group() -> None:
    SENT.clear()
    reply = calls(
        ("broken", {"key": "x"}), ("hangs", {"key": "y"}), ("pay", {"to": "bob"}), ("slow", {"key": "z", "seconds": 0})
    )
    agent = Agent(model=ScriptedModel([reply, final("paid")]), tools=[broken, hangs, pay, slow], protocol="native")
    waiting = await agent.arun("Try everything.")
    assert waiting.status == "waiting" and waiting.pending is not None
    assert (waiting.pending.kind, waiting.pending.call_id, waiting.pending.tool) == ("approval", "c2", "pay")
    observed = {e.call_id: e for e in waiting.events if isinstance(e, ObservationEvent)}
    assert observed["c0"].is_error and "RuntimeError: no x" in observed["c0"].text
    assert observed["c1"].is_error and "did not return within" in observed["c1"].text
    assert observed["c3"].text == "done z" and "c2" not in observed and SENT == []
    assert [e.call_id for e in waiting.events if isinstance(e, QuestionEvent)] == ["c2"]
    done = await agent.arun("yes", waiting.session)
    assert done.status == "done" and done.answer == "paid" and SENT == ["bob"]


async def test_two_calls_that_ask_ask_one_at_a_time() -> None:
    SENT.clear()
    reply = calls(("pay", {"to": "ann"}), ("pay", {"to": "bob"}))
    agent = Agent(model=ScriptedModel([reply, final("done")]), tools=[pay], protocol="native")
    waiting = await agent.arun("Pay both.")
    assert waiting.pending is not None and waiting.pending.call_id == "c0"
    second = next(e for e in waiting.events if isinstance(e, ObservationEvent) and e.call_id == "c1")
    assert "one question at a time" in second.text
    done = await agent.arun("yes", waiting.session)
    assert done.status == "done" and SENT == ["ann"]


async def test_a_tool_call_budget_runs_the_calls_of_a_group_within_it() -> None:
    """The calls of one reply are recorded before any runs; those within the turn's tool-call
    limit run, those past it are not run, and the turn then waits for more budget."""
    SPANS.clear()
    reply = calls(*(("slow", {"key": key, "seconds": 0}) for key in "abc"))
    model = ScriptedModel([reply, final("two of three")])
    agent = Agent(model=model, tools=[slow], protocol="native", budget=Budget(tool_calls=2))
    waiting = await agent.arun("Do a, b and c.")
    observed = [e for e in waiting.events if isinstance(e, ObservationEvent)]
    assert [o.text for o in observed[:2]] == ["done a", "done b"] and sorted(SPANS) == ["a", "b"]
    assert observed[2].is_error and "budget of tool calls" in observed[2].text
    assert waiting.status == "waiting" and waiting.pending is not None and waiting.pending.kind == "budget"
