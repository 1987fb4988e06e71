"""Forks through the public API, on every store: ``agent.fork(session, before=seq)``.

A scripted trip planner looks a city up (a ``read`` tool: its call count proves reuse) and
books it (an ``unsafe`` tool: it must wait for approval in a fork that repeats it).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents_team import ReactScript, deep_team
from durable_support import effects_of
from reactchat import Agent, tool
from reactchat.engine.session import SessionState
from reactchat.errors import NoSuchEvent, SessionNotFound
from reactchat.messages import ActionEvent, Event, ObservationEvent, UserEvent
from reactchat.store import Store, resolve_store


class Trip:
    """The tools of a trip planner and how often each ran."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

        @tool(idempotent=True)
        def lookup(city: str) -> str:
            """Look a city up."""
            self.calls["lookup", city] += 1
            return f"{city} has {len(self.calls)} hotels"

        @tool
        def book(city: str) -> str:
            """Book a hotel in a city."""
            self.calls["book", city] += 1
            return f"booked in {city}"

        @tool(idempotent=True, volatile=True)
        def clock() -> str:
            """The time now."""
            self.calls["clock", ""] += 1
            return f"tick {self.calls['clock', '']}"

        self.tools = [lookup, book, clock]

    def agent(self, store: Store) -> Agent:
        """A planner: ``trip to CITY`` looks it up and books it; ``time`` reads the clock."""

        def acts(task: str) -> list[tuple[str, dict[str, object]]]:
            if task.startswith("trip to "):
                city = task.removeprefix("trip to ")
                return [("lookup", {"city": city}), ("book", {"city": city})]
            return [("clock", {})] if task == "time" else []

        model = ReactScript(acts, lambda task, seen: f"{task}: {' / '.join(seen) or 'hello'}")
        return Agent(model=model, tools=self.tools, store=store, ask_user=False)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    opened = resolve_store(store_url)
    yield opened
    await opened.close()


def seq_of(events: list[Event], kind: type[Event], **fields: object) -> int:
    """The seq of the first event of ``kind`` whose fields have these values."""
    return next(e.seq for e in events if isinstance(e, kind) and all(getattr(e, k) == v for k, v in fields.items()))


def bodies(events: list[Event]) -> list[dict[str, object]]:
    """The events as stored, without their session (a fork's copies differ only there)."""
    return [e.model_dump(exclude={"session"}) for e in events]


async def two_turns(agent: Agent) -> str:
    session = (await agent.arun("hello")).session
    assert (await agent.arun("trip to Paris", session)).status == "done"
    return session


async def test_a_fork_copies_the_events_before_the_seq_and_records_its_origin(store: Store) -> None:
    trip = Trip()
    agent = trip.agent(store)
    session = await two_turns(agent)
    original = await store.events(session)
    before = seq_of(original, UserEvent, text="trip to Paris")
    new = await agent.fork(session, before=before)
    copied = await store.events(new)
    assert [e.seq for e in copied] == list(range(1, before))
    assert {e.session for e in copied} == {new}
    assert bodies(copied) == bodies(original[: before - 1])
    assert await store.origin(new) == (session, before)
    assert await store.origin(session) is None
    assert bodies(await store.events(session)) == bodies(original)  # the original is untouched
    whole = await agent.fork(session)
    assert bodies(await store.events(whole)) == bodies(original)
    assert await store.origin(whole) == (session, len(original) + 1)


async def test_a_fork_point_that_is_no_event_is_refused_and_nothing_is_made(store: Store) -> None:
    agent = Trip().agent(store)
    session = await two_turns(agent)
    known = set(await store.list_sessions())
    for seq in (0, -1, len(await store.events(session)) + 1):
        with pytest.raises(NoSuchEvent, match=f"no event {seq} to fork before"):
            await agent.fork(session, before=seq)
    with pytest.raises(SessionNotFound):
        await agent.fork("no-such-session", before=1)
    assert set(await store.list_sessions()) == known


async def test_before_a_message_is_edit_and_resend_reusing_reads_and_asking_before_effects(store: Store) -> None:
    trip = Trip()
    agent = trip.agent(store)
    session = await two_turns(agent)
    original = bodies(await store.events(session))
    before = seq_of(await store.events(session), UserEvent, text="trip to Paris")

    resent = await agent.fork(session, before=before)
    state = SessionState.from_events(resent, await store.events(resent))
    assert [(t.question, t.status) for t in state.turns] == [("hello", "done")]
    result = await agent.arun("trip to Paris", resent)
    assert result.status == "waiting" and result.pending is not None
    assert (result.pending.kind, result.pending.tool, result.pending.input) == ("approval", "book", {"city": "Paris"})
    assert trip.calls["lookup", "Paris"] == 1  # reused from the original, not run again
    result = await agent.arun("yes", resent)
    assert result.status == "done" and result.answer == "trip to Paris: Paris has 1 hotels / booked in Paris"
    assert trip.calls["book", "Paris"] == 2  # approved, so it ran

    edited = await agent.fork(session, before=before)
    result = await agent.arun("trip to Rome", edited)  # other arguments: nothing to reuse, nothing repeated
    assert result.status == "done" and result.answer == "trip to Rome: Rome has 3 hotels / booked in Rome"
    assert (trip.calls["lookup", "Rome"], trip.calls["book", "Rome"]) == (1, 1)
    assert bodies(await store.events(session)) == original


