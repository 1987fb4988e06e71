"""Load on the HTTP server: many concurrent sessions streaming turns over SSE.

    .venv/bin/python benchmarks/server_load.py [--sessions 100] [--turns 5] [--latency 0.05] [--db memory:]
    .venv/bin/python benchmarks/server_load.py --matrix [--before ../main]   # every store, one run
    .venv/bin/python benchmarks/server_load.py --sessions 1000 --turns 2 --idle 10000 --db sqlite:///x.db

A real uvicorn process serves a scripted model that takes ``--latency`` seconds per
call and needs 3 calls per turn (two calculator steps, then the final answer), so a
turn can never be faster than 3 × latency. Each of ``--sessions`` clients runs
``--turns`` turns one after the other, all clients at once. Printed: turns/s against
the ideal (every turn at 3 × latency, all sessions in parallel), p50/p99 turn latency
and the time to the first SSE event, the server's resident memory per session (its
growth over the run, divided by the sessions) and the server's CPU time per turn.
``--workers N`` starts N server processes on one store and spreads the sessions over them.

``--matrix`` runs memory, SQLite, PostgreSQL with 1 and with 2 workers one after the
other (each on a fresh database: a new SQLite file, a new PostgreSQL schema) and prints
them side by side with their ratio to SQLite; ``--before DIR`` adds the same runs with
the server importing ``DIR/src`` (another checkout, e.g. main's code), each store's
"before" right beside its "after"; ``--rounds N`` runs each row N times and shows the
medians (each round runs every store once, before and after alternating, so that a busy
stretch of a shared machine falls on every row alike; each run's p99/p50 is printed as it
ends); ``--stores sqlite`` (or any of ``memory,sqlite,postgres1,postgres2``) runs only those
rows. ``--idle N`` first fills the store with N sessions
of one finished turn each, which no client touches. The server's memory is also sampled
during the run: ``peak`` is the highest RSS above the warmed-up server, per session.

Each run also reads from ``/proc/PID/task/TID/schedstat`` how long the servers' event loop
threads and the load generator's spent runnable but waiting for a core: on a shared machine,
the share of the run the machine took from them ("waiting for a core").

``--trace DIR`` records every turn (which session, which of its turns, when it was sent,
its latency), every garbage collection of the servers and their event loops' lateness
(probed every 5 ms, with the time each loop waited for a core meanwhile), the load
generator's own lateness too, and prints what the slowest 2 % of the turns overlapped.
The app runs with the collector ``reactchat serve`` sets up (``server/_gc.py``;
``REACTCHAT_GC_THRESHOLD=default`` for the interpreter's).

``BENCH_PROFILE=out.prof`` profiles the server's event loop thread with cProfile, in CPU
time and from the end of the warm-up on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import re
import signal
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

HERE = Path(__file__).parent
STEPS = 3
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:55432/reactchat_test"
#: the rows of ``--matrix``: label, store ("pg": a fresh schema, "sqlite": a fresh file), workers
#: (two memory workers each keep their own sessions: a client's session stays on its worker)
STORES = {
    "memory": ("memory", "memory:", 1),
    "memory2": ("memory ×2", "memory:", 2),
    "sqlite": ("sqlite", "sqlite", 1),
    "sqlite2": ("sqlite ×2", "sqlite", 2),
    "postgres1": ("postgres ×1", "pg", 1),
    "postgres2": ("postgres ×2", "pg", 2),
}


class StepModel:
    """``steps - 1`` calculator steps (two by default), then a final answer; ``delay`` seconds per call."""

    name = "bench"
    supports_tools = False
    context_tokens = None

    def __init__(self, delay: float, steps: int = STEPS) -> None:
        self.delay = delay
        self.steps = steps

    async def complete(self, request: Any) -> Any:
        from reactchat.messages import Reply, TextPart

        await asyncio.sleep(self.delay)
        scratchpad = request.messages[-1].text
        seen = re.findall(r"Observation: (.*?)\nThought:", scratchpad, re.S)
        if len(seen) < self.steps - 1:
            expression = f"{len(seen) + 1} + {len(seen) + 1}"
            text = f' Step {len(seen) + 1}.\nAction: calculator\nAction Input: {{"expression": "{expression}"}}'
        else:
            text = f" Done.\nFinal Answer: {seen[-1] if seen else 'nothing to add'}"
        return Reply(parts=[TextPart(text=text)])


def bench_app() -> Any:
    """The app under load (``uvicorn --factory server_load:bench_app``)."""
    from reactchat import Agent
    from reactchat.server import ServerConfig, create_app
    from reactchat.toolbox import calculator

    delay = float(os.environ["BENCH_LATENCY"])
    steps = int(os.environ.get("BENCH_STEPS", STEPS))
    # one client opens every session at once: no per-client rate of new sessions (where the
    # code under test has one: a --before checkout may not)
    fields = {field.name for field in dataclasses.fields(ServerConfig)}
    unlimited = {"max_new_sessions": None} if "max_new_sessions" in fields else {}
    config = ServerConfig(model="bench", store=os.environ.get("REACTCHAT_DB", "memory:"), **unlimited)
    app = create_app(lambda store: Agent(model=StepModel(delay, steps), tools=[calculator], store=store), config=config)
    with contextlib.suppress(ImportError):  # as reactchat serve does (a --before checkout may not)
        from reactchat.server._gc import settle_collector

        settle_collector()
    return trace_server(os.environ["BENCH_TRACE"], app) if os.environ.get("BENCH_TRACE") else app


def trace_server(path: str, app: Any) -> Any:
    """Record every garbage collection (start, duration, generation) and the event loop's lateness.

    Written to ``path`` (JSON lines, ``time.monotonic()`` seconds, comparable with the load
    generator's) when the process exits.
    """
    import atexit
    import gc
    import threading

    records: list[list[Any]] = []
    started: list[float] = [0.0]

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.monotonic()
        else:
            now = time.monotonic()
            records.append(["gc", started[0], now - started[0], info["generation"], info["collected"]])

    gc.callbacks.append(collected)

    async def ticking() -> None:
        tid = threading.get_native_id()
        while True:
            before, waited = time.monotonic(), runqueue_wait(os.getpid(), tid)
            await asyncio.sleep(TICK)
            records.append(["lag", before, time.monotonic() - before - TICK, runqueue_wait(os.getpid(), tid) - waited])

    def write() -> None:
        with open(path, "a") as out:
            out.writelines(json.dumps(r) + "\n" for r in records)

    atexit.register(write)
    ticker: list[asyncio.Task[None]] = []

    async def traced(scope: Any, receive: Any, send: Any) -> None:
        if not ticker:  # the first call (lifespan's start-up) runs on the server's loop
            ticker.append(asyncio.get_running_loop().create_task(ticking()))
        await app(scope, receive, send)

    return traced


#: seconds between two ticks of a lateness probe (server and load generator)
TICK = 0.005


#: uvicorn under cProfile counting the event loop thread's CPU time (not wall time: on a
#: busy machine that would charge other processes' time slices to whatever ran last);
#: profiling starts at SIGUSR1 (after the warm-up), the profile is written at exit
PROFILED = """
import cProfile, runpy, signal, sys, time
out = sys.argv.pop(1)
profile = cProfile.Profile(time.thread_time)
signal.signal(signal.SIGUSR1, lambda *_: profile.enable())
sys.argv[0] = "uvicorn"
try:
    runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
finally:
    profile.disable()
    profile.dump_stats(out)
"""


def backends_cpu(url: str, name: str | None) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend whose application name is ``name`` (a local server only)."""
    if name is None:
        return {}
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchall()
    found = {}
    for (pid,) in rows:
        with contextlib.suppress(OSError):  # gone, or on another machine
            found[pid] = cpu_seconds(pid)
    return found


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def runqueue_wait(pid: int, tid: int | None = None) -> float:
    """Seconds a thread (the main one by default) has spent runnable but waiting for a core."""
    return int(Path(f"/proc/{pid}/task/{tid or pid}/schedstat").read_text().split()[1]) / 1e9


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Connection:
    """A minimal keep-alive HTTP/1.1 client over asyncio streams.

    httpx costs the client ~18 ms of CPU per streamed turn, more than the server; on a
    shared 2-core machine that would measure the client. This one parses only what
    uvicorn sends: a status line, headers, then a chunked or sized body.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """Send a request; returns the status and an async iterator of body pieces."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
        self.writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        assert self.reader is not None
        status = int((await self.reader.readline()).split()[1])
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, self._body(headers)

    async def _body(self, headers: dict[str, str]) -> Any:
        assert self.reader is not None
        if headers.get("transfer-encoding") == "chunked":
            while size := int((await self.reader.readline()).strip(), 16):
                yield await self.reader.readexactly(size)
                await self.reader.readexactly(2)
            await self.reader.readexactly(2)
        else:
            yield await self.reader.readexactly(int(headers.get("content-length", "0")))

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()


async def one_session(port: int, turns: int, index: int, records: list[Turn]) -> None:
    conn = Connection("127.0.0.1", port)
    try:
        status, body = await conn.request("POST", "/v1/sessions")
        session = json.loads(b"".join([piece async for piece in body]))["session"]
        for i in range(turns):
            started = time.perf_counter()
            at = time.monotonic()
            first = None
            status, body = await conn.request("POST", f"/v1/sessions/{session}/messages", {"message": f"turn {i}"})
            received = b""
            async for piece in body:
                first = first if first is not None else time.perf_counter() - started
                received += piece
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {received!r}")
            end = json.loads(received.rsplit(b"event: end\ndata: ", 1)[1])
            if end["status"] != "done":
                raise RuntimeError(f"turn ended badly: {end}")
            records.append(Turn(index, i, port, at, time.perf_counter() - started, first or 0.0))
    finally:
        await conn.close()


@dataclasses.dataclass
class Turn:
    """One turn as the load generator saw it (``at``: ``time.monotonic()`` when it was sent)."""

    session: int
    turn: int
    port: int
    at: float
    latency: float
    first: float


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def load(
    ports: list[int], sessions: int, turns: int, lateness: list[list[float]] | None = None
) -> tuple[float, list[Turn]]:
    """Run ``sessions`` clients at once, spread over the servers; wall time and the turns.

    ``lateness``: when given, the load generator's own event loop lateness is probed every
    ``TICK`` seconds and recorded there as ``[when, seconds late]``.
    """
    records: list[Turn] = []
    started = time.perf_counter()
    clients = (one_session(ports[i % len(ports)], turns, i, records) for i in range(sessions))
    probe = asyncio.ensure_future(late(lateness)) if lateness is not None else None
    try:
        await asyncio.gather(*clients)
    finally:
        if probe is not None:
            probe.cancel()
    return time.perf_counter() - started, records


async def late(lateness: list[list[float]]) -> None:
    while True:
        before, waited = time.monotonic(), runqueue_wait(os.getpid())
        await asyncio.sleep(TICK)
        lateness.append([before, time.monotonic() - before - TICK, runqueue_wait(os.getpid()) - waited])


def start_server(
    db: str, latency: float, code: str | None = None, trace: str | None = None, steps: int = STEPS
) -> tuple[subprocess.Popen[bytes], int]:
    """One uvicorn process on a free loopback port, once it answers.

    ``code``: a checkout whose src to run; ``trace``: a file for its collections and lateness.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    env = {**os.environ, "BENCH_LATENCY": str(latency), "BENCH_STEPS": str(steps), "REACTCHAT_DB": db}
    if trace is not None:
        env["BENCH_TRACE"] = trace
    if code is not None:
        env["PYTHONPATH"] = str(Path(code).resolve() / "src")
    profile = ["-c", PROFILED, os.environ["BENCH_PROFILE"]] if os.environ.get("BENCH_PROFILE") else ["-m", "uvicorn"]
    command = [sys.executable, *profile, "--factory", "--app-dir", str(HERE), "server_load:bench_app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
    server = subprocess.Popen(command, env=env)
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            return server, port
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.1)


async def fill(db: str, sessions: int) -> None:
    """``sessions`` idle sessions in the store, each with one finished turn."""
    from reactchat.messages import AnswerEvent, UserEvent
    from reactchat.store import resolve_store

    store = resolve_store(db)
    try:
        for i in range(sessions):
            session = await store.create_session()
            await store.append(
                UserEvent(session=session, turn=1, text=f"idle question {i}"),
                AnswerEvent(session=session, turn=1, step=1, text=f"idle answer {i}"),
            )
    finally:
        await store.close()


async def sampled(pids: list[int], run: Any) -> tuple[Any, int]:
    """``run``'s result and the highest total RSS of ``pids`` seen while it ran (every 50 ms)."""
    task = asyncio.ensure_future(run)
    peak = 0
    while not task.done():
        peak = max(peak, sum(map(rss_kib, pids)))
        await asyncio.wait([task], timeout=0.05)
    return task.result(), peak


def measure(args: argparse.Namespace, code: str | None = None) -> dict[str, Any]:
    """Run the load against ``args.workers`` servers; the numbers."""
    if args.idle and not args.db.startswith("memory:"):  # a memory store lives in the server
        asyncio.run(fill(args.db, args.idle))
    db, database = args.db, None
    if db.startswith(("postgresql:", "postgres:")):  # its backends are told apart by their application name
        database = f"server_load_{uuid.uuid4().hex[:8]}"
        db = f"{db}{'&' if '?' in db else '?'}application_name={database}"
    trace = Path(args.trace) if args.trace else None
    if trace is not None:
        trace.mkdir(parents=True, exist_ok=True)
    traces = [str(trace / f"server-{i}.jsonl") if trace else None for i in range(args.workers)]
    servers = [start_server(db, args.latency, code, traces[i], args.steps) for i in range(args.workers)]
    ports = [port for _, port in servers]
    pids = [server.pid for server, _ in servers]
    try:
        asyncio.run(load(ports, 2 * len(ports), 1))  # warm up imports and the first connections
        if os.environ.get("BENCH_PROFILE"):
            for pid in pids:
                os.kill(pid, signal.SIGUSR1)
        rss_before, cpu_before = sum(map(rss_kib, pids)), sum(map(cpu_seconds, pids))
        db_before = backends_cpu(args.db, database)
        client_before = time.process_time()
        waits_before = [runqueue_wait(pid) for pid in [*pids, os.getpid()]]
        lateness: list[list[float]] | None = [] if trace else None
        (wall, turns), peak = asyncio.run(sampled(pids, load(ports, args.sessions, args.turns, lateness)))
        client_cpu = time.process_time() - client_before
        waits = [runqueue_wait(pid) - w for pid, w in zip([*pids, os.getpid()], waits_before, strict=True)]
        rss_after, cpu_after = sum(map(rss_kib, pids)), sum(map(cpu_seconds, pids))
        db_after = backends_cpu(args.db, database)
    finally:
        for server, _ in servers:
            server.send_signal(signal.SIGINT)  # like Ctrl-C: a profiled server writes its profile
        for server, _ in servers:
            server.wait(10)
    if trace is not None:
        with open(trace / "client.jsonl", "w") as out:
            out.writelines(json.dumps(["turn", *dataclasses.astuple(t)]) + "\n" for t in turns)
            out.writelines(json.dumps(["lag", *late]) + "\n" for late in lateness or [])
        tails(trace, ports)
    latencies = [t.latency for t in turns]
    total = args.sessions * args.turns
    ideal_turn = args.steps * args.latency
    # with a zero-latency model there is no ideal: the machine's CPU and the store set the pace
    ideal_rate = args.sessions / ideal_turn if ideal_turn else None
    return {
        "sessions": args.sessions,
        "turns": total,
        "workers": args.workers,
        "store": args.db.split(":", 1)[0],
        "model_latency_s": args.latency,
        "model_calls": args.steps,
        "wall_s": round(wall, 2),
        "turns_per_s": round(total / wall, 1),
        "ideal_turns_per_s": round(ideal_rate, 1) if ideal_rate else None,
        "efficiency": round(total / wall / ideal_rate, 3) if ideal_rate else None,
        "turn_p50_ms": round(1000 * statistics.median(latencies), 1),
        "turn_p99_ms": round(1000 * percentile(latencies, 99), 1),
        "ideal_turn_ms": round(1000 * ideal_turn, 1),
        "first_event_p50_ms": round(1000 * statistics.median(t.first for t in turns), 1),
        "server_rss_growth_kib_per_session": round((rss_after - rss_before) / args.sessions, 1),
        "server_rss_peak_kib_per_session": round((peak - rss_before) / args.sessions, 1),
        "idle_sessions": args.idle,
        "server_rss_mib": round(rss_after / 1024, 1),
        "server_cpu_ms_per_turn": round(1000 * (cpu_after - cpu_before) / total, 2),
        "client_cpu_ms_per_turn": round(1000 * client_cpu / total, 2),
        # PostgreSQL's backends serving the servers (a backend that started during the run: all of its CPU)
        "db_cpu_ms_per_turn": round(1000 * sum(t - db_before.get(p, 0.0) for p, t in db_after.items()) / total, 2),
        # the share of the run the servers' event loop threads (on average) and the load
        # generator's spent runnable but waiting for a core: what the machine took from them
        "server_waiting_for_cpu": round(sum(waits[:-1]) / len(pids) / wall, 3),
        "client_waiting_for_cpu": round(waits[-1] / wall, 3),
        "load_average": round(os.getloadavg()[0], 1),
    }


def tails(trace: Path, ports: list[int]) -> None:
    """What the slowest turns overlapped: the servers' collections and lateness, the load generator's."""
    turns: list[Turn] = []
    client_lag: list[list[float]] = []
    for line in (trace / "client.jsonl").read_text().splitlines():
        kind, *rest = json.loads(line)
        (turns.append(Turn(*rest)) if kind == "turn" else client_lag.append(rest))
    gcs: dict[int, list[list[float]]] = {port: [] for port in ports}
    server_lag: dict[int, list[list[float]]] = {port: [] for port in ports}
    for i, port in enumerate(ports):
        with contextlib.suppress(FileNotFoundError):
            for line in (trace / f"server-{i}.jsonl").read_text().splitlines():
                kind, *rest = json.loads(line)
                (gcs if kind == "gc" else server_lag)[port].append(rest)
    begin = min(t.at for t in turns)
    end = max(t.at + t.latency for t in turns)

    def within(records: list[list[float]], t: Turn) -> list[list[float]]:
        return [r for r in records if r[0] < t.at + t.latency and r[0] + max(r[1], 0.0) > t.at]

    def describe(t: Turn) -> str:
        pauses = within(gcs[t.port], t)
        by_generation = [sum(r[1] for r in pauses if r[2] == g) * 1000 for g in (0, 1, 2)]
        slow_server = max((r[1] for r in within(server_lag[t.port], t)), default=0.0) * 1000
        slow_client = max((r[1] for r in within(client_lag, t)), default=0.0) * 1000
        server_waited = sum(r[2] for r in within(server_lag[t.port], t) if len(r) > 2) * 1000
        client_waited = sum(r[2] for r in within(client_lag, t) if len(r) > 2) * 1000
        return (
            f"session {t.session:3d} turn {t.turn + 1} port {t.port} at {t.at - begin:6.3f} s: "
            f"{t.latency * 1000:6.1f} ms "
            f"(first event {t.first * 1000:6.1f}); server gc ms gen0/1/2 "
            f"{by_generation[0]:5.1f}/{by_generation[1]:5.1f}/{by_generation[2]:5.1f}, "
            f"server late max {slow_server:5.1f} ms, client late max {slow_client:5.1f} ms; "
            f"waiting for a core: server {server_waited:5.1f} ms, client {client_waited:5.1f} ms"
        )

    ordered = sorted(turns, key=lambda t: t.latency)
    cut = percentile([t.latency for t in turns], 99)
    print(f"trace {trace}: {len(turns)} turns over {end - begin:.2f} s, p99 {cut * 1000:.1f} ms; the slowest 2 %:")
    for t in ordered[-max(1, len(turns) // 50) :][::-1]:
        print("  " + describe(t))
    print(f"  the median turn: {describe(ordered[len(ordered) // 2])}")
    by_turn = {i: statistics.median(t.latency for t in turns if t.turn == i) * 1000 for i in {t.turn for t in turns}}
    print("  median latency by turn of the session (ms): " + ", ".join(f"{i + 1}: {v:.0f}" for i, v in by_turn.items()))
    for port in ports:
        during = [r for r in gcs[port] if begin <= r[0] <= end]
        pauses = [r[1] * 1000 for r in during]
        if pauses:
            print(
                f"  port {port} collections: {len(pauses)}, {sum(pauses):.1f} ms in all "
                f"({sum(pauses) / len(turns) * len(ports):.3f} ms per turn), longest {max(pauses):.1f} ms"
            )
        for g in (0, 1, 2):
            pauses = [r[1] * 1000 for r in during if r[2] == g]
            if pauses:
                print(
                    f"  port {port} gen {g}: {len(pauses)} collections, {sum(pauses):.1f} ms in all, "
                    f"longest {max(pauses):.1f} ms"
                )
        for r in during:
            if r[2] == 2:
                print(f"  port {port}: gen-2 collection at {r[0] - begin:.3f} s took {r[1] * 1000:.1f} ms")
        print(f"  port {port} event loop late: {spread([r[1] for r in server_lag[port] if begin <= r[0] <= end])}")
    print(f"  load generator's event loop late: {spread([r[1] for r in client_lag])}")


def spread(lateness: list[float]) -> str:
    """p50, p99 and the largest of lateness figures (seconds), in ms."""
    if not lateness:
        return "not measured"
    ms = sorted(late * 1000 for late in lateness)
    return f"p50 {ms[len(ms) // 2]:.1f} ms, p99 {percentile(ms, 99):.1f}, max {ms[-1]:.1f}"


def report(r: dict[str, Any], db: str) -> None:
    """The numbers, for people."""
    calls = f"{r['model_calls']} model calls of {r['model_latency_s'] * 1000:.0f} ms"
    print(f"{r['sessions']} sessions × {r['turns'] // r['sessions']} turns over SSE, {calls}")
    print(f"store: {db}, {r['workers']} server process(es)")
    ideal = f" (ideal {r['ideal_turns_per_s']}, {r['efficiency']:.0%})" if r["ideal_turns_per_s"] else ""
    print(f"throughput: {r['turns_per_s']} turns/s{ideal}")
    print(f"turn latency: p50 {r['turn_p50_ms']} ms, p99 {r['turn_p99_ms']} ms (ideal {r['ideal_turn_ms']} ms)")
    print(f"first SSE event: p50 {r['first_event_p50_ms']} ms")
    growth, peak = r["server_rss_growth_kib_per_session"], r["server_rss_peak_kib_per_session"]
    idle = f", {r['idle_sessions']} idle sessions in the store" if r["idle_sessions"] else ""
    print(f"server memory per session: {growth} KiB after the run, {peak} KiB at peak{idle}")
    print(f"server RSS after the run: {r['server_rss_mib']} MiB")
    database = f", PostgreSQL {r['db_cpu_ms_per_turn']} ms" if r["store"].startswith("postgres") else ""
    cpu = f"server {r['server_cpu_ms_per_turn']} ms{database}, client {r['client_cpu_ms_per_turn']} ms"
    print(f"CPU per turn: {cpu} (machine load average {r['load_average']} on {os.cpu_count()} cores)")
    waiting = f"server {r['server_waiting_for_cpu']:.0%}, load generator {r['client_waiting_for_cpu']:.0%}"
    print(f"share of the run spent waiting for a core: {waiting}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5, help="turns per session, one after the other")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--steps", type=int, default=STEPS, help="model calls per turn (all but the last call a tool)")
    parser.add_argument("--db", default="memory:", help="store URL: memory:, sqlite:///path.db, postgresql://...")
    parser.add_argument("--workers", type=int, default=1, help="server processes (share a SQLite or PostgreSQL db)")
    parser.add_argument("--idle", type=int, default=0, help="idle sessions put in the store before the run")
    parser.add_argument("--matrix", action="store_true", help="memory, SQLite, PostgreSQL ×1 and ×2 side by side")
    parser.add_argument("--before", help="with --matrix: a checkout whose src/ the 'before' servers run")
    parser.add_argument("--rounds", type=int, default=1, help="with --matrix: runs of each row (medians shown)")
    parser.add_argument("--stores", default=",".join(STORES), help=f"with --matrix: which rows, of {','.join(STORES)}")
    parser.add_argument("--postgres", default=os.environ.get("REACTCHAT_TEST_POSTGRES", DEFAULT_POSTGRES))
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--trace", help="a directory: per-turn records, the servers' collections and lateness")
    args = parser.parse_args()
    if args.matrix:
        matrix(args)
        return
    if args.workers > 1 and args.db.startswith("memory:"):
        parser.error("several workers need a shared store: --db sqlite:///path.db or postgresql://...")
    result = measure(args)
    if args.json:
        print(json.dumps(result))
    else:
        report(result, args.db)


def matrix(args: argparse.Namespace) -> None:
    """Every store, one after the other, on fresh databases; a table with ratios to SQLite."""
    codes: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        codes.insert(0, ("before", args.before))
    stores = [STORES[name] for name in args.stores.split(",")]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # each round runs every store once, so a busy stretch of a shared machine falls on all
        # of them alike; before and after alternate, each round in the other order
        for i in range(args.rounds):
            for label, db, workers in stores:
                for code_name, code in codes if i % 2 == 0 else codes[::-1]:
                    trace = f"{args.trace}/round{i + 1}-{db}{workers}-{code_name}" if args.trace else None
                    result = measure_fresh(argparse.Namespace(**{**vars(args), "trace": trace}), db, workers, tmp, code)
                    runs.setdefault((label, code_name), []).append(result)
                    print(
                        f"done: round {i + 1}, {label} {code_name}: p99/p50 "
                        f"{result['turn_p99_ms'] / result['turn_p50_ms']:.2f}, {result['turns_per_s']} turns/s "
                        f"(load average {result['load_average']})",
                        file=sys.stderr,
                    )
    rows = [(label, code_name, median_row(runs[label, code_name])) for label, _, _ in stores for code_name, _ in codes]
    print_matrix(args, rows)
    if args.json:
        print(json.dumps([{"store": label, "code": code, **r} for label, code, r in rows]))


def median_row(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over rounds (the load average's too)."""
    row = dict(results[0])
    for key, value in row.items():
        if isinstance(value, float):
            row[key] = round(statistics.median(r[key] for r in results), 2)
    return row


def measure_fresh(args: argparse.Namespace, db: str, workers: int, tmp: str, code: str | None) -> dict[str, Any]:
    """One run on a fresh database: a new SQLite file, a new PostgreSQL schema."""
    with fresh_database(db, tmp, args.postgres) as url:
        return measure(argparse.Namespace(**{**vars(args), "db": url, "workers": workers}), code)


@contextlib.contextmanager
def fresh_database(db: str, tmp: str, postgres: str) -> Iterator[str]:
    """The URL of an empty database: ``db`` "sqlite" a new file in ``tmp``, "pg" a new schema
    in ``postgres`` (dropped afterwards), any other ``db`` is a URL, used as it is."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    if db == "sqlite":
        yield f"sqlite:///{tmp}/{schema}.db"
    elif db == "pg":
        import psycopg

        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in postgres else "?"
        try:
            yield f"{postgres}{sep}options=-csearch_path%3D{schema}"
        finally:
            with psycopg.connect(postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    else:
        yield db


def print_matrix(args: argparse.Namespace, rows: list[tuple[str, str, dict[str, Any]]]) -> None:
    """The matrix as a markdown table: ratios of turns/s to SQLite's of the same code, with one
    worker ("vs SQLite") and with as many workers as the row ("vs SQLite, same workers")."""
    sqlite = {(code, r["workers"]): r["turns_per_s"] for label, code, r in rows if label.startswith("sqlite")}
    first = rows[0][2]
    ideal = f" (ideal {first['ideal_turns_per_s']} turns/s, {first['ideal_turn_ms']} ms a turn)" if args.latency else ""
    print(
        f"{args.sessions} sessions × {args.turns} turns over SSE, {args.steps} model calls of "
        f"{args.latency * 1000:.0f} ms{ideal}; load average {os.getloadavg()[0]:.1f} at the end"
    )
    before = {label: r["server_cpu_ms_per_turn"] for label, code, r in rows if code == "before"}
    rounds = f", median of {args.rounds} rounds" if args.rounds > 1 else ""
    print(f"each row on a fresh database{rounds}; CPU vs before: this row's server CPU per turn / before's")
    print(
        "| store | code | turns/s | vs SQLite | vs SQLite, same workers | p50 ms | p99 ms | p99/p50 "
        "| server CPU ms/turn | CPU vs before | database CPU ms/turn | client CPU ms/turn | KiB/session (peak) "
        "| waiting for a core: server / client | load avg |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for label, code, r in rows:
        cpu = r["server_cpu_ms_per_turn"]
        versus = f"{cpu / before[label]:.2f}" if label in before else "–"
        one, same = sqlite.get((code, 1)), sqlite.get((code, r["workers"]))
        versus_sqlite = f"{r['turns_per_s'] / one:.2f}" if one else "–"
        versus_same = f"{r['turns_per_s'] / same:.2f}" if same else "–"
        print(
            f"| {label} | {code} | {r['turns_per_s']} | {versus_sqlite} | {versus_same} | {r['turn_p50_ms']} "
            f"| {r['turn_p99_ms']} | {r['turn_p99_ms'] / r['turn_p50_ms']:.2f} | {cpu} | {versus} "
            f"| {r['db_cpu_ms_per_turn'] if label.startswith('postgres') else '–'} "
            f"| {r['client_cpu_ms_per_turn']} | {r['server_rss_peak_kib_per_session']} "
            f"| {r['server_waiting_for_cpu']:.0%} / {r['client_waiting_for_cpu']:.0%} | {r['load_average']} |"
        )


if __name__ == "__main__":
    main()
