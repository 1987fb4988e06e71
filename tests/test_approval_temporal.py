"""A sub-agent that requires approval (``as_tool(approval=True)``) holds the turn on Temporal too:
its child workflow starts only once the delegation is approved, on whichever worker gets the reply."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed: pip install 'reactchat[temporal]'")

from temporal_support import NEEDS_TEMPORAL, Workers, temporal_address, turns_of, workers

pytestmark = NEEDS_TEMPORAL
__all__ = ["temporal_address", "workers"]  # fixtures, used by name

#: the worker's agent: a boss whose reader sub-agent asks for approval of every task
GUARDED = """
from agents_team import ReactScript
from reactchat import Agent
from team import reader

def agent(store):
    script = ReactScript(lambda task: [("reader", {"task": "read page 5"})], lambda task, seen: f"boss: {seen[0]}")
    return Agent(model=script, tools=[reader(store).as_tool(approval=True)], store=store, name="boss")
"""


def guarded(workers: Workers) -> None:
    (Path(workers.tmp_path) / "guarded.py").write_text(GUARDED, encoding="utf-8")
    workers.start("guarded:agent")


async def test_a_sub_agent_that_asks_for_approval_waits_before_its_child_workflow_starts(workers: Workers) -> None:
    guarded(workers)
    turns = await turns_of(workers)
    asked = await turns.send("g1", "Read it.")
    assert (asked.status, asked.pending) == ("waiting", "approval"), asked
    assert (asked.question or "").startswith('The agent wants to run reader with {"task": "read page 5"}')
    assert workers.bumps() == []  # the reader has not run
    done = await turns.send("g1", "yes")
    assert (done.status, done.answer) == ("done", "boss: read: looked 5"), done
    assert len(workers.bumps()) == 1


async def test_a_refused_sub_agent_never_starts_on_temporal(workers: Workers) -> None:
    guarded(workers)
    turns = await turns_of(workers)
    await turns.send("g2", "Read it.")
    done = await turns.send("g2", "no, not now")
    assert done.status == "done" and "not now" in (done.answer or ""), done
    assert workers.bumps() == []
