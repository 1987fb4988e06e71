"""Leases and fencing epochs of running turns on PostgreSQL (``reactchat.store._lease``).

A holder that is alive renews its lease and keeps its turn; a frozen one (SIGSTOP) loses
it once the lease runs out, and after SIGCONT its append is refused in the append's own
transaction. A worker whose connection to the database breaks mid-turn finishes the turn
by itself once the database answers again, without a new message.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import suppress
from pathlib import Path

import httpx
import psycopg
import pytest

from reactchat.errors import TurnTakenOver
from reactchat.messages import UserEvent
from reactchat.store import resolve_store
from reactchat.store._lease import Fences, check_lease, lease_from_env, with_link
from test_health import serve_process

SRC = str(Path(__file__).resolve().parents[1] / "src")

#: a process holding a session's turn lock; on a line on stdin it appends one event
HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from reactchat.errors import TurnTakenOver
    from reactchat.messages import UserEvent
    from reactchat.store import resolve_store

    async def main(url: str, session: str) -> None:
        store = resolve_store(url)
        assert await store.try_lock(session, "holder", 60)
        print("locked", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        try:
            await store.append(UserEvent(session=session, turn=1, text="from the first holder"))
            print("appended", flush=True)
        except TurnTakenOver as exc:
            print("refused", exc, flush=True)
        await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def mark(url: str, session: str) -> tuple[int, int] | None:
    """The (backend, epoch) of the session's running-turn mark."""
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute("SELECT backend, epoch FROM running_turns WHERE session = %s", (session,)).fetchone()
    return (row[0], row[1]) if row else None


async def test_a_frozen_holder_loses_its_turn_and_its_append_after_waking_is_refused(postgres_url: str) -> None:
    store = resolve_store(postgres_url)
    session = await store.create_session()
    env = {**os.environ, "PYTHONPATH": SRC, "REACTCHAT_LEASE_SECONDS": "1"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, postgres_url, session],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        first = mark(postgres_url, session)
        assert first is not None
        # alive: it renews its 1 s lease, so nobody takes the turn over however long it runs
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            assert await store.abandoned() == []
            time.sleep(0.2)
        assert not await store.try_lock(session, "other", 60)

        holder.send_signal(signal.SIGSTOP)  # its kernel keeps its connections open
        time.sleep(1.5)
        assert await store.abandoned() == [session]  # its lock connection ended, its mark claimed
        assert await store.try_lock(session, "other", 60)
        second = mark(postgres_url, session)
        assert second is not None and second[1] > first[1] and second[0] != first[0]
        await store.append(UserEvent(session=session, turn=1, text="from the new holder"))

        holder.send_signal(signal.SIGCONT)
        holder.stdin.write("append\n")
        holder.stdin.flush()
        said = holder.stdout.readline()
        assert said.startswith("refused"), said
        assert "taken over by another worker" in said
        assert holder.wait(20) == 0
        assert [e.text for e in await store.events(session)] == ["from the new holder"]
        await store.unlock(session, "other")
        assert mark(postgres_url, session) is None
    finally:
        if holder.poll() is None:
            holder.send_signal(signal.SIGCONT)
            holder.kill()
        holder.communicate()
        await store.close()


async def test_an_append_without_a_lock_is_not_fenced_and_one_under_a_lost_lock_is(postgres_url: str) -> None:
    one, two = resolve_store(postgres_url), resolve_store(postgres_url)
    try:
        session = await one.create_session()
        await one.append(UserEvent(session=session, turn=1, text="no lock held"))
        assert await one.try_lock(session, "a", 60)
        with psycopg.connect(postgres_url, autocommit=True) as db:  # its lock connection breaks
            backend = mark(postgres_url, session)
            assert backend is not None
            db.execute("SELECT pg_terminate_backend(%s, 2000)", (backend[0],))
        assert await two.abandoned() == [session]
        with pytest.raises(TurnTakenOver):
            await one.append(UserEvent(session=session, turn=1, text="after the takeover"))
        other = await two.create_session()  # the refusal is the session's alone
        assert await one.try_lock(other, "b", 60)
        await one.append(UserEvent(session=other, turn=1, text="still mine"))
        assert [e.text for e in await one.events(session)] == ["no lock held"]
        assert [e.text for e in await one.events(other)] == ["still mine"]
        await one.unlock(session, "a")
        await one.append(UserEvent(session=session, turn=2, text="unlocked: unfenced again"))
    finally:
        await one.close()
        await two.close()


