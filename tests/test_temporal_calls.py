"""Each model call and each tool call an activity, each sub-agent call a child workflow:
what Temporal's own record of a turn shows (asked of its client), against the reactchat
store's record (each event in it once), with workers SIGKILLed mid-call."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from dataclasses import dataclass

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed: pip install 'reactchat[temporal]'")

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus

from reactchat.messages import AnswerEvent, Event, ThoughtEvent, UserEvent
from reactchat.store import resolve_store
from reactchat.temporal._calls import store_call
from reactchat.temporal._proxies import StoreCall, event_json
from temporal_support import NEEDS_TEMPORAL, Workers, temporal_address, turns_of, wait_for, workers

pytestmark = NEEDS_TEMPORAL
__all__ = ["temporal_address", "workers"]  # fixtures, used by name


@dataclass
class Activity:
    """One activity of a workflow as its history tells it."""

    name: str
    #: the attempt that ended it (Temporal records only the last one's start)
    attempt: int
    #: its retry policy's limit (0: none)
    maximum_attempts: int
    #: how it ended: ``completed``, ``timed_out``, ``failed``, ``cancelled`` or ``open``
    end: str


async def history(client: Client, workflow_id: str) -> list[HistoryEvent]:
    """The workflow's history, as Temporal keeps it."""
    return [e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]


def activities(events: list[HistoryEvent]) -> list[Activity]:
    """The activities of a history, in the order they were scheduled."""
    found: dict[int, Activity] = {}
    ends = {
        EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: ("completed", "activity_task_completed_event_attributes"),
        EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: ("timed_out", "activity_task_timed_out_event_attributes"),
        EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: ("failed", "activity_task_failed_event_attributes"),
        EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: ("cancelled", "activity_task_canceled_event_attributes"),
    }
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled = event.activity_task_scheduled_event_attributes
            found[event.event_id] = Activity(
                scheduled.activity_type.name, 0, scheduled.retry_policy.maximum_attempts, "open"
            )
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            found[started.scheduled_event_id].attempt = started.attempt
        elif event.event_type in ends:
            end, field = ends[event.event_type]
            found[getattr(event, field).scheduled_event_id].end = end
    return list(found.values())


def children(events: list[HistoryEvent]) -> list[str]:
    """The ids of the child workflows a history started."""
    return [
        e.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
    ]


async def tree(client: Client, workflow_id: str) -> dict[str, list[HistoryEvent]]:
    """The histories of a workflow and of every child workflow under it, by id."""
    histories = {workflow_id: await history(client, workflow_id)}
    for child in children(histories[workflow_id]):
        histories.update(await tree(client, child))
    return histories


async def stored(workers: Workers, session: str) -> list[Event]:
    store = resolve_store(workers.db)
    try:
        return await store.events(session)
    finally:
        await store.close()


def once(events: list[Event]) -> None:
    """Each event of the log is there once: no two share their kind, place, call and text."""
    keys = Counter(
        (e.type, e.turn, e.step, e.agent, e.run, getattr(e, "call_id", None), getattr(e, "text", None)) for e in events
    )
    assert [k for k, n in keys.items() if n > 1] == []
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def pid_of(line: str) -> str:
    return line.split()[-1]


def kill(workers: Workers, pid: str) -> None:
    process = next(p for p in workers.processes if str(p.pid) == pid)
    process.send_signal(signal.SIGKILL)


async def test_a_store_call_run_again_by_a_replaying_worker_appends_its_events_once(durable_url: str) -> None:
    # a local activity a worker ran but died before recording is run again on replay
    store = resolve_store(durable_url)
    try:
        await store.create_session("s")
        opening = [event_json(UserEvent(session="s", turn=1, text="hi"))]
        lock = StoreCall("try_lock_read", "s", ["temporal-run-1", 60.0, 0], opening, 0)
        first, again = await store_call(store, lock), await store_call(store, lock)
        assert (first.seqs, first.events, again.seqs, again.events) == ([1], [], [1], [])
        step = [event_json(ThoughtEvent(session="s", turn=1, step=1, text="t"))]
        assert (await store_call(store, StoreCall("append", "s", [], step, 1))).seqs == [2]
        assert (await store_call(store, StoreCall("append", "s", [], step, 1))).seqs == [2]
        # an activity that carried ``t`` failed after making it: ``t`` waits again, with ``u``
        more = [*step, event_json(ThoughtEvent(session="s", turn=1, step=2, text="u"))]
        assert (await store_call(store, StoreCall("append", "s", [], more, 1))).seqs == [2, 3]
        answer = [event_json(AnswerEvent(session="s", turn=1, step=3, text="a"))]
        end = StoreCall("append_unlock", "s", ["temporal-run-1"], answer, 3)
        assert (await store_call(store, end)).seqs == (await store_call(store, end)).seqs == [4]
        other = [event_json(ThoughtEvent(session="s", turn=1, step=1, text="another"))]
        assert (await store_call(store, StoreCall("append", "s", [], other, 1))).seqs == [5]  # not ours: made
        texts = [(e.type, e.text) for e in await store.events("s")]
        assert texts == [("user", "hi"), ("thought", "t"), ("thought", "u"), ("answer", "a"), ("thought", "another")]
        assert await store.try_lock("s", "someone-else", 60.0)  # append_unlock released the lock
    finally:
        await store.close()


