"""τ²-bench's airline and retail tasks replayed through the engine (benchmarks/suites/tau2.py).

A scripted model sends each task's known-correct actions through the real Agent, loop and
SQLite store, on reactchat tools acting on the task's own copy of the domain database; the
stored calls, the observations and the final database must equal applying the same
actions to a fresh database directly. The whole set (164 tasks, about 10 minutes on a
loaded 2-core machine) is ``python -m benchmarks.suites.tau2``; here a fixed subset: in file
order, each task that uses a tool no earlier chosen task uses, or repeats a call (7 airline,
8 retail tasks, 83 calls, every tool the tasks use).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reactchat.store import resolve_store

pytest.importorskip(
    "inspect_evals", reason="the τ²-bench tasks are the inspect-evals package: scripts/setup.sh installs it"
)
from benchmarks.suites import tau2  # after the check that its data is installed

pytestmark = pytest.mark.slow  # each task loads the domain database twice: about 2 s a task


def ending_with(domain: str, tool: str) -> Any:
    """The first task of ``domain`` whose last action calls ``tool``."""
    return next(t for t in tau2.tasks(domain) if tau2.actions(t) and tau2.actions(t)[-1].name == tool)


def replayed(domain: str, protocol: str, sqlite_url: str, pick: Any = None) -> list[tau2.Replayed]:
    async def go() -> list[tau2.Replayed]:
        store = resolve_store(sqlite_url)
        try:
            return [await tau2.replay(domain, task, store, protocol) for task in pick or tau2.covering(domain)]
        finally:
            await store.close()

    return asyncio.run(go())


@pytest.mark.parametrize("domain", tau2.DOMAINS)
def test_known_correct_actions_replayed_through_the_engine_reach_the_expected_database(
    domain: str, sqlite_url: str
) -> None:
    rows = replayed(domain, "native", sqlite_url)
    assert [(r.task, r.problems) for r in rows if not r.passed] == []
    assert sum(r.writes for r in rows) >= 3  # the subset changes the database, not only reads it
    used = {a.name for t in tau2.covering(domain) for a in tau2.actions(t)}
    assert used == {a.name for t in tau2.tasks(domain) for a in tau2.actions(t)}


def test_the_text_protocol_carries_the_same_arguments(sqlite_url: str) -> None:
    """Nested JSON arguments (passengers, payments, item lists) go through the text parser intact."""
    airline = [t for t in tau2.tasks("airline") if any(a.name == "book_reservation" for a in tau2.actions(t))][:2]
    retail = [
        t for t in tau2.tasks("retail") if any(a.name == "exchange_delivered_order_items" for a in tau2.actions(t))
    ][:2]
    rows = replayed("airline", "react", sqlite_url, airline) + replayed("retail", "react", sqlite_url, retail)
    assert [(r.task, r.problems) for r in rows if not r.passed] == []
    assert all(r.writes for r in rows)


def test_a_replay_that_misses_a_write_is_caught(sqlite_url: str) -> None:
    task = ending_with("retail", "cancel_pending_order")
    short = task.model_copy(deep=True)
    short.evaluation_criteria.actions = tau2.actions(task)[:-1]  # the scripted model stops before the write

    async def go() -> tau2.Replayed:
        store = resolve_store(sqlite_url)
        try:
            return await tau2.replay("retail", short, store, "native", expected=tau2.actions(task))
        finally:
            await store.close()

    row = asyncio.run(go())
    assert not row.passed
    assert any("database differs" in p for p in row.problems)
    assert any(p.startswith("calls ") for p in row.problems)


def test_the_tools_keep_tau2s_descriptions_and_act_on_their_own_database() -> None:
    one, other = tau2.database("retail"), tau2.database("retail")
    tools = {t.name: t for t in tau2.domain_tools("retail", one)}
    assert tools["cancel_pending_order"].effect == "unsafe" and tools["get_order_details"].effect == "read"
    assert "Cancel a pending order" in tools["cancel_pending_order"].description
    order = ending_with("retail", "cancel_pending_order")
    action = tau2.actions(order)[-1]
    before = other.db.get_hash()
    tools["cancel_pending_order"].fn(**action.arguments)
    assert '"status":"cancelled"' in tools["get_order_details"].fn(order_id=action.arguments["order_id"])
    assert other.db.get_hash() == before != one.db.get_hash()
