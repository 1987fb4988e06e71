"""The SQLite store's WAL checkpoints under a steady stream of writes."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from reactchat.messages import UserEvent
from reactchat.store import resolve_store
from reactchat.store import sqlite as sqlite_store

#: bytes a WAL frame takes: a page and its 24-byte header
FRAME = 4096 + 24


def wal_frames(url: str) -> int:
    """How long the WAL file grew, in frames (it is rewritten from its start when it starts over)."""
    wal = Path(url.removeprefix("sqlite:///") + "-wal")
    return wal.stat().st_size // FRAME if wal.exists() else 0


@dataclasses.dataclass
class Fetched:
    """A cursor whose one row was read already."""

    row: tuple[int, int, int]

    def fetchone(self) -> tuple[int, int, int]:
        return self.row


class CopiesWhileWritesLand:
    """The connection of the store's thread, each of whose passive checkpoints (those that writes
    do not wait for) copies all but the frames of three writes of the event loop, as under load,
    where writes land while it copies; and no more writes land meanwhile (``during_copy``)."""

    def __init__(self, db: sqlite3.Connection, store: sqlite_store.SqliteStore) -> None:
        self.db, self.store = db, store
        # a reader on the snapshot from before the three writes: the copy stops there
        self.reader = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
        self.copying, self.landed, self.copied = (threading.Event() for _ in range(3))
        self.released = False

    def execute(self, sql: str, *args: Any) -> Any:
        if sql != "PRAGMA wal_checkpoint(PASSIVE)" or getattr(self.store, "_writes_wait", False) or self.released:
            return self.db.execute(sql, *args)
        self.reader.execute("BEGIN")
        self.reader.execute("SELECT count(*) FROM sessions").fetchone()
        self.copying.set()
        self.landed.wait(10)
        self.landed.clear()
        row = self.db.execute(sql).fetchone()
        self.reader.execute("COMMIT")
        self.copied.set()
        return Fetched(row)

    async def during_copy(self, write: Callable[[], Awaitable[None]]) -> None:
        """If a copy began: make three writes, then wait for it to end."""
        if self.copying.is_set():
            self.copying.clear()
            for _ in range(3):
                await write()
            self.landed.set()
            assert await asyncio.to_thread(self.copied.wait, 10)
            self.copied.clear()

    def release(self) -> None:
        """Copies no longer wait for writes."""
        self.released = True
        self.landed.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


async def test_the_wal_starts_over_though_writes_land_during_every_checkpoint(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under steady load the loop's writes land while the store's thread copies the WAL (here three
    before each passive copy, which a reader's snapshot keeps from copying them), so no copy reaches
    the WAL's end and SQLite never starts it over by itself; it must still start over after every
    checkpoint instead of growing to ``WAL_RESTART_FRAMES``."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 20)
    store = resolve_store(sqlite_url)
    assert isinstance(store, sqlite_store.SqliteStore)
    waiting_db = sqlite_store.SqliteStore._waiting_db
    slowed = CopiesWhileWritesLand(waiting_db(store), store)
    monkeypatch.setattr(sqlite_store.SqliteStore, "_waiting_db", lambda self: slowed)
    try:
        session = await store.create_session()
        written = 0

        async def write() -> None:
            nonlocal written
            await store.append(UserEvent(session=session, turn=1, step=written, text="x" * 3000))
            written += 1
            # a pause, as a server's loop makes waiting for its clients: the store's thread gets the GIL
            await asyncio.sleep(0.0001)

        while written < 2000:  # 2-3 frames each (the text takes an overflow page): ~5,000 frames
            await write()
            await slowed.during_copy(write)
        assert len(await store.events(session)) == written
        # a cycle is 20-odd writes: ~120 frames (the WAL grew past WAL_RESTART_FRAMES before)
        assert wal_frames(sqlite_url) < 1000, wal_frames(sqlite_url)
    finally:
        slowed.release()
        await store.close()
        slowed.reader.close()


async def test_a_reader_on_an_old_snapshot_does_not_hold_writes_up(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection keeps a read transaction open, so the WAL cannot start over: past
    ``WAL_RESTART_FRAMES`` the checkpoint waits for that reader, but only ``RESTART_WAIT_MS``, and
    the writes that wait behind it wait no longer than that (not the busy timeout, 10 s)."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 50)
    monkeypatch.setattr(sqlite_store, "WAL_RESTART_FRAMES", 20)
    store = resolve_store(sqlite_url)
    session = await store.create_session()
    await store.append(UserEvent(session=session, turn=1, text="before the reader"))
    reader = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM events").fetchone() == (1,)
        slowest = 0.0
        for i in range(300):  # several checkpoints past WAL_RESTART_FRAMES
            started = time.monotonic()
            await asyncio.wait_for(store.append(UserEvent(session=session, turn=2, step=i, text="x" * 3000)), 5)
            slowest = max(slowest, time.monotonic() - started)
        assert slowest < 2, slowest
        assert reader.execute("SELECT count(*) FROM events").fetchone() == (1,)  # its snapshot held
        assert len(await store.events(session)) == 301
    finally:
        reader.close()
        await store.close()
