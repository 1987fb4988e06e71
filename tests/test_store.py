"""The Store contract, on every backend: memory, a real SQLite file, a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loop_watch import loop_gaps
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    QuestionEvent,
    ThoughtEvent,
    Usage,
    UserEvent,
)
from reactchat.store import SessionNotFound, Store, resolve_store


def every_kind_of_event(session: str) -> list[Event]:
    return [
        UserEvent(session=session, turn=1, text="Où est Paris ? 東京 \U0001f600"),
        ThoughtEvent(
            session=session, turn=1, step=1, text="think", raw=" think\nAction: x", usage=Usage(input_tokens=3)
        ),
        ActionEvent(session=session, turn=1, step=1, call_id="c1", tool="x", input={"a": [1, 2], "b": None}),
        ObservationEvent(session=session, turn=1, step=1, call_id="c1", tool="x", text="nul \x00 byte", truncated=5),
        ActionEvent(session=session, turn=1, step=2, call_id="c2", tool="ask_user", input="raw string input"),
        QuestionEvent(session=session, turn=1, step=2, call_id="c2", question="Where?"),
        ErrorEvent(session=session, turn=1, step=3, kind="format", message="fix it", raw="garbage"),
        AnswerEvent(session=session, turn=1, step=4, text="42", status="stopped", reason="max_steps", best_effort=True),
    ]


async def test_events_round_trip_in_order(store_url: str) -> None:
    store = resolve_store(store_url)
    try:
        session = await store.create_session()
        written = every_kind_of_event(session)
        for event in written:
            await store.append(event)
        assert await store.events(session) == written
        assert await store.events(session, since=5) == written[5:]
        assert await store.events(session, since=len(written)) == []
        assert await store.exists(session)
        assert not await store.exists("nope")
    finally:
        await store.close()


async def test_events_appended_together_take_the_next_places_in_order(store_url: str) -> None:
    store = resolve_store(store_url)
    try:
        session, other = await store.create_session(), await store.create_session()
        written = every_kind_of_event(session)
        for group in (written[:1], written[1:3], written[3:4], written[4:8]):
            await store.append(*group)
            await store.append(UserEvent(session=other, turn=1, text="between"))
        assert [e.seq for e in written] == list(range(1, 9))
        assert await store.events(session) == written
        assert [e.seq for e in await store.events(other)] == [1, 2, 3, 4]
    finally:
        await store.close()


async def test_sessions_are_separate_and_listed_newest_first(store_url: str) -> None:
    store = resolve_store(store_url)
    try:
        first = await store.create_session()
        await asyncio.sleep(0.01)
        second = await store.create_session("my-id")
        assert second == "my-id"
        assert await store.create_session("my-id") == "my-id"  # idempotent
        await store.append(UserEvent(session=first, turn=1, text="one"))
        assert await store.events(second) == []
        assert await store.list_sessions() == [second, first]
        assert await store.list_sessions(limit=1) == [second]
        assert await store.delete_session(first)
        assert not await store.delete_session(first)
        assert not await store.exists(first)
        with pytest.raises(SessionNotFound):
            await store.events(first)
    finally:
        await store.close()


async def test_unknown_session_is_refused(store_url: str) -> None:
    store = resolve_store(store_url)
    try:
        with pytest.raises(SessionNotFound):
            await store.events("missing")
        with pytest.raises(SessionNotFound):
            await store.append(UserEvent(session="missing", turn=1, text="hi"))
    finally:
        await store.close()


async def test_sessions_created_at_once_all_exist(store_url: str) -> None:
    """Concurrent creations (one statement on PostgreSQL), an id given twice among them."""
    store = resolve_store(store_url)
    try:
        given = [f"given-{i}" for i in range(6)] + ["given-2"]
        made = await asyncio.gather(
            *(store.create_session(g) for g in given), *(store.create_session() for _ in range(6))
        )
        assert made[:7] == given and len(set(made)) == 12
        assert all([await store.exists(s) for s in made])
        assert sorted(await store.list_sessions(limit=100)) == sorted(set(made))
    finally:
        await store.close()


async def test_turn_lock_belongs_to_one_owner(store_url: str) -> None:
    store = resolve_store(store_url)
    try:
        session = await store.create_session()
        assert await store.try_lock(session, "a", 60)
        assert await store.try_lock(session, "a", 60)  # the holder may take it again
        assert not await store.try_lock(session, "b", 60)
        await store.unlock(session, "b")  # not the holder: no effect
        assert not await store.try_lock(session, "b", 60)
        await store.unlock(session, "a")
        assert await store.try_lock(session, "b", 60)
        other = await store.create_session()
        assert await store.try_lock(other, "a", 60)  # locks are per session
    finally:
        await store.close()


async def test_one_store_serves_concurrent_tasks(store_url: str) -> None:
    """A server shares one store between its requests: concurrent appends and lock attempts."""
    store = resolve_store(store_url)
    try:
        sessions = [await store.create_session() for _ in range(8)]

        async def write(session: str) -> None:
            for i in range(25):
                await store.append(UserEvent(session=session, turn=1, step=i, text=f"{session} {i}"))

        await asyncio.gather(*(write(s) for s in sessions))
        for session in sessions:
            assert [e.text for e in await store.events(session) if isinstance(e, UserEvent)] == [
                f"{session} {i}" for i in range(25)
            ]
        won = await asyncio.gather(*(store.try_lock(sessions[0], f"owner {i}", 60) for i in range(20)))
        assert won.count(True) == 1
    finally:
        await store.close()


def text_of(event: Event) -> str:
    assert isinstance(event, UserEvent)
    return event.text


async def test_try_lock_read_takes_the_lock_then_reads(store_url: str) -> None:
    """``try_lock_read``: the turn lock and what came after a known point, or None (nothing read)."""
    store = resolve_store(store_url)
    try:
        sessions = [await store.create_session() for _ in range(5)]
        for n, session in enumerate(sessions):
            await store.append(*(UserEvent(session=session, turn=1, step=i, text=f"{n}.{i}") for i in range(n)))
        # concurrent calls share a batch on PostgreSQL: each gets its own session's events
        got = await asyncio.gather(*(store.try_lock_read(s, "a", 60, 1) for s in sessions))
        assert [[text_of(e) for e in events or []] for events in got] == [
            [],
            [],
            ["2.1"],
            ["3.1", "3.2"],
            ["4.1", "4.2", "4.3"],
        ]
        assert await store.try_lock_read(sessions[4], "b", 60, 0) is None  # held by a
        await store.unlock(sessions[4], "a")
        assert [e.seq for e in await store.try_lock_read(sessions[4], "b", 60, 0) or []] == [1, 2, 3, 4]
        assert await store.try_lock_read(sessions[3], "b", 60, None) is None
        await store.unlock(sessions[3], "a")
        assert await store.try_lock_read(sessions[3], "b", 60, None) == []  # locked, nothing read
        with pytest.raises(SessionNotFound):
            await store.try_lock_read("missing", "c", 60, 0)
        assert await store.try_lock("missing", "d", 60)  # the lock was given back
    finally:
        await store.close()


async def test_try_lock_read_appends_the_first_event_only_if_nothing_came_since(store_url: str) -> None:
    """``try_lock_read(..., then)``: the turn's first event is appended with the lock when the read
    finds nothing after ``since`` (the session as its caller saw it); otherwise nothing is."""
    store = resolve_store(store_url)
    other = store if store_url == "memory:" else resolve_store(store_url)
    try:
        session = await store.create_session()
        first = UserEvent(session=session, turn=1, text="first")
        assert await store.try_lock_read(session, "a", 60, 0, (first,)) == []
        assert first.seq == 1
        assert [text_of(e) for e in await other.events(session)] == ["first"]
        assert await store.try_lock_read(session, "b", 60, 1, (UserEvent(session=session, turn=2, text="b"),)) is None
        await store.unlock(session, "a")
        late = UserEvent(session=session, turn=2, text="late")
        newer = await store.try_lock_read(session, "b", 60, 0, (late,))  # saw nothing: first came since
        assert [text_of(e) for e in newer or []] == ["first"]
        assert [text_of(e) for e in await other.events(session)] == ["first"]  # late not appended
        await store.unlock(session, "b")
        fresh = await store.create_session()
        assert await store.try_lock_read(fresh, "c", 60, None, (UserEvent(session=fresh, turn=1, text="new"),)) == []
        assert [text_of(e) for e in await other.events(fresh)] == ["new"]
        with pytest.raises(SessionNotFound):
            await store.try_lock_read("missing", "d", 60, None, (UserEvent(session="missing", turn=1, text="x"),))
        assert await other.try_lock("missing", "e", 60)  # the lock was given back (or never taken)
    finally:
        await store.close()
        if other is not store:
            await other.close()


async def test_append_unlock_ends_a_turn_with_its_last_events(store_url: str) -> None:
    """``append_unlock``: the events durable and the turn lock gone, if the caller held it;
    if the append fails, the lock stays."""
    store = resolve_store(store_url)
    other = store if store_url == "memory:" else resolve_store(store_url)
    try:
        session = await store.create_session()
        assert await store.try_lock(session, "a", 60)
        await store.append_unlock("b", UserEvent(session=session, turn=1, text="from b"))
        assert not await other.try_lock(session, "b", 60)  # not b's to release
        answer = AnswerEvent(session=session, turn=1, step=1, text="done")
        await store.append_unlock("a", UserEvent(session=session, turn=1, step=1, text="last"), answer)
        assert answer.seq == 3
        assert [e.seq for e in await other.events(session)] == [1, 2, 3]
        assert await other.try_lock(session, "b", 60)
        assert await store.try_lock("missing", "c", 60)
        with pytest.raises(SessionNotFound):
            await store.append_unlock("c", UserEvent(session="missing", turn=1, text="lost"))
        assert not await other.try_lock("missing", "d", 60)  # still c's
    finally:
        await store.close()
        if other is not store:
            await other.close()


async def test_a_lock_whose_read_fails_is_given_back(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL reads under the lock in a statement after the lock's: if that read fails
    (in the database, or its rows cannot be read), the caller gets the error and the lock is
    not left held by nobody, nor its session marked as running."""
    import psycopg

    from reactchat.store import postgres

    one, two = resolve_store(postgres_url), resolve_store(postgres_url)
    try:
        session = await one.create_session()

        def broken(rows: object, asks: object) -> list[Event]:
            raise RuntimeError("the read failed")

        with monkeypatch.context() as patch:
            patch.setattr(postgres, "_found", broken)
            with pytest.raises(RuntimeError, match="the read failed"):
                await one.try_lock_read(session, "a", 60, 0)
        with monkeypatch.context() as patch:
            patch.setattr(postgres, "_READ_ONE", "SELECT 1, %s::int / 0, %s::text")
            with pytest.raises(psycopg.errors.DivisionByZero):
                await one.try_lock_read(session, "a", 60, 0)
        with psycopg.connect(postgres_url, autocommit=True) as db:
            assert db.execute("SELECT count(*) FROM running_turns").fetchone() == (0,)
        assert await two.try_lock(session, "b", 60)
        await two.unlock(session, "b")
        assert await one.try_lock_read(session, "a", 60, 0) == []
    finally:
        await one.close()
        await two.close()


