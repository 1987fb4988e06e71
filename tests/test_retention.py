"""Session retention: ``prune_sessions`` finds idle sessions from the stores' last-activity
column (no session's events are read), never deletes a session whose turn is running, and
a server with a retention (``REACTCHAT_RETENTION_DAYS`` / ``--retention-days``) expires
old sessions by itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from reactchat.cli.retention import prune_sessions
from reactchat.messages import Event, UserEvent
from reactchat.store import Store, resolve_store
from server_support import start_worker

DAY = 86400.0


@contextmanager
def days_ago(monkeypatch: pytest.MonkeyPatch, days: float) -> Iterator[None]:
    """The clock the stores read (``time.time``) set ``days`` back."""
    then = time.time() - days * DAY
    with monkeypatch.context() as patch:
        patch.setattr(time, "time", lambda: then)
        yield


class NoEvents:
    """A store whose events must not be read (pruning goes by the last-activity column)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        raise AssertionError(f"pruning read the events of {session_id}")


async def turn(store: Store, session: str, text: str = "hi", end: bool = True) -> None:
    """A turn as the engine runs one: lock, events, unlock (unless it is still running)."""
    await store.create_session(session)
    assert await store.try_lock(session, f"owner-{session}", 60)
    await store.append(UserEvent(session=session, turn=1, text=text, at=time.time()))
    if end:
        await store.unlock(session, f"owner-{session}")


async def test_prune_goes_by_last_activity_and_spares_running_turns(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = resolve_store(store_url)
    try:
        with days_ago(monkeypatch, 40):
            await turn(store, "old")
            await store.create_session("never-used")
            await turn(store, "running", end=False)  # a turn that started 40 days ago and still runs
            await turn(store, "back")
        with days_ago(monkeypatch, 2):
            await turn(store, "recent")
            await turn(store, "back", "again")  # idle for 40 days, then used again
        with days_ago(monkeypatch, 35):
            await store.create_session("old-empty")

        pruned = await prune_sessions(NoEvents(store), 30 * DAY)  # type: ignore[arg-type]
        assert sorted(pruned) == ["never-used", "old", "old-empty"]
        assert sorted(await store.list_sessions()) == ["back", "recent", "running"]
        assert [e.text for e in await store.events("back")] == ["hi", "again"]  # type: ignore[union-attr]

        with days_ago(monkeypatch, 40):  # the long turn ends (its end is long past too)
            await store.unlock("running", "owner-running")
        assert await prune_sessions(NoEvents(store), 30 * DAY) == ["running"]  # type: ignore[arg-type]
        assert await prune_sessions(store, 30 * DAY) == []
        assert sorted(await store.list_sessions()) == ["back", "recent"]
    finally:
        await store.close()


async def test_a_turn_started_after_the_lookup_keeps_its_session(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle check is repeated as the session is deleted: a turn that started in between wins."""
    store = resolve_store(store_url)
    try:
        with days_ago(monkeypatch, 40):
            await turn(store, "old")
        cutoff = time.time() - 30 * DAY
        assert await store.idle_sessions(cutoff) == ["old"]
        await turn(store, "old", "back again", end=False)
        assert not await store.delete_session("old", idle_before=cutoff)
        await store.unlock("old", "owner-old")
        assert not await store.delete_session("old", idle_before=cutoff)  # active now
        assert await store.delete_session("old")  # no condition: deleted
    finally:
        await store.close()


def test_a_server_with_a_retention_expires_idle_sessions(
    durable_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def seed() -> None:
        store = resolve_store(durable_url)
        try:
            with days_ago(monkeypatch, 10):
                await turn(store, "old")
            await turn(store, "recent")
        finally:
            await store.close()

    asyncio.run(seed())
    answers = tmp_path / "answers.txt"
    answers.write_text(" Done.\nFinal Answer: ok", encoding="utf-8")
    process, url = start_worker(
        durable_url,
        tmp_path / "worker.log",
        "reactchat.server:app_from_env",  # the app `uvicorn --factory` serves, configured by the environment
        REACTCHAT_MODEL=f"scripted:{answers}",
        REACTCHAT_RETENTION_DAYS="7",
    )
    try:
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/v1/sessions/old").status_code != 404:
            assert time.monotonic() < deadline, "the idle session was not expired"
            time.sleep(0.1)
        assert httpx.get(f"{url}/v1/sessions/recent").status_code == 200
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("days", ["0", "-3", "soon", "nan"])
def test_a_retention_that_is_no_number_of_days_is_refused(days: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reactchat.cli", "serve", "--retention-days", days, "--port", "9"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"argument --retention-days: invalid days value: '{days}'" in done.stderr, done.stderr
