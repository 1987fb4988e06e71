"""The command line against bad paths: a clear ``reactchat: error:``, never a
traceback, a hang or a gigabyte read; and ``reactchat sessions --prune``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reactchat.messages import UserEvent
from reactchat.store import resolve_store


def reactchat(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1"},
    )


def script(path: Path) -> str:
    path.write_text(" Done.\nFinal Answer: ok", encoding="utf-8")
    return f"scripted:{path}"


@pytest.mark.parametrize("kind", ["directory", "not a database"])
def test_a_bad_db_path_is_a_clear_error(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "db"
    if kind == "directory":
        db.mkdir()
    else:
        db.write_text("these are my notes, not a database\n", encoding="utf-8")
    done = reactchat("ask", "hi", "--model", script(tmp_path / "r.txt"), "--db", str(db), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("reactchat: error: --db"), done.stderr
    assert "Traceback" not in done.stderr
    if kind == "not a database":
        assert db.read_text(encoding="utf-8").startswith("these are my notes"), "the file is left alone"


@pytest.mark.parametrize("kind", ["fifo", "device", "sparse", "directory"])
def test_a_file_that_is_not_a_regular_small_file_is_refused_before_it_is_read(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "upload"
    if kind == "fifo":
        os.mkfifo(target)  # nobody writes to it: reading would wait forever
    elif kind == "device":
        target = Path("/dev/zero")  # endless: reading it all would exhaust memory
    elif kind == "sparse":
        with target.open("wb") as file:
            file.truncate(1 << 30)  # 1 GB that takes no disk
    else:
        target.mkdir()
    start = time.monotonic()
    done = reactchat(
        "ask",
        "hi",
        "--model",
        script(tmp_path / "r.txt"),
        "--db",
        str(tmp_path / "s.db"),
        "--file",
        str(target),
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("reactchat: error:"), done.stderr
    assert ("regular file" in done.stderr) != (kind == "sparse")
    assert kind != "sparse" or "limit" in done.stderr
    assert time.monotonic() - start < 30


def test_sessions_prune_deletes_only_sessions_idle_past_the_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "s.db"
    now = time.time()

    async def seed() -> None:
        store = resolve_store(f"sqlite:///{db}")
        for name, age_days in (("old", 40), ("recent", 2)):
            with monkeypatch.context() as clock:  # the store's clock, when the turn ran
                clock.setattr(time, "time", lambda then=now - age_days * 86400: then)
                await store.create_session(name)
                assert await store.try_lock(name, "seed", 60)
                await store.append(UserEvent(session=name, turn=1, text="hi", at=time.time()))
                await store.unlock(name, "seed")
        await store.create_session("empty")
        await store.close()

    asyncio.run(seed())
    done = reactchat("sessions", "--prune", "--older-than", "30", "--db", str(db), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "pruned 1 session" in done.stdout

    async def left() -> list[str]:
        store = resolve_store(f"sqlite:///{db}")
        try:
            return sorted(await store.list_sessions())
        finally:
            await store.close()

    assert asyncio.run(left()) == ["empty", "recent"]