async def test_a_lock_read_sees_everything_the_last_holder_wrote(durable_url: str) -> None:
    """Two workers: the one that gets the lock as the other lets it go reads every event
    the other appended before letting go (the read is not older than the lock)."""
    one, two = resolve_store(durable_url), resolve_store(durable_url)

    async def lock_soon(since: int) -> list[Event]:
        while (got := await two.try_lock_read(session, "two", 60, since)) is None:
            await asyncio.sleep(0)
        return got

    try:
        session = await one.create_session()
        for n in range(15):
            assert await one.try_lock(session, "one", 60)
            waiter = asyncio.ensure_future(lock_soon(since=n))
            await asyncio.sleep(0.002 * (n % 3))
            await one.append(UserEvent(session=session, turn=n + 1, text=f"turn {n}"))
            await one.unlock(session, "one")
            assert [text_of(e) for e in await asyncio.wait_for(waiter, 10)] == [f"turn {n}"]
            await two.unlock(session, "two")
    finally:
        await one.close()
        await two.close()


async def test_an_append_to_a_deleted_session_fails_alone(store_url: str) -> None:
    """Appends of many sessions may share a commit: one that cannot be written does not sink the others."""
    store = resolve_store(store_url)
    try:
        sessions = [await store.create_session() for _ in range(6)]
        await store.delete_session(sessions[3])
        outcomes = await asyncio.gather(
            *(store.append(UserEvent(session=s, turn=1, text=s)) for s in sessions), return_exceptions=True
        )
        assert [type(o) for o in outcomes] == [type(None)] * 3 + [SessionNotFound] + [type(None)] * 2
        for session in sessions[:3] + sessions[4:]:
            assert [e.text for e in await store.events(session) if isinstance(e, UserEvent)] == [session]
    finally:
        await store.close()