@pytest.mark.parametrize("workers", [1.5], indirect=True)
async def test_a_model_call_is_an_activity_temporal_retries_after_its_worker_is_killed(workers: Workers) -> None:
    workers.start("team:thinker")
    workers.start("team:thinker")
    turns = await turns_of(workers)
    sent = asyncio.create_task(turns.send("m1", "What is there?"))
    await wait_for(lambda: any(line.startswith("model") for line in workers.bumps()))
    first = pid_of(workers.bumps()[0])
    kill(workers, first)  # mid-call: the model's reply never came back
    done = await asyncio.wait_for(sent, 90)
    assert (done.status, done.answer) == ("done", "read: looked 5"), done
    calls = [line for line in workers.bumps() if line.startswith("model")]
    assert len(calls) == 3 and pid_of(calls[1]) != first, calls  # the killed call, its retry, the final one
    calls_made = activities(await history(await turns_of_client(workers), "reactchat-m1"))
    models = [(a.attempt, a.end) for a in calls_made if a.name == "reactchat.model"]
    assert models == [(2, "completed"), (1, "completed")], calls_made  # Temporal retried the first
    events = await stored(workers, "m1")
    once(events)
    assert [e.type for e in events] == ["user", "thought", "action", "observation", "answer"]


@pytest.mark.parametrize("workers", [1.5], indirect=True)
async def test_a_read_tool_call_is_an_activity_temporal_retries_after_its_worker_is_killed(workers: Workers) -> None:
    workers.start("team:reader")
    workers.start("team:reader")
    turns = await turns_of(workers)
    sent = asyncio.create_task(turns.send("r1", "What is there?"))
    await wait_for(lambda: workers.bumps())  # the look has started
    kill(workers, pid_of(workers.bumps()[0]))
    done = await asyncio.wait_for(sent, 90)
    assert (done.status, done.answer) == ("done", "read: looked 5"), done
    tools = [a for a in activities(await history(await turns_of_client(workers), "reactchat-r1"))
             if a.name == "reactchat.tool"]  # fmt: skip
    assert [(t.attempt, t.maximum_attempts, t.end) for t in tools] == [(2, 0, "completed")], tools
    events = await stored(workers, "r1")
    once(events)
    observations = [(e.text, e.interrupted) for e in events if e.type == "observation"]
    assert observations == [("looked 5", False)]  # the retry's result, recorded once


@pytest.mark.parametrize("workers", [1.5], indirect=True)
async def test_an_unsafe_tool_call_is_one_attempt_whose_loss_puts_it_in_doubt(workers: Workers) -> None:
    workers.start()
    workers.start()
    turns = await turns_of(workers)
    client = await turns_of_client(workers)
    assert (await turns.send("u1", "How far is Paris?")).status == "waiting"
    reply = asyncio.create_task(turns.send("u1", "Lyon"))
    await wait_for(lambda: workers.bumps())  # the bump has started: its effect is written
    kill(workers, pid_of(workers.bumps()[0]))
    doubt = await asyncio.wait_for(reply, 90)
    assert (doubt.status, doubt.pending) == ("waiting", "in_doubt"), doubt
    assert len(workers.bumps()) == 1  # not retried by Temporal
    lost = [a for h in (await tree(client, "reactchat-u1")).values() for a in activities(h)
            if a.name == "reactchat.tool" and a.end == "timed_out"]  # fmt: skip
    assert [(a.attempt, a.maximum_attempts) for a in lost] == [(1, 1)], lost
    done = await turns.send("u1", "retry")  # the user says so: it runs again, once
    assert (done.status, done.answer) == ("done", "boss: found: fetched: Lyon"), done
    assert len(workers.bumps()) == 2
    events = await stored(workers, "u1")
    once(events)
    bumped = [e for e in events if e.type == "observation" and e.agent == "boss/researcher/fetcher"]
    assert [o.text for o in bumped] == ["Lyon", "bumped 7"]


async def test_a_sub_agent_runs_as_a_child_workflow_whose_question_pauses_the_parent(workers: Workers) -> None:
    workers.start()
    turns = await turns_of(workers)
    client = await turns_of_client(workers)
    asked = await turns.send("c1", "How far is Paris?")
    assert (asked.status, asked.question) == ("waiting", "Where are you?"), asked
    histories = await tree(client, "reactchat-c1")
    assert len(histories) == 3  # boss, its researcher, the researcher's fetcher
    for workflow_id in histories:
        description = await client.get_workflow_handle(workflow_id).describe()
        expected = ("reactchat.turn", WorkflowExecutionStatus.RUNNING) if workflow_id == "reactchat-c1" else (
            "reactchat.nested", WorkflowExecutionStatus.COMPLETED)  # fmt: skip
        assert (description.workflow_type, description.status) == expected, workflow_id
    assert not await turns.running("c1")  # the parent waits for the answer, nothing runs
    fetcher = histories[max(histories, key=len)]  # the deepest: its id names its parent's
    assert [a.name for a in activities(fetcher)] == ["reactchat.model", "reactchat.tool"]  # it asked
    done = await turns.send("c1", "Lyon")
    assert (done.status, done.answer) == ("done", "boss: found: fetched: Lyon"), done
    events = await stored(workers, "c1")
    once(events)
    assert Counter(e.agent for e in events) == {"boss": 5, "boss/researcher": 5, "boss/researcher/fetcher": 10}


async def turns_of_client(workers: Workers) -> Client:
    return await Client.connect(workers.address)


async def test_a_worker_started_with_stretches_runs_a_turn_as_one_activity(workers: Workers) -> None:
    workers.start("team:thinker", "--stretches")
    turns = await turns_of(workers)
    done = await asyncio.wait_for(turns.send("s1", "What is there?"), 90)
    assert (done.status, done.answer) == ("done", "read: looked 5"), done
    names = [a.name for a in activities(await history(await turns_of_client(workers), "reactchat-s1"))]
    assert "reactchat.stretch" in names and "reactchat.model" not in names and "reactchat.tool" not in names, names
    once(await stored(workers, "s1"))
