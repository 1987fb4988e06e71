"""The knowledge base in each store's own database: isolation, retention, clearing, atomicity."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reactchat.knowledge import FileRejected, KnowledgeBase
from reactchat.knowledge._chunk import Chunk
from reactchat.knowledge._index import FileRow, open_index
from reactchat.store import Store, resolve_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from tinypdf import make_pdf

ROSES = b"# Market\n\nA bouquet of roses costs 80.16 dollars on average.\n\n# Tulips\n\nTulips are cheaper in spring.\n"


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = resolve_store(store_url)
    yield store
    await KnowledgeBase.for_store(store).close()
    await store.close()


async def test_a_file_is_searchable_in_its_session_only(store: Store) -> None:
    kb = KnowledgeBase.for_store(store)
    assert KnowledgeBase.for_store(store) is kb
    alice, bob = await store.create_session(), await store.create_session()
    info = await kb.add_file(alice, "roses.md", ROSES)
    assert (info.name, info.size, info.chunks, info.retention, info.rounds_left) == ("roses.md", len(ROSES), 2, 5, 5)
    hits = await kb.search(alice, "price of a bouquet of roses")
    assert hits[0].name == "roses.md" and "80.16" in hits[0].text and hits[0].heading == "Market"
    assert await kb.search(bob, "price of a bouquet of roses") == []
    assert await kb.files(bob) == []
    assert await kb.data(alice, info.id) == ROSES
    assert await kb.data(bob, info.id) is None


async def test_files_expire_when_their_rounds_reach_the_retention(store: Store) -> None:
    kb = KnowledgeBase.for_store(store)
    session = await store.create_session()
    short = await kb.add_file(session, "short.md", ROSES, retention=1)
    long = await kb.add_file(session, "long.txt", b"Owls hunt at night.", retention=3)
    assert await kb.end_round(session) == [await_info(short, rounds=1)]
    assert [(f.name, f.rounds_left) for f in await kb.files(session)] == [("long.txt", 2)]
    assert await kb.search(session, "roses") == []
    assert await kb.data(session, short.id) is None
    assert await kb.end_round(session) == []
    expired = await kb.end_round(session)
    assert [f.id for f in expired] == [long.id]
    assert await kb.files(session) == [] and await kb.search(session, "owls") == []


def await_info(info: object, **changes: int) -> object:
    from dataclasses import replace

    rounds = changes["rounds"]
    return replace(info, rounds=rounds, rounds_left=max(0, info.retention - rounds))  # type: ignore[attr-defined]


async def test_clear_deletes_every_file_of_the_session(store: Store) -> None:
    kb = KnowledgeBase.for_store(store)
    session, other = await store.create_session(), await store.create_session()
    await kb.add_file(session, "a.md", ROSES)
    await kb.add_file(session, "b.txt", b"Owls hunt at night.")
    await kb.add_file(other, "c.txt", b"Owls sleep by day.")
    cleared = await kb.clear(session)
    assert sorted(f.name for f in cleared) == ["a.md", "b.txt"]
    assert await kb.files(session) == [] and await kb.search(session, "owls") == []
    assert [h.name for h in await kb.search(other, "owls")] == ["c.txt"]
    assert await kb.remove(other, (await kb.files(other))[0].id) is True
    assert await kb.files(other) == []


async def test_concurrent_uploads_are_all_stored(store: Store) -> None:
    kb = KnowledgeBase.for_store(store)
    session = await store.create_session()
    texts = [f"Document {i} is about the animal number{i}.".encode() for i in range(6)]
    await asyncio.gather(*(kb.add_file(session, f"doc{i}.txt", t) for i, t in enumerate(texts)))
    assert sorted(f.name for f in await kb.files(session)) == [f"doc{i}.txt" for i in range(6)]
    assert (await kb.search(session, "number4"))[0].name == "doc4.txt"


async def test_progress_reports_pages_and_ends_at_the_total(store: Store) -> None:
    kb = KnowledgeBase.for_store(store)
    session = await store.create_session()
    seen: list[tuple[int, int]] = []

    async def progress(done: int, total: int) -> None:
        seen.append((done, total))

    pdf = make_pdf([[f"Page {i} talks about topic{i}."] for i in range(1, 31)])
    info = await kb.add_file(session, "book.pdf", pdf, progress=progress)
    assert info.pages == 30
    assert seen[-1] == (30, 30)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) >= 30
    assert (await kb.search(session, "topic17"))[0].page == 17


async def test_a_rejected_file_leaves_nothing(store: Store) -> None:
    kb = KnowledgeBase.for_store(store)
    session = await store.create_session()
    with pytest.raises(FileRejected):
        await kb.add_file(session, "bad.pdf", b"%PDF-1.7\ntruncated")
    assert await kb.files(session) == []


async def test_a_failed_write_is_rolled_back_whole(store_url: str) -> None:
    index = open_index(store_url)
    row = FileRow("f1", "s", "x.txt", "text", 3, None, 2, 5, 0, 0.0)
    good = Chunk("fine", None, "", "")
    broken = Chunk(None, None, "", "")  # type: ignore[arg-type]  # violates NOT NULL on the second insert
    with pytest.raises(Exception, match=r"(?i)null"):
        index.add(row, b"abc", [good, broken], None)
    assert index.files("s") == [] and index.keyword("s", ["fine"], 5) == []
    index.close()


async def test_files_outlive_the_process_in_a_durable_store(durable_url: str) -> None:
    store = resolve_store(durable_url)
    kb = KnowledgeBase(store.url)  # type: ignore[attr-defined]
    session = await store.create_session()
    await kb.add_file(session, "roses.md", ROSES, retention=2)
    await kb.end_round(session)
    await kb.close()
    again = KnowledgeBase(durable_url)
    assert [(f.name, f.rounds_left) for f in await again.files(session)] == [("roses.md", 1)]
    assert "80.16" in (await again.search(session, "roses"))[0].text
    await again.close()
    await store.close()


async def test_concurrent_looks_at_files_see_their_own_session_and_other_workers_uploads(durable_url: str) -> None:
    """Looks at several sessions' files at once (one statement on PostgreSQL) each get their
    session's files; a file another worker uploads shows at this worker's next look."""
    store = resolve_store(durable_url)
    kb, other = KnowledgeBase(durable_url), KnowledgeBase(durable_url)
    try:
        sessions = [await store.create_session() for _ in range(5)]
        for n, session in enumerate(sessions[1:], 1):
            for i in range(n % 3):
                await kb.add_file(session, f"{n}-{i}.md", ROSES)
        looks = await asyncio.gather(*(kb.files(s) for s in [*sessions, sessions[2]]))
        assert [[f.name for f in files] for files in looks] == [
            [],
            ["1-0.md"],
            ["2-0.md", "2-1.md"],
            [],
            ["4-0.md"],
            ["2-0.md", "2-1.md"],
        ]
        await other.add_file(sessions[0], "late.md", ROSES)
        assert [f.name for f in await kb.files(sessions[0])] == ["late.md"]
    finally:
        await kb.close()
        await other.close()
        await store.close()


async def test_a_look_at_an_in_memory_index_waits_on_a_thread_when_another_holds_it(tmp_path: Path) -> None:
    """A memory store's look at a session's files runs on the event loop when the index is
    free, and on a thread while another thread holds it (an upload): the loop never waits."""
    store = resolve_store("memory:")
    kb = KnowledgeBase.for_store(store)
    try:
        session = await store.create_session()
        await kb.add_file(session, "roses.md", ROSES)
        index = kb._open()
        assert [r.name for r in index.files_now(session) or []] == ["roses.md"]
        held, done = threading.Event(), threading.Event()

        def upload() -> None:  # another thread's upload holds the index for 0.5 s
            with index.lock:
                held.set()
                done.wait(0.5)

        holder = threading.Thread(target=upload)
        holder.start()
        held.wait()
        started = time.monotonic()
        assert index.files_now(session) is None
        look = asyncio.create_task(kb.files(session))
        for _ in range(5):  # the loop goes on while the look waits
            await asyncio.sleep(0.01)
        assert time.monotonic() - started < 0.4 and not look.done()
        done.set()
        holder.join()
        assert [f.name for f in await look] == ["roses.md"]
    finally:
        await kb.close()
        await store.close()


async def test_a_look_at_a_file_index_answers_on_the_loop_unless_the_file_is_locked(tmp_path: Path) -> None:
    """A SQLite store's look at a session's files runs on the event loop: it answers (what is
    committed) while another connection holds the write lock; a file locked so that no one
    may read it gives None at once, and the look then reads on a thread, which may wait."""
    path = tmp_path / "kb.db"
    store = resolve_store(f"sqlite:///{path}")
    kb = KnowledgeBase.for_store(store)
    try:
        session = await store.create_session()
        await kb.add_file(session, "roses.md", ROSES)
        index = kb._open()
        assert [r.name for r in index.files_now(session) or []] == ["roses.md"]

        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another worker's write, not yet committed
        writer.execute("DELETE FROM kb_files")
        started = time.monotonic()
        assert [r.name for r in index.files_now(session) or []] == ["roses.md"]
        assert [f.name for f in await kb.files(session)] == ["roses.md"]
        assert time.monotonic() - started < 0.5
        writer.execute("ROLLBACK")
        writer.close()

        class Locked:  # as a file whose lock keeps readers out (another process's recovery)
            def execute(self, *args: object) -> None:
                raise sqlite3.OperationalError("database is locked")

            def close(self) -> None:
                pass

        quick, index._quick = index._quick, Locked()  # type: ignore[assignment]
        started = time.monotonic()
        assert index.files_now(session) is None  # at once: the look then reads on a thread
        assert time.monotonic() - started < 0.5
        assert [f.name for f in await kb.files(session)] == ["roses.md"]
        index._quick = quick
        assert [r.name for r in index.files_now(session) or []] == ["roses.md"]
    finally:
        await kb.close()
        await store.close()


async def test_sqlite_tables_live_in_the_session_database(sqlite_url: str) -> None:
    store = resolve_store(sqlite_url)
    session = await store.create_session()
    kb = KnowledgeBase.for_store(store)
    await kb.add_file(session, "roses.md", ROSES)
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"kb_files", "kb_chunks", "kb_fts"} <= tables
    assert any(not t.startswith("kb_") for t in tables)  # the store's own tables, same file
    await kb.close()
    await store.close()
