"""Approval at every depth: the policy of the agent the user talks to gates every call beneath it,
a call to a sub-agent can be gated (by that policy, or by the sub-agent itself with
``as_tool(approval=...)``), the question names the agent's path, and it is durable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents_team import ReactScript
from reactchat import Agent, tool
from reactchat.messages import ObservationEvent, UserEvent
from reactchat.testing import replay

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


def cleaner_agent(store: str) -> Agent:
    return Agent(
        model=ReactScript(lambda task: [("delete_all", {"folder": "tmp"})], lambda task, seen: "cleaned"),
        tools=[delete_all],
        name="cleaner",
        description="Cleans folders.",
        store=store,
    )


def guarded_team(store: str, approval: bool | Callable[[dict[str, Any]], bool] = True) -> Agent:
    """boss → office → cleaner, where the cleaner says a human approves every call to it
    (office and boss have no policy of their own)."""
    office = Agent(
        model=ReactScript(
            lambda task: [("cleaner", {"task": f"clean {task.split()[-1]}"})], lambda task, seen: f"office: {seen[0]}"
        ),
        tools=[cleaner_agent(store).as_tool(approval=approval)],
        name="office",
        description="Runs the office.",
        store=store,
    )
    return Agent(
        model=ReactScript(lambda task: [("office", {"task": task})], lambda task, seen: f"boss done: {seen[0]}"),
        tools=[office],
        name="boss",
        store=store,
    )


async def test_a_sub_agent_that_asks_for_approval_waits_before_it_starts(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    waiting = await guarded_team(db).arun("Clean tmp")
    assert waiting.status == "waiting" and waiting.pending is not None
    assert (waiting.pending.kind, waiting.pending.tool, waiting.pending.agent) == ("approval", "cleaner", "boss/office")
    assert (waiting.question or "").startswith('The agent boss/office wants to run cleaner with {"task": "clean tmp"}')
    assert not [e for e in waiting.events if e.agent == "boss/office/cleaner"] and DELETED == []
    # approved by another agent object on the same file, as another process would
    done = await guarded_team(db).arun("yes", waiting.session)
    assert (done.status, done.answer) == ("done", "boss done: office: cleaned") and DELETED == ["tmp"]


async def test_a_refused_sub_agent_never_starts_its_run(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    waiting = await guarded_team(db).arun("Clean tmp")
    done = await guarded_team(db).arun("no, keep the files", waiting.session)
    assert done.status == "done" and DELETED == []
    refused = next(e for e in done.events if isinstance(e, ObservationEvent) and e.agent == "boss/office")
    assert "refused" in refused.text and "keep the files" in refused.text
    assert not [e for e in done.events if e.agent == "boss/office/cleaner"]


async def test_a_sub_agent_can_ask_for_approval_of_some_tasks_only(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    only_home = guarded_team(db, approval=lambda arguments: "home" in arguments["task"])
    free = await only_home.arun("Clean tmp")
    assert (free.status, free.answer) == ("done", "boss done: office: cleaned") and DELETED == ["tmp"]
    held = await only_home.arun("Clean home")
    assert held.status == "waiting" and held.pending is not None and held.pending.tool == "cleaner"
    tasks = [e.text for e in held.events if isinstance(e, UserEvent) and e.agent == "boss/office/cleaner"]
    assert tasks == [] and DELETED == ["tmp"]


async def test_a_session_held_by_a_sub_agent_that_asks_for_approval_replays(tmp_path: Path) -> None:
    DELETED.clear()
    db = f"sqlite:///{tmp_path / 's.db'}"
    waiting = await guarded_team(db).arun("Clean tmp")
    await guarded_team(db).arun("yes", waiting.session)
    DELETED.clear()
    replayed = await replay(guarded_team(db), waiting.session, strict=True)
    assert replayed.messages == 2 and DELETED == []  # the approval paused it again; no tool ran
