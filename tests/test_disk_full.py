"""A full disk under a SQLite store: a ``DiskFull`` naming the file and the disk (HTTP 507),
and nothing of the write that met it is stored. The disk is a 2 MB tmpfs mounted for the
test, which needs root (or CAP_SYS_ADMIN); where mounting is not allowed the test is
skipped and says so.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reactchat import Agent
from reactchat.errors import DiskFull
from reactchat.messages import AnswerEvent, UserEvent
from reactchat.server import ServerConfig, create_app
from reactchat.store.sqlite import SqliteStore
from server_support import RuleModel, running


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs mounted on a fresh directory."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"a small file system cannot be mounted here (needs root): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with one file; that file."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for block in (2**16, 2**12, 2**9, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(bytes(block))
    return filler


async def test_a_full_disk_is_a_clear_error_and_nothing_is_half_written(small_disk: Path) -> None:
    path = small_disk / "chat.db"
    store = SqliteStore(path)
    session = await store.create_session()
    await store.append(UserEvent(session=session, turn=1, text="first"))
    before = await store.events(session)
    filler = fill(small_disk)
    big = "x" * 200_000  # far more pages than a full disk has
    turn = [UserEvent(session=session, turn=2, text=big), AnswerEvent(session=session, turn=2, text=big)]
    with pytest.raises(DiskFull) as raised:
        await store.append(*turn)
    assert str(raised.value) == (
        f"the disk {small_disk} holding {path} is full: nothing of this write was stored; "
        f"free space on {small_disk} and send it again"
    )
    assert isinstance(raised.value, OSError)
    assert await store.events(session) == before
    filler.unlink()
    await store.append(*turn)
    await store.close()
    reopened = SqliteStore(path)
    assert [e.text for e in await reopened.events(session)] == ["first", big, big]  # type: ignore[attr-defined]
    await reopened.close()


def test_the_server_answers_507_with_the_reason(small_disk: Path) -> None:
    path = small_disk / "served.db"
    app = create_app(lambda s: Agent(model=RuleModel(), store=s), config=ServerConfig(store=f"sqlite:///{path}"))
    with running(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        session = client.post("/v1/sessions").json()["session"]
        filler = fill(small_disk)
        created = client.post("/v1/sessions", json={"session": "x" * 100})
        assert created.status_code == 507, created.text
        assert created.json()["error"]["message"].startswith(f"the disk {small_disk} holding {path} is full")
        sent = client.post(f"/v1/sessions/{session}/messages", json={"message": "y" * 500_000, "stream": False})
        assert sent.status_code == 507, sent.text
        filler.unlink()
        assert client.get(f"/v1/sessions/{session}").json()["turns"] == []  # the message left nothing behind
        done = client.post(f"/v1/sessions/{session}/messages", json={"message": "hello", "stream": False})
        assert done.json()["status"] == "done"