async def test_postgres_concurrent_appends_share_transactions(postgres_url: str) -> None:
    """Group commit: rows written by one statement share their transaction id (``xmin``)."""
    import psycopg

    store = resolve_store(postgres_url)
    try:
        sessions = [await store.create_session() for _ in range(40)]

        async def write(session: str) -> None:
            for i in range(5):
                await store.append(UserEvent(session=session, turn=1, step=i, text=str(i)))

        await asyncio.gather(*(write(s) for s in sessions))
        with psycopg.connect(postgres_url) as db:
            row = db.execute("SELECT count(*), count(DISTINCT xmin::text) FROM events").fetchone()
        assert row is not None and row[0] == 200
        assert row[1] <= 100, f"{row[1]} transactions for 200 appends"
        for session in sessions:
            assert [e.text for e in await store.events(session) if isinstance(e, UserEvent)] == list("01234")
    finally:
        await store.close()


async def test_sqlite_lock_wait_does_not_stall_the_event_loop(sqlite_url: str) -> None:
    """Another connection holds the write lock: the append waits for it, the other sessions do not."""
    store = resolve_store(sqlite_url)
    try:
        session = await store.create_session()
        other = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        async with loop_gaps(0.01) as gaps:
            append = asyncio.create_task(store.append(UserEvent(session=session, turn=1, text="waited")))
            await asyncio.sleep(0.5)
            assert not append.done()  # still waiting for the lock
            other.execute("COMMIT")
            other.close()
            await asyncio.wait_for(append, 5)
        assert len(gaps) > 20 and max(gaps) < 0.2, max(gaps)
        assert [e.text for e in await store.events(session) if isinstance(e, UserEvent)] == ["waited"]
    finally:
        await store.close()


