"""Approval at every depth: the policy of the agent the user talks to gates every call beneath it,
a call to a sub-agent can be gated, the question names the agent's path, and it is durable."""

from __future__ import annotations

from pathlib import Path

from agents_team import ReactScript
from reactchat import Agent, tool
from reactchat.messages import ObservationEvent

DELETED: list[str] = []


@tool
def delete_all(folder: str) -> str:
    """Delete every file of a folder."""
    DELETED.append(folder)
    return f"deleted {folder}"


def team(store: str, policy_names: tuple[str, ...]) -> Agent:
    cleaner = Agent(
        model=ReactScript(lambda task: [("delete_all", {"folder": "tmp"})], lambda task, seen: "cleaned"),
        tools=[delete_all],
        name="cleaner",
        description="Cleans folders.",
        store=store,
    )
    return Agent(
        model=ReactScript(
            lambda task: [("cleaner", {"task": "clean tmp"})], lambda task, seen: f"boss done: {seen[0]}"
        ),
        tools=[cleaner],
        name="boss",
        store=store,
        approval=lambda name, arguments: name.startswith(policy_names),
    )


async def test_a_parents_policy_gates_a_sub_agents_call_durably(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    waiting = await team(db, ("delete_",)).arun("Clean up.")
    assert waiting.status == "waiting" and waiting.pending is not None
    assert (waiting.pending.kind, waiting.pending.tool, waiting.pending.agent) == (
        "approval",
        "delete_all",
        "boss/cleaner",
    )
    assert "The agent boss/cleaner wants to run delete_all" in (waiting.question or "")
    assert DELETED == []
    # approved by another agent object on the same store, as another process would
    done = await team(db, ("delete_",)).arun("yes", waiting.session)
    assert (done.status, done.answer) == ("done", "boss done: cleaned") and DELETED == ["tmp"]


async def test_a_call_to_a_sub_agent_can_be_gated_and_refused(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    waiting = await team(db, ("cleaner",)).arun("Clean up.")
    assert waiting.pending is not None and (waiting.pending.tool, waiting.pending.agent) == ("cleaner", "boss")
    done = await team(db, ("cleaner",)).arun("no, not today", waiting.session)
    refused = next(e for e in done.events if isinstance(e, ObservationEvent) and e.agent == "boss")
    assert "refused" in refused.text and "not today" in refused.text
    assert done.status == "done" and DELETED == []


async def test_an_approved_call_to_a_sub_agent_runs_it(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    waiting = await team(db, ("cleaner",)).arun("Clean up.")
    done = await team(db, ("cleaner",)).arun("yes", waiting.session)
    assert (done.status, done.answer) == ("done", "boss done: cleaned") and DELETED == ["tmp"]
    assert [e.text for e in done.events if isinstance(e, ObservationEvent) and e.agent == "boss"] == ["cleaned"]
