"""The SQLite store's WAL checkpoints under a steady stream of writes."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

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


async def test_the_wal_starts_over_though_writes_land_during_every_checkpoint(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under steady load the loop's writes go on while the store's thread copies the WAL, so no
    copy ever reaches its end and SQLite never starts the WAL over by itself; it must still start
    over after every checkpoint instead of growing to ``WAL_RESTART_FRAMES``."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY", 20)
    copy = sqlite_store.SqliteStore._checkpoint_wal
    started, copied, landed, returned = (threading.Event() for _ in range(4))

    def copy_while_writes_land(self: sqlite_store.SqliteStore) -> bool:
        started.set()
        stuck = copy(self)
        copied.set()
        landed.wait(10)
        landed.clear()
        returned.set()
        return stuck

    monkeypatch.setattr(sqlite_store.SqliteStore, "_checkpoint_wal", copy_while_writes_land)
    store = resolve_store(sqlite_url)
    try:
        session = await store.create_session()
        written = 0

        async def write() -> None:
            nonlocal written
            await store.append(UserEvent(session=session, turn=1, step=written, text="x" * 3000))
            written += 1

        while written < 2000:  # 2-3 frames each (the text takes an overflow page): ~5,000 frames
            await write()
            if started.is_set():  # a checkpoint copies the WAL on the store's thread
                started.clear()
                assert await asyncio.to_thread(copied.wait, 10)
                copied.clear()
                for _ in range(3):  # writes that land after the copy read the WAL's length
                    await write()
                landed.set()
                assert await asyncio.to_thread(returned.wait, 10)
                returned.clear()
        assert len(await store.events(session)) == written
        # a cycle is 20 writes and those made before the copy began: a few hundred frames
        assert wal_frames(sqlite_url) < sqlite_store.WAL_RESTART_FRAMES / 2, wal_frames(sqlite_url)
    finally:
        landed.set()
        await store.close()


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