async def test_sqlite_wal_is_checkpointed_by_the_store(sqlite_url: str) -> None:
    """Commits on the event loop never checkpoint; the store's thread does, so the WAL does not grow forever."""
    from reactchat.store.sqlite import CHECKPOINT_EVERY, WAL_RESTART_FRAMES

    store = resolve_store(sqlite_url)
    try:
        session = await store.create_session()
        for i in range(CHECKPOINT_EVERY * 8):
            await store.append(UserEvent(session=session, turn=1, step=i, text="x" * 500))
        await asyncio.sleep(0.2)  # the last checkpoint runs on the store's thread
        with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
            busy, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0 and 0 < frames < WAL_RESTART_FRAMES + CHECKPOINT_EVERY * 5, frames
    finally:
        await store.close()


async def test_sqlite_writes_go_on_while_a_passive_checkpoint_runs(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a restarting checkpoint makes the loop's writes wait behind it; a passive one (here a
    long one: a large WAL copied to a slow disk) holds no write up."""
    import threading

    from reactchat.store import sqlite as sqlite_store

    copying = threading.Event()
    done = threading.Event()

    def long_passive_checkpoint(self: object) -> None:
        copying.set()
        done.wait(10)

    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 5)
    monkeypatch.setattr(sqlite_store.SqliteStore, "_checkpoint_wal", long_passive_checkpoint)
    store = resolve_store(sqlite_url)
    try:
        session = await store.create_session()
        for i in range(6):  # the fifth write starts a checkpoint on the store's thread
            await store.append(UserEvent(session=session, turn=1, step=i, text="x"))
        assert await asyncio.to_thread(copying.wait, 30)
        for i in range(6, 12):  # while it runs
            await asyncio.wait_for(store.append(UserEvent(session=session, turn=1, step=i, text="x")), 2)
        assert not done.is_set()
        assert [e.step for e in await store.events(session)] == list(range(12))
    finally:
        done.set()
        await store.close()


async def test_turn_lock_excludes_other_connections(durable_url: str) -> None:
    one, two = resolve_store(durable_url), resolve_store(durable_url)
    try:
        session = await one.create_session()
        assert await one.try_lock(session, "a", 60)
        assert not await two.try_lock(session, "b", 60)
        await one.unlock(session, "a")
        assert await two.try_lock(session, "b", 60)
        assert not await one.try_lock(session, "a", 60)
    finally:
        await one.close()
        await two.close()


async def test_a_dead_holder_does_not_keep_the_lock(durable_url: str) -> None:
    """A process killed while holding the lock: the session is free again right away, not after the TTL."""
    store = resolve_store(durable_url)
    try:
        session = await store.create_session()
        child = subprocess.run(  # no line on stdin: it dies as soon as it holds the lock
            [sys.executable, "-c", LOCK_AND_DIE, durable_url, session],
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.stdout.strip() == "locked", child.stderr
        assert child.returncode == -9
        assert await wait_for_lock(store, session, "parent")
    finally:
        await store.close()


async def wait_for_lock(store: Store, session: str, owner: str, seconds: float = 5.0) -> bool:
    """PostgreSQL notices a dead client's closed socket within milliseconds, not instantly."""
    for _ in range(int(seconds / 0.02)):
        if await store.try_lock(session, owner, 60):
            return True
        await asyncio.sleep(0.02)
    return False