def test_the_lease_setting_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTCHAT_LEASE_SECONDS", "soon")
    with pytest.raises(ValueError, match="expected seconds"):
        lease_from_env()
    monkeypatch.setenv("REACTCHAT_LEASE_SECONDS", "0.01")
    with pytest.raises(ValueError, match="out of range"):
        lease_from_env()
    monkeypatch.setenv("REACTCHAT_LEASE_SECONDS", "2.5")
    assert lease_from_env() == 2.5
    with pytest.raises(ValueError):
        check_lease(7200)
    assert Fences(3).lease == 3


def test_connections_notice_a_dead_link_unless_the_url_says_otherwise() -> None:
    given = with_link("postgresql://u@db:5432/x?tcp_user_timeout=500")
    assert "tcp_user_timeout=500" in given and "keepalives=1" in given and "connect_timeout=5" in given


# ------------------------------------------------------------------ a transient loss of the database


class Relay:
    """A loopback TCP relay to the database that can drop every connection and refuse new
    ones for a while, then relay again on the same port: a database that went away."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.up = True
        self.links: list[socket.socket] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            self.links += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def drop(self) -> None:
        """Close every relayed connection; refuse new ones until ``restore``."""
        self.up = False
        for link in self.links:
            with suppress(OSError):
                link.shutdown(socket.SHUT_RDWR)
            link.close()
        self.links = []

    def restore(self) -> None:
        self.up = True


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass


SLOW_READ = '''
import time
from reactchat import tool

@tool(effect="read")
def slow_read(seconds: float) -> str:
    """Read something slowly (no side effect: it may run again)."""
    time.sleep(seconds)
    return "read it"
'''


def test_a_turn_cut_off_by_a_lost_database_is_finished_by_its_worker_once_it_is_back(
    tmp_path: Path, postgres_url: str
) -> None:
    (tmp_path / "slowread.py").write_text(SLOW_READ, encoding="utf-8")
    replies = [
        'Thought: read first\nAction: slow_read\nAction Input: {"seconds": 1.5}',
        "Thought: done\nFinal Answer: finished after the read",
    ]
    (tmp_path / "script.json").write_text(json.dumps(replies), encoding="utf-8")
    address = httpx.URL(postgres_url.replace("postgresql://", "http://"))
    relay = Relay((address.host, address.port or 5432))
    relayed = postgres_url.replace(f"{address.host}:{address.port}", f"127.0.0.1:{relay.port}")
    flags = ("--db", relayed, "--model", "scripted:script.json", "--tools", "slowread:slow_read")
    with serve_process(tmp_path, *flags) as (url, _):
        session = httpx.post(f"{url}/v1/sessions").json()["session"]
        seen: list[str] = []
        with httpx.stream("POST", f"{url}/v1/sessions/{session}/messages", json={"message": "go"}, timeout=30) as r:
            for line in r.iter_lines():
                seen.append(line)
                if line == "event: action":
                    relay.drop()  # the tool runs; its observation cannot be stored
        assert "event: observation" not in seen and "event: error" in seen, seen
        time.sleep(1.0)
        relay.restore()  # nobody sends a message: the worker finishes the turn by itself
        deadline = time.monotonic() + 20
        while True:
            try:
                view = httpx.get(f"{url}/v1/sessions/{session}", timeout=5).json()
                if view.get("status") == "done":
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, view
            time.sleep(0.3)
    turn = view["turns"][0]
    assert turn["answer"] == "finished after the read"
    kinds = [e["type"] for e in turn["events"]]
    assert kinds.count("answer") == 1 and kinds[0] == "user", kinds


# ------------------------------------------------------------------ SQLite: one host


def test_on_sqlite_a_frozen_worker_keeps_its_turn_and_finishes_it_once_it_thaws(tmp_path: Path) -> None:
    """SQLite serves one host: a turn lock is its holder's pid, which a stopped process keeps.
    Nobody takes the turn over while the worker is frozen (another worker's message is
    refused as busy), and once it thaws the worker finishes the turn, once."""
    (tmp_path / "slowread.py").write_text(SLOW_READ, encoding="utf-8")
    replies = [
        'Thought: read first\nAction: slow_read\nAction Input: {"seconds": 1.0}',
        "Thought: done\nFinal Answer: finished after the read",
    ]
    (tmp_path / "script.json").write_text(json.dumps(replies), encoding="utf-8")
    flags = ("--db", str(tmp_path / "s.db"), "--model", "scripted:script.json", "--tools", "slowread:slow_read")
    with serve_process(tmp_path, *flags) as (one, first), serve_process(tmp_path, *flags) as (two, _):
        session = httpx.post(f"{one}/v1/sessions").json()["session"]
        lines: list[str] = []
        with httpx.stream("POST", f"{one}/v1/sessions/{session}/messages", json={"message": "go"}, timeout=30) as r:
            for line in r.iter_lines():
                lines.append(line)
                if line == "event: action":
                    first.send_signal(signal.SIGSTOP)  # mid-tool, for longer than any lease
                    time.sleep(3.0)
                    busy = httpx.post(f"{two}/v1/sessions/{session}/messages", json={"message": "hello"})
                    assert busy.status_code == 409, busy.text  # still its turn: not taken over
                    first.send_signal(signal.SIGCONT)
        assert any("finished after the read" in line for line in lines), lines
        view = httpx.get(f"{two}/v1/sessions/{session}").json()
    kinds = [e["type"] for e in view["turns"][0]["events"]]
    assert view["status"] == "done" and len(view["turns"]) == 1
    assert kinds == ["user", "thought", "action", "observation", "answer"], kinds


async def test_renewal_warns_of_a_lost_lease_only_when_another_holder_has_the_turn(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Turns ended and begun again on the same sessions while the leases are renewed are
    not losses; a mark that another lock took over is, and is the only one reported."""
    os.environ["REACTCHAT_LEASE_SECONDS"] = "0.5"  # renewed every 0.17 s
    try:
        store, other = resolve_store(postgres_url), resolve_store(postgres_url)
    finally:
        del os.environ["REACTCHAT_LEASE_SECONDS"]
    sessions = [await store.create_session() for _ in range(4)]
    caplog.set_level("WARNING", logger="reactchat.store")
    try:
        deadline = time.monotonic() + 2.0
        turn = 0
        while time.monotonic() < deadline:  # many turns, each lock a new epoch
            turn += 1
            for session in sessions:
                assert await store.try_lock(session, "w", 60)
            for session in sessions:
                await store.append_unlock("w", UserEvent(session=session, turn=turn, text="t"))
        assert turn > 5
        assert not [r for r in caplog.records if "was lost" in r.getMessage()]

        # the holder of the first session's turn stops renewing; another worker takes it
        assert await store.try_lock(sessions[0], "w", 60)
        epoch = mark(postgres_url, sessions[0])
        found: list[str] = []
        for _ in range(10):  # the holder still renews every 0.17 s: a renewal may land in between
            with psycopg.connect(postgres_url, autocommit=True) as db:
                db.execute("UPDATE running_turns SET lease_until = 0 WHERE session = %s", (sessions[0],))
            found = await other.abandoned()
            if found:
                break
        assert found == [sessions[0]]
        assert await other.try_lock(sessions[0], "v", 60)
        assert mark(postgres_url, sessions[0]) != epoch
        time.sleep(0.05)
        for _ in range(20):
            await asyncio.sleep(0.1)
            if any("was lost" in r.getMessage() for r in caplog.records):
                break
        lost = [r.getMessage() for r in caplog.records if "was lost" in r.getMessage()]
        assert lost and all(sessions[0] in message for message in lost)
    finally:
        await store.close()
        await other.close()
