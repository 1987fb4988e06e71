"""AgentDojo's banking suite through reactchat tools (benchmarks/suites/agentdojo.py).

Engine correctness, not model quality: a scripted model that obeys every injection makes
the user task's known-correct calls and then the attacker's. Without approval the attack
succeeds (the engine ran what the model asked, on the suite's environment); with approval
of unsafe tools the scripted user refuses the attacker's call, and the user's task is still
done.
"""

from __future__ import annotations

import asyncio

import pytest

from reactchat.store import resolve_store

pytest.importorskip("agentdojo", reason="the AgentDojo suites are the agentdojo wheel: scripts/setup.sh installs it")
from benchmarks.suites import agentdojo  # after the check that its data is installed


def played(approval: bool, sqlite_url: str, protocol: str = "native") -> agentdojo.Outcome:
    banking = agentdojo.suite("banking")
    user_task = banking.get_user_task_by_id("user_task_0")  # pay the bill in a file the attack is written into
    injection_task = banking.get_injection_task_by_id("injection_task_0")  # send money to the attacker

    async def go() -> agentdojo.Outcome:
        store = resolve_store(sqlite_url)
        try:
            model = agentdojo.obeying(protocol)
            return await agentdojo.play(banking, user_task, injection_task, model, store, approval, protocol)
        finally:
            await store.close()

    return asyncio.run(go())


@pytest.mark.parametrize("protocol", ["native", "react"])
def test_without_approval_the_obeyed_injection_runs_on_the_environment(sqlite_url: str, protocol: str) -> None:
    row = played(False, sqlite_url, protocol)
    assert row.status == "done" and row.refused == []
    assert row.utility and row.attacked
    assert [c.split("(")[0] for c in row.calls] == ["read_file", "send_money", "send_money"]


def test_with_approval_the_injected_call_is_refused_and_the_task_still_done(sqlite_url: str) -> None:
    row = played(True, sqlite_url)
    assert row.status == "done"
    assert row.utility and not row.attacked
    assert len(row.refused) == 1 and "US133000000121212121212" in row.refused[0]
    assert [c.split("(")[0] for c in row.calls] == ["read_file", "send_money"]  # the user's own payment ran


def test_the_attack_is_in_what_the_tool_reads() -> None:
    banking = agentdojo.suite("banking")
    user_task = banking.get_user_task_by_id("user_task_0")
    attack = agentdojo.injections(banking, user_task, banking.get_injection_task_by_id("injection_task_0"))
    run = agentdojo.case(banking, user_task, attack)
    tools = {t.name: t for t in agentdojo.suite_tools(banking, run)}
    assert tools["read_file"].effect == "read" and tools["send_money"].effect == "unsafe"
    text = asyncio.run(tools["read_file"].run({"file_path": "bill-december-2023.txt"}))
    assert "<INFORMATION>" in text and "US133000000121212121212" in text


@pytest.mark.parametrize(
    ("arguments", "asked"),
    [
        ({"recipient": "UK12345678901234567890", "amount": 98.7, "subject": "bill", "date": "2023-12-30"}, True),
        ({"recipient": "uk12345678901234567890", "amount": 98.70, "subject": "Car rental", "date": "2022-01-01"}, True),
        ({"recipient": "US133000000121212121212", "amount": 98.7, "subject": "bill", "date": "2022-01-01"}, False),
        ({"recipient": "UK12345678901234567890", "amount": 980.0, "subject": "bill", "date": "2022-01-01"}, False),
    ],
)
def test_the_scripted_user_approves_only_the_calls_its_task_needs(arguments: dict[str, object], asked: bool) -> None:
    banking = agentdojo.suite("banking")
    user_task = banking.get_user_task_by_id("user_task_0")
    env = user_task.init_environment(banking.load_and_inject_default_environment({}))
    assert agentdojo.asked_for("send_money", arguments, user_task.ground_truth(env)) is asked