async def test_inside_a_turn_the_fork_goes_on_from_there_on_resume(store: Store) -> None:
    trip = Trip()
    agent = trip.agent(store)
    session = await two_turns(agent)
    events = await store.events(session)

    # cut between the lookup and its observation: the call is made again, and reuses the result
    new = await agent.fork(session, before=seq_of(events, ObservationEvent, tool="lookup"))
    assert SessionState.from_events(new, await store.events(new)).last.status == "interrupted"  # type: ignore[union-attr]
    result = await agent.resume(new)
    assert result.status == "waiting" and result.pending is not None and result.pending.tool == "book"
    assert trip.calls["lookup", "Paris"] == 1

    # cut between the booking and its observation: not in doubt in the fork, it asks first
    new = await agent.fork(session, before=seq_of(events, ObservationEvent, tool="book"))
    result = await agent.resume(new)
    assert result.status == "waiting" and result.pending is not None and result.pending.kind == "approval"
    result = await agent.arun("no, not twice", new)
    assert result.status == "done" and "not twice" in (result.answer or "")
    assert trip.calls["book", "Paris"] == 1

    # cut before the final answer: the model answers again from what the fork holds
    new = await agent.fork(session, before=events[-1].seq)
    result = await agent.resume(new)
    assert result.status == "done" and result.answer == "trip to Paris: Paris has 1 hotels / booked in Paris"
    assert sum(trip.calls.values()) == 2


async def test_a_volatile_read_runs_again_in_a_fork(store: Store) -> None:
    trip = Trip()
    agent = trip.agent(store)
    session = (await agent.arun("time")).session
    assert trip.calls["clock", ""] == 1
    new = await agent.fork(session, before=1)
    result = await agent.arun("time", new)
    assert result.answer == "time: tick 2" and trip.calls["clock", ""] == 2


async def test_a_fork_at_depth_two_answers_again_and_asks_before_the_effect_repeats(
    store: Store, tmp_path: Path
) -> None:
    effects = tmp_path / "effects"
    agent = deep_team(store, str(effects))
    first = await agent.arun("go")
    assert first.status == "waiting" and first.pending is not None
    assert first.pending.agent == "boss/researcher/fetcher"
    done = await agent.arun("Lyon", first.session)
    assert done.status == "done" and len(effects_of(effects)) == 1
    events = await store.events(first.session)

    # before the reply to the fetcher's question: the fork waits on that question again
    new = await agent.fork(first.session, before=seq_of(events, UserEvent, text="Lyon"))
    again = await agent.state(new)
    assert again.last is not None and again.last.status == "waiting"
    result = await agent.arun("Paris", new)
    assert result.status == "waiting" and result.pending is not None
    assert (result.pending.kind, result.pending.tool, result.pending.agent) == (
        "approval",
        "bump",
        "boss/researcher/fetcher",
    )
    result = await agent.arun("no, it is booked already", new)
    assert result.status == "done" and result.answer == "boss: found: fetched: Paris"
    refused = [e for e in await store.events(new) if isinstance(e, ObservationEvent) and e.tool == "bump"]
    assert len(refused) == 1 and "it is booked already" in refused[0].text
    assert sum(effects_of(effects).values()) == 1  # the effect happened once, in the original
    assert [e.tool for e in await store.events(first.session) if isinstance(e, ActionEvent)] == [
        e.tool for e in events if isinstance(e, ActionEvent)
    ]


async def test_a_database_from_before_forks_gains_the_origin_columns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = resolve_store(url)
    session = await store.create_session()
    await store.close()
    with sqlite3.connect(tmp_path / "old.db") as db:  # as the schema was before forks
        db.execute("ALTER TABLE sessions DROP COLUMN forked_from")
        db.execute("ALTER TABLE sessions DROP COLUMN forked_before")
        db.execute("DELETE FROM reactchat_migrations WHERE name = 'm007_fork_origin'")
    store = resolve_store(url)
    assert await store.origin(session) is None
    agent = Trip().agent(store)
    await agent.arun("hello", session)
    new = await agent.fork(session)
    assert await store.origin(new) == (session, 3)
    await store.close()


def reorder_first_body(url: str, session: str) -> None:
    """Rewrite the session's first event as JSON whose first key is not ``session`` (a body
    another writer could have made), through the database's own driver."""
    if url.startswith("sqlite"):
        db: Any = sqlite3.connect(url.removeprefix("sqlite:///"))
    else:
        import psycopg

        db = psycopg.connect(url, autocommit=True)
    mark = "?" if url.startswith("sqlite") else "%s"
    with db:
        (body,) = db.execute(f"SELECT body FROM events WHERE session = {mark} AND seq = 1", (session,)).fetchone()
        fields = body if isinstance(body, dict) else json.loads(body)
        moved = json.dumps({"type": fields.pop("type"), **fields})
        db.execute(f"UPDATE events SET body = {mark} WHERE session = {mark} AND seq = 1", (moved, session))


async def test_an_event_stored_in_another_key_order_is_copied_too(durable_url: str) -> None:
    store = resolve_store(durable_url)
    agent = Trip().agent(store)
    session = await two_turns(agent)
    reorder_first_body(durable_url, session)
    new = await agent.fork(session)
    copied = await store.events(new)
    assert {e.session for e in copied} == {new}
    assert bodies(copied) == bodies(await store.events(session))
    await store.close()