#: a process that takes a session's turn lock, says so, and SIGKILLs itself on a line of stdin
LOCK_AND_DIE = (
    "import asyncio, os, signal, sys\n"
    "from reactchat.store import resolve_store\n"
    "async def main():\n"
    "    store = resolve_store(sys.argv[1])\n"
    "    assert await store.try_lock(sys.argv[2], 'child', 3600)\n"
    "    print('locked', flush=True)\n"
    "    sys.stdin.readline()\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "asyncio.run(main())\n"
)


@contextlib.contextmanager
def lock_holder(url: str, session: str) -> Iterator[Callable[[], None]]:
    """A child process holding ``session``'s turn lock; the context gives the function that kills it."""
    with subprocess.Popen(
        [sys.executable, "-c", LOCK_AND_DIE, url, session], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "locked"

        def kill() -> None:
            assert child.stdin is not None
            child.stdin.write("die\n")
            child.stdin.flush()
            assert child.wait(30) == -9

        yield kill


async def found_abandoned(store: Store) -> list[str]:
    """What ``abandoned()`` reports within 5 s (PostgreSQL sees a dead client's socket close within ms)."""
    abandoned = getattr(store, "abandoned")  # noqa: B009  (a capability of the durable stores)
    found: list[str] = []
    for _ in range(100):
        found = await abandoned()
        if found:
            break
        await asyncio.sleep(0.05)
    return found


async def test_a_lock_whose_holder_died_is_reported_once(durable_url: str) -> None:
    """``abandoned()`` names the sessions whose lock holder died (the worker takeover uses it)."""
    store = resolve_store(durable_url)
    try:
        session = await store.create_session()
        live = await store.create_session()
        assert await store.try_lock(live, "me", 60)
        abandoned = getattr(store, "abandoned")  # noqa: B009  (a capability of the durable stores)
        assert await abandoned() == []
        with lock_holder(durable_url, session) as kill:
            assert await abandoned() == []  # its holder lives
            kill()
        assert await found_abandoned(store) == [session]
        assert await abandoned() == []  # reported once
        assert await store.try_lock(session, "taker", 60)
    finally:
        await store.close()


async def test_a_holder_that_dies_before_anyone_looks_is_still_reported(durable_url: str) -> None:
    """The turn is marked as running where every worker can see it: a holder that takes the
    lock and dies between two looks (no look ever saw its lock) is found all the same."""
    store = resolve_store(durable_url)
    try:
        session = await store.create_session()
        with lock_holder(durable_url, session) as kill:
            kill()
        assert await found_abandoned(store) == [session]
    finally:
        await store.close()


async def test_a_session_is_active_from_its_turns_start_whatever_becomes_of_its_holder(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention's view: a session whose last turn ended long ago is no longer idle once a new
    turn starts — while it runs, after its worker died, and after another worker claimed it."""
    store = resolve_store(durable_url)
    try:
        then = time.time() - 40 * 86400
        with monkeypatch.context() as patch:
            patch.setattr(time, "time", lambda: then)
            session = await store.create_session()
            assert await store.try_lock(session, "long ago", 60)
            await store.unlock(session, "long ago")
        cutoff = time.time() - 30 * 86400
        assert await store.idle_sessions(cutoff) == [session]

        async def idle() -> bool:
            listed = session in await store.idle_sessions(cutoff)
            return listed or await store.delete_session(session, idle_before=cutoff)

        with lock_holder(durable_url, session) as kill:
            assert not await idle()  # running
            kill()
        assert not await idle()  # its worker died: the turn started after the cutoff all the same
        assert await found_abandoned(store) == [session]
        assert not await idle()  # claimed for a takeover
    finally:
        await store.close()


async def test_sqlite_lock_of_a_live_process_outlasts_its_ttl(sqlite_url: str) -> None:
    """A long turn (a slow local model) keeps its lock while its process lives."""
    one, two = resolve_store(sqlite_url), resolve_store(sqlite_url)
    try:
        session = await one.create_session()
        assert await one.try_lock(session, "a", 0.05)
        await asyncio.sleep(0.1)
        assert not await two.try_lock(session, "b", 60)
    finally:
        await one.close()
        await two.close()


async def test_sqlite_lock_from_another_host_expires(sqlite_url: str) -> None:
    """A pid on another host cannot be checked: there the TTL decides."""
    store = resolve_store(sqlite_url)
    try:
        session = await store.create_session()
        path = sqlite_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as db:
            db.execute(
                "INSERT INTO session_locks (session, owner, host, pid, expires) VALUES (?, 'x', 'elsewhere', 1, ?)",
                (session, time.time() + 0.05),
            )
        assert not await store.try_lock(session, "b", 60)
        await asyncio.sleep(0.1)
        assert await store.try_lock(session, "b", 60)
    finally:
        await store.close()


async def test_postgres_lock_ends_with_its_connection(postgres_url: str) -> None:
    one, two = resolve_store(postgres_url), resolve_store(postgres_url)
    try:
        session = await one.create_session()
        assert await one.try_lock(session, "a", 60)
        assert not await two.try_lock(session, "b", 60)
        await one.close()
        assert await two.try_lock(session, "b", 60)
    finally:
        await one.close()
        await two.close()


async def test_url_opens_the_same_database(durable_url: str) -> None:
    store = resolve_store(durable_url)
    try:
        session = await store.create_session()
        await store.append(UserEvent(session=session, turn=1, text="hello"))
        again = resolve_store(store.url)
        try:
            assert [e.text for e in await again.events(session) if isinstance(e, UserEvent)] == ["hello"]
        finally:
            await again.close()
    finally:
        await store.close()


def test_memory_store_has_a_url() -> None:
    assert resolve_store("memory:").url == "memory:"


# ------------------------------------------------------------------------ SQLite


async def test_sqlite_file_is_wal_and_created_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "lazy.db"
    store = resolve_store(f"sqlite:///{path}")
    assert not path.exists()  # constructors do no I/O
    await store.create_session("s")
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        migrations = [row[0] for row in db.execute("SELECT name FROM reactchat_migrations")]
    assert {"sessions", "events", "session_locks", "reactchat_migrations"} <= tables
    assert migrations == [
        "m001_sessions_events_locks",
        "m002_reflections",
        "m003_interrupted_field",
        "m004_cancel_requests",
        "m005_last_activity",
        "m006_artifacts",
        "m007_fork_origin",
        "m008_facts_token_calibrations",
    ]
    again = resolve_store(f"sqlite:///{path}")  # migrations run once
    assert await again.exists("s")
    await again.close()


def test_sqlite_url_forms(tmp_path: Path) -> None:
    from reactchat.store.sqlite import SqliteStore

    absolute = resolve_store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(absolute, SqliteStore)
    assert absolute.path == f"{tmp_path}/a.db"
    assert absolute.url == f"sqlite:///{tmp_path}/a.db"
    relative = resolve_store("sqlite:///relative.db")
    assert isinstance(relative, SqliteStore)
    assert relative.path == "relative.db"
    for bad in ("sqlite:relative.db", "sqlite:///"):
        with pytest.raises(ValueError, match="bad SQLite URL"):
            resolve_store(bad)


async def test_sqlite_bad_files_get_clear_errors(tmp_path: Path) -> None:
    store = resolve_store(f"sqlite:///{tmp_path}/no/such/dir/x.db")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        await store.exists("s")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    store = resolve_store(f"sqlite:///{junk}")
    with pytest.raises(sqlite3.DatabaseError, match=r"cannot use .* as a reactchat database"):
        await store.exists("s")
    assert junk.read_bytes() == b"this is not a database" * 100  # nothing lost


async def test_sqlite_in_memory() -> None:
    store = resolve_store("sqlite:///:memory:")
    session = await store.create_session()
    await store.append(UserEvent(session=session, turn=1, text="hi"))
    assert len(await store.events(session)) == 1
    await store.close()


async def test_turn_events_parse_only_what_another_worker_wrote(
    durable_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's turn view is kept parsed by the store that read or wrote it: its next turn
    parses nothing, and what another worker wrote (appends, a session deleted and made again,
    a session deleted) is read from the database, as a fresh store reads it."""
    mine, other = resolve_store(durable_url), resolve_store(durable_url)
    module = sys.modules[type(mine).__module__]
    parsed: list[int] = []
    parse = module.stored_event
    monkeypatch.setattr(module, "stored_event", lambda seq, body: parsed.append(seq) or parse(seq, body))

    async def fresh(session: str) -> list[tuple[int, str]]:
        store = resolve_store(durable_url)
        try:
            return [(e.seq, e.type) for e in await store.turn_events(session)]
        finally:
            await store.close()

    def turn(session: str, n: int, first: Event | None = None) -> list[Event]:
        return [
            first or UserEvent(session=session, turn=n, text=f"q{n}"),
            ThoughtEvent(session=session, turn=n, step=1, text="t"),
            ActionEvent(session=session, turn=n, step=1, call_id=f"c{n}", tool="x", input={}),
            ObservationEvent(session=session, turn=n, step=1, call_id=f"c{n}", tool="x", text="o"),
            AnswerEvent(session=session, turn=n, step=2, text=f"a{n}"),
        ]

    try:
        session = await mine.create_session()
        for n in (1, 2, 3):  # turn 2 begins with a thought: a turn's first event is kept
            first = ThoughtEvent(session=session, turn=2, step=0, text="resumed") if n == 2 else None
            events = turn(session, n, first)
            await mine.append(events[0])
            await mine.append(*events[1:4])  # several events of one session in one append
            await mine.append(events[4])
            parsed.clear()
            got = [(e.seq, e.type) for e in await mine.turn_events(session)]
            assert parsed == []  # every event came from this store: none parsed
            assert got == await fresh(session)
        last_turn = [(11, "user"), (12, "thought"), (13, "action"), (14, "observation"), (15, "answer")]
        assert got == [(1, "user"), (5, "answer"), (6, "thought"), (10, "answer"), *last_turn]

        await other.append(UserEvent(session=session, turn=4, text="from another worker"))
        parsed.clear()
        got = [(e.seq, e.type) for e in await mine.turn_events(session)]
        assert got == await fresh(session) and got[-1] == (16, "user") and parsed
        parsed.clear()
        await mine.turn_events(session)
        assert parsed == []  # read once, kept again

        # deleted and made again elsewhere, its last event at the same place: the database's events
        assert await other.delete_session(session)
        await other.create_session(session)
        for event in [*turn(session, 1), *turn(session, 2), *turn(session, 3)]:
            await other.append(event)
        await other.append(UserEvent(session=session, turn=4, text="a new session"))
        events = await mine.turn_events(session)
        assert [(e.seq, e.type) for e in events] == await fresh(session) and events[-1].seq == 16
        assert isinstance(events[-1], UserEvent) and events[-1].text == "a new session"

        # deleted elsewhere: not found, whatever this store kept
        assert await other.delete_session(session)
        with pytest.raises(SessionNotFound):
            await mine.turn_events(session)
    finally:
        await mine.close()
        await other.close()


async def test_sqlite_turn_view_is_not_the_list_handed_out(tmp_path: Path) -> None:
    """The list ``turn_events`` returns is the caller's: changing it leaves the next turn's
    view whole, and the store's appends afterwards do not grow it."""
    url = f"sqlite:///{tmp_path}/lists.db"
    store = resolve_store(url)
    try:
        session = await store.create_session()
        await store.append(
            UserEvent(session=session, turn=1, text="q1"), AnswerEvent(session=session, turn=1, text="a1")
        )
        first = await store.turn_events(session)
        assert [e.seq for e in first] == [1, 2]
        first.clear()
        first.append(UserEvent(session=session, turn=9, text="not stored"))
        second = await store.turn_events(session)
        assert [(e.seq, e.type) for e in second] == [(1, "user"), (2, "answer")]
        await store.append(UserEvent(session=session, turn=2, text="q2"))
        assert [e.seq for e in second] == [1, 2]  # handed out before the append: unchanged
        fresh = resolve_store(url)
        try:
            expected = [(e.seq, e.type, getattr(e, "text", "")) for e in await fresh.turn_events(session)]
        finally:
            await fresh.close()
        assert [(e.seq, e.type, getattr(e, "text", "")) for e in await store.turn_events(session)] == expected
    finally:
        await store.close()


async def test_turn_views_are_bounded(durable_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``VIEW_EVENTS`` events are kept parsed; the least recently used sessions go first."""
    from reactchat.store import _views

    monkeypatch.setattr(_views, "VIEW_EVENTS", 10)
    store = resolve_store(durable_url)
    try:
        sessions = [await store.create_session() for _ in range(4)]
        for session in sessions:
            await store.append(*(UserEvent(session=session, turn=1, step=i, text=str(i)) for i in range(4)))
        views = store._views
        assert list(views) == sessions[2:]  # 4 + 4 events kept
        assert len(await store.turn_events(sessions[0])) == 4  # read again, now the newest
        assert list(views) == [sessions[3], sessions[0]]
        assert views.held == 8
    finally:
        await store.close()


# ------------------------------------------------------------------------ PostgreSQL


async def test_postgres_unreachable_is_a_clear_error() -> None:
    store = resolve_store("postgresql://someone:secret@127.0.0.1:1/nothing")
    with pytest.raises(ConnectionError, match=r"cannot connect to PostgreSQL at postgresql://someone:\*\*\*@") as info:
        await store.exists("s")
    assert "secret" not in str(info.value)


async def test_postgres_store_survives_a_new_event_loop(postgres_url: str) -> None:
    """``Agent.run`` makes an event loop per call; the store must follow it."""
    store = resolve_store(postgres_url)
    session = await store.create_session()

    def in_another_loop() -> int:
        return len(asyncio.run(store.events(session)))

    assert await asyncio.to_thread(in_another_loop) == 0
    assert await store.exists(session)
    await store.close()


def test_importing_reactchat_does_not_import_database_drivers() -> None:
    code = "import sys, reactchat, reactchat.store; print('psycopg' in sys.modules, 'sqlite3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.split() == ["False", "False"]


async def test_postgres_turn_views_checked_together(postgres_url: str) -> None:
    """Views of several sessions are checked in one batch; each gets its own answer (a session
    another worker wrote to is read again, the others come from their views)."""
    mine, other = resolve_store(postgres_url), resolve_store(postgres_url)
    try:
        sessions = [await mine.create_session() for _ in range(6)]
        for i, session in enumerate(sessions):
            await mine.append(
                UserEvent(session=session, turn=1, text=f"q{i}"), AnswerEvent(session=session, turn=1, text=f"a{i}")
            )
        await other.append(UserEvent(session=sessions[2], turn=2, text="elsewhere"))
        await other.append(UserEvent(session=sessions[4], turn=2, text="elsewhere"))
        got = await asyncio.gather(*(mine.turn_events(session) for session in sessions))
        for i, events in enumerate(got):
            expected = [(1, "user"), (2, "answer")] + ([(3, "user")] if i in (2, 4) else [])
            assert [(e.seq, e.type) for e in events] == expected
            assert events[0].text == f"q{i}"
    finally:
        await mine.close()
        await other.close()


async def test_postgres_lock_batch_in_one_round_trip(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock batch's releases, attempts and reads go in one pipeline: the released sessions
    are free for another worker and unmarked, the won ones held, marked as this store's and
    read, the lost one reported lost; the same session released and asked for again in one
    batch stays held, once. If a statement fails, the releases are still done and no session
    of the batch is left held or marked by this store."""
    import psycopg

    from reactchat.store import postgres as module

    one, two = resolve_store(postgres_url), resolve_store(postgres_url)

    def batch(store: object, *calls: tuple[str, bool, int | None]) -> object:
        return store._lock_batch([module._LockCall(*call) for call in calls])  # type: ignore[attr-defined]

    def marks() -> dict[str, int]:
        with psycopg.connect(postgres_url, autocommit=True) as db:
            return dict(db.execute("SELECT session, backend FROM running_turns").fetchall())

    try:
        a, b, c, d, e = [await one.create_session() for _ in range(5)]
        await one.append(UserEvent(session=c, turn=1, text="in c"))
        assert await one.try_lock(a, "x", 60) and await one.try_lock(b, "x", 60)
        assert await two.try_lock(d, "y", 60)
        got = await batch(one, (a, False, None), (c, True, 0), (b, False, None), (d, True, 0), (e, True, None))
        assert [g.read for g in (got[0], got[2], got[4])] == [[], [], []] and got[3] is None
        assert [(ev.seq, ev.text) for ev in got[1].read] == [(1, "in c")]
        assert 0 < got[1].epoch < got[4].epoch  # each lock its own fencing epoch, from one sequence
        assert await two.try_lock(a, "y", 60) and await two.try_lock(b, "y", 60)
        assert not await two.try_lock(c, "y", 60) and not await two.try_lock(e, "y", 60)
        held = marks()
        assert set(held) == {a, b, c, d, e} and held[a] == held[b] == held[d] != held[c] == held[e]

        # the same session both released and asked for: held once
        assert [g.read for g in await batch(one, (c, False, None), (c, True, None))] == [[], []]
        await batch(one, (c, False, None))
        assert await two.try_lock(c, "y", 60)
        await batch(two, (c, False, None), (a, False, None), (b, False, None))

        # a statement fails: the releases done, nothing of the batch held or marked
        monkeypatch.setattr(module, "_READ", "SELECT 1, %s::int[] / 0, %s::text[]")
        got = await batch(one, (e, False, None), (a, True, 0), (b, True, 0), (c, True, None))
        assert got[0].read == [] and all(isinstance(g, psycopg.errors.Error) for g in got[1:])
        assert set(marks()) == {d}
        for session in (a, b, c, e):
            assert await two.try_lock(session, "y", 60)
    finally:
        await one.close()
        await two.close()
