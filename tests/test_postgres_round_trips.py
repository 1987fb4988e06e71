"""A PostgreSQL turn waits for the database at most three times when it calls no tool: the
look before the lock, the lock with its read and the turn's first event, and the answer with
the release. Each is counted as the server counts it: the relay of ``benchmarks/store_calls.py``
counts the server's ReadyForQuery messages, one per round trip a client waits for.

Fewer round trips must not mean weaker guarantees: the events the lock connection writes are
as durable as any append's (a crash of the database right after the turns keeps them all),
and the session's lock is free for another worker once the answer is stored.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.messages import AnswerEvent, UserEvent
from reactchat.store import resolve_store
from reactchat.toolbox import calculator
from server_support import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from store_calls import PREPARED, WireCount, labelled

ONE_TOOL = 'Thought: add them.\nAction: calculator\nAction Input: {"expression": "2 + 2"}'


async def turns(agent: Agent, session: str | None, replies: list[str], n: int) -> str:
    """``n`` turns of ``session`` (a new one when None), each answered as ``replies`` say; its id."""
    model = agent.model
    assert isinstance(model, ScriptedModel)
    for i in range(n):
        model.replies.extend([*replies[:-1], f"Final Answer: {i}"])
        result = await agent.arun(f"question {i}", session=session)
        assert result.status == "done" and result.answer == str(i)
        session = result.session
    assert session is not None
    return session


async def counted(url: str, replies: list[str]) -> tuple[int, float, str]:
    """Round trips of a new session's first turn (the turn makes the session) and per later
    turn, for turns answered as ``replies`` say, on a store warmed up first; the session."""
    wire = WireCount(url)
    store = resolve_store(await wire.start())
    agent = Agent(model=ScriptedModel([]), tools=[calculator], store=store)
    try:
        # connections made, the schema migrated, psycopg's statements prepared (its 6th run of one)
        await turns(agent, None, replies, PREPARED)
        labelled(store, wire)
        wire.counts.clear()
        session = await turns(agent, None, replies, 1)
        first = sum(wire.counts.values())
        wire.counts.clear()
        await turns(agent, session, replies, 4)
        return first, sum(wire.counts.values()) / 4, session
    finally:
        await store.close()
        await wire.close()


async def test_a_plain_turn_makes_three_round_trips(postgres_url: str) -> None:
    """A question answered in one model call: three round trips, as many for a session's first
    turn (the session made, the lock with the first event, the answer with the release); every
    event is in the database, and the lock is free, for another worker."""
    first, later, session = await counted(postgres_url, ["Final Answer: 0"])
    assert first <= 3
    assert later <= 3
    other = resolve_store(postgres_url)
    try:
        events = await other.events(session)
        assert [(type(e), e.turn) for e in events] == [(t, n) for n in range(1, 6) for t in (UserEvent, AnswerEvent)]
        assert await other.try_lock(session, "another worker", 60)
    finally:
        await other.close()


async def test_a_turn_with_one_tool_call_makes_five_round_trips(postgres_url: str) -> None:
    """One tool call adds two: its action is durable before the tool runs, its observation
    before the model sees it."""
    _, later, session = await counted(postgres_url, [ONE_TOOL, "Final Answer: 0"])
    assert later <= 5
    other = resolve_store(postgres_url)
    try:
        kinds = [e.type for e in await other.events(session) if e.turn == 5]
        assert kinds[0] == "user" and "action" in kinds and "observation" in kinds and kinds[-1] == "answer"
    finally:
        await other.close()


class Crashable:
    """A private PostgreSQL cluster (the shared one must never stop) whose WAL writer waits 10 s:
    a commit that did not wait for its WAL flush is lost when the cluster crashes in that time."""

    def __init__(self) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not binaries or shutil.which("runuser") is None:
            pytest.skip("no PostgreSQL binaries or no runuser here (scripts/setup.sh installs them)")
        self.bin = Path(binaries[-1])
        self.dir = Path(tempfile.mkdtemp(prefix="reactchat-pg-crash-"))
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        owned = subprocess.run(["chown", "postgres:", str(self.dir)], capture_output=True, check=False)
        data = str(self.dir / "data")
        if owned.returncode != 0 or not self.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"):
            shutil.rmtree(self.dir, ignore_errors=True)
            pytest.skip("a private PostgreSQL cluster cannot be made here (initdb as postgres needs root)")

    def run(self, tool: str, *args: str) -> bool:
        command = ["runuser", "-u", "postgres", "--", str(self.bin / tool), *args]
        return subprocess.run(command, capture_output=True, timeout=120, check=False).returncode == 0

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir / 'data'}"
            " -c wal_writer_delay=10000"
        )
        data, log = str(self.dir / "data"), str(self.dir / "log")
        assert self.run("pg_ctl", "-D", data, "-l", log, "-w", "-o", options, "start")

    def crash(self) -> None:
        """Stop at once, as a crash does: no checkpoint, WAL buffers not written are gone."""
        assert self.run("pg_ctl", "-D", str(self.dir / "data"), "-w", "-m", "immediate", "stop")

    def remove(self) -> None:
        self.run("pg_ctl", "-D", str(self.dir / "data"), "-w", "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def crashable() -> Iterator[Crashable]:
    cluster = Crashable()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


async def test_turns_written_with_the_lock_survive_a_crash_of_the_database(crashable: Crashable) -> None:
    """The first and last events of a turn go on the lock connection, whose own writes (marks,
    last activity) do not wait for the disk: the events' commits do. Turns acknowledged just
    before the database crashes are all there after its restart."""
    store = resolve_store(crashable.url)
    agent = Agent(model=ScriptedModel([]), store=store)
    try:
        session = await turns(agent, None, ["Final Answer: 0"], 3)
    finally:
        await store.close()
    crashable.crash()
    crashable.start()
    other = resolve_store(crashable.url)
    try:
        kept: list[Any] = [(e.type, e.turn) for e in await other.events(session)]
    finally:
        await other.close()
    assert kept == [(kind, n) for n in (1, 2, 3) for kind in ("user", "answer")]


async def test_the_relay_counts_round_trips(postgres_url: str) -> None:
    """The counter itself: one statement is one round trip, a pipeline of three is one."""
    import psycopg

    wire = WireCount(postgres_url)
    url = await wire.start()
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        wire.counts.clear()
        await conn.execute("SELECT 1")
        alone = sum(wire.counts.values())
        wire.counts.clear()
        async with conn.pipeline():
            for _ in range(3):
                await conn.execute("SELECT 1")
        together = sum(wire.counts.values())
        await conn.close()
    finally:
        await wire.close()
    assert (alone, together) == (1, 1)
