"""How long a turn waits on its store: every store call timed, many sessions at once, no HTTP;
and how many round trips a PostgreSQL turn makes.

    .venv/bin/python benchmarks/store_calls.py [--stores memory,sqlite,postgres] [--sessions 1,10,100]
        [--turns 5] [--latency 0.05] [--jitter 0] [--postgres URL]
    .venv/bin/python benchmarks/store_calls.py --round-trips [--postgres URL]

The engine alone (``Agent.stream``, the store given as a URL), with ``server_load.py``'s
turn: a scripted model that takes ``--latency`` seconds per call (``--jitter 0.3``: each
call 30 % shorter or longer at random) and needs three calls per turn (two calculator
steps, then the final answer). Each of ``--sessions`` sessions runs ``--turns`` turns one
after the other, all sessions at once, on one event loop; each count of sessions on a
fresh database. Printed per store and count: turns/s, the median turn (the floor is
3 × latency), the process's CPU per turn, and for each store method the turn called:
calls per turn, median, p90 and mean latency of a call. A turn's store calls run one
after the other, so their sum is what a turn waits beyond its model calls: on SQLite
and the memory store a call is work on the event loop; on PostgreSQL it is a round trip
to the database.

``--round-trips`` counts them instead: one session's turns, one after the other, go to
PostgreSQL through a relay (``WireCount``) that counts the server's ReadyForQuery messages,
one per round trip a client waits for (a statement, or a pipeline up to its end), each put
down to the store call that was waiting. Printed for turns of one model call (a plain
question), two (one tool call) and three (two tool calls): a new session's first turn (its
creation included) and a later turn of a session, in round trips per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import random
import statistics
import struct
import tempfile
import time
from collections import Counter, defaultdict
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from reactchat import Agent
from reactchat.store import Store, resolve_store
from reactchat.toolbox import calculator
from server_load import DEFAULT_POSTGRES, StepModel, fresh_database

#: the store methods a turn may call, depending on the store
TIMED = (
    "turn_events",
    "events",
    "exists",
    "try_lock",
    "try_lock_read",
    "try_lock_read_append",
    "append",
    "append_unlock",
    "unlock",
)


class JitteredModel(StepModel):
    """``StepModel`` whose every call takes ``delay`` ± ``jitter`` × ``delay`` seconds."""

    def __init__(self, delay: float, jitter: float) -> None:
        super().__init__(delay)
        self.mean, self.jitter = delay, jitter

    async def complete(self, request: Any) -> Any:
        self.delay = self.mean * (1 + self.jitter * (2 * random.random() - 1))
        return await super().complete(request)


def timed(store: Store, calls: dict[str, list[float]]) -> Store:
    """``store`` with each of its ``TIMED`` methods recording its latency in ``calls``."""
    for name in TIMED:
        method = getattr(store, name, None)
        if method is None:
            continue

        def wrap(method: Any, samples: list[float]) -> Any:
            async def call(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await method(*args, **kwargs)
                finally:
                    samples.append(time.perf_counter() - start)

            return call

        setattr(store, name, wrap(method, calls[name]))
    return store


async def run(url: str, sessions: int, turns: int, latency: float, jitter: float) -> dict[str, Any]:
    """``sessions`` × ``turns`` turns on the store at ``url``; the numbers of one row."""
    calls: dict[str, list[float]] = defaultdict(list)
    store = resolve_store(url)
    agent = Agent(model=JitteredModel(latency, jitter), tools=[calculator], store=store)
    ids = [await store.create_session() for _ in range(sessions)]
    timed(store, calls)
    turn_times: list[float] = []

    async def client(session: str) -> None:
        for n in range(turns):
            start = time.perf_counter()
            async for _ in agent.stream(f"question {n}", session=session):
                pass
            turn_times.append(time.perf_counter() - start)

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(client(session) for session in ids))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    await store.close()
    done = sessions * turns
    return {
        "turns_per_s": done / wall,
        "p50_turn_ms": statistics.median(turn_times) * 1000,
        "cpu_per_turn_ms": cpu / done * 1000,
        "calls": {
            name: {
                "per_turn": len(samples) / done,
                "p50_ms": statistics.median(samples) * 1000,
                "p90_ms": sorted(samples)[int(len(samples) * 0.9)] * 1000,
                "mean_ms": statistics.mean(samples) * 1000,
            }
            for name, samples in calls.items()
            if samples
        },
    }


#: turns that warm a store up before its round trips are counted (``round_trips``)
PREPARED = 7


class WireCount:
    """A TCP relay to PostgreSQL that counts the ReadyForQuery messages the server sends: one
    for each round trip a client waits for (a statement, or a pipeline up to its sync). Each is
    counted under ``label``, the store call the client was waiting in (one session at a time)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 5432
        self._parts = parts
        self.counts: Counter[str] = Counter()
        self.label = ""
        self._server: asyncio.Server | None = None
        self._relays: list[tuple[asyncio.Task[Any], asyncio.StreamWriter]] = []

    async def start(self) -> str:
        """Listen on a free loopback port; the URL that reaches the database through the relay
        (no TLS, no GSSAPI: the relay reads the server's messages)."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        user = f"{self._parts.username}@" if self._parts.username else ""
        query = "&".join(q for q in (self._parts.query, "sslmode=disable&gssencmode=disable") if q)
        return urlunsplit((self._parts.scheme, f"{user}127.0.0.1:{port}", self._parts.path, query, ""))

    async def close(self) -> None:
        """Stop listening and end every relayed connection (each relay then ends by itself)."""
        if self._server is not None:
            self._server.close()
        for _, writer in self._relays:
            writer.close()
        await asyncio.gather(*(task for task, _ in self._relays), return_exceptions=True)

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(self.host, self.port)
        task = asyncio.current_task()
        assert task is not None
        self._relays.append((task, server_writer))

        async def up() -> None:
            while data := await client_reader.read(65536):
                server_writer.write(data)
                await server_writer.drain()
            server_writer.close()

        async def down() -> None:
            pending = b""
            while data := await server_reader.read(65536):
                pending += data
                # the server's messages: a type byte, then a length that counts itself
                while len(pending) >= 5:
                    size = struct.unpack("!I", pending[1:5])[0] + 1
                    if len(pending) < size:
                        break
                    if pending[:1] == b"Z":
                        self.counts[self.label or "(between store calls)"] += 1
                    pending = pending[size:]
                client_writer.write(data)
                await client_writer.drain()
            client_writer.close()

        await asyncio.gather(up(), down(), return_exceptions=True)


def labelled(store: Store, wire: WireCount) -> Store:
    """``store`` with each of its public methods naming itself in ``wire.label`` while it runs
    (the outermost call only: ``append_unlock`` may call ``append``)."""
    for name in dir(store):
        method = getattr(store, name)
        if name.startswith("_") or not inspect.iscoroutinefunction(method):
            continue

        def wrap(method: Any, name: str) -> Any:
            async def call(*args: Any, **kwargs: Any) -> Any:
                outer = not wire.label
                if outer:
                    wire.label = name
                try:
                    return await method(*args, **kwargs)
                finally:
                    if outer:
                        wire.label = ""

            return call

        setattr(store, name, wrap(method, name))
    return store


async def round_trips(url: str, steps: int, turns: int) -> tuple[Counter[str], Counter[str]]:
    """Round trips by store call: of a new session's first turn, and per later turn of it
    (``turns`` of them), for turns of ``steps`` model calls of no latency."""
    wire = WireCount(url)
    relayed = await wire.start()
    store = resolve_store(relayed)
    agent = Agent(model=StepModel(0, steps), tools=[calculator], store=store)
    try:
        # the store's connections made, the schema migrated, and every statement run more than
        # psycopg's prepare_threshold times (its 6th run prepares it: one round trip more, once)
        warm = await store.create_session()
        for n in range(PREPARED):
            async for _ in agent.stream(f"warming up {n}", session=warm):
                pass
        labelled(store, wire)
        wire.counts.clear()
        session = ""
        async for event in agent.stream("question 0"):  # a new session, made by the turn
            session = event.session
        first = Counter(wire.counts)
        wire.counts.clear()
        for n in range(turns):
            async for _ in agent.stream(f"question {n + 1}", session=session):
                pass
        later = Counter({name: count / turns for name, count in wire.counts.items()})
        return first, later
    finally:
        await store.close()
        await wire.close()


def print_round_trips(postgres: str, turns: int) -> None:
    """``--round-trips``: the table of round trips per PostgreSQL turn."""
    print(f"PostgreSQL round trips per turn (one session; later turns: the mean of {turns}); load average ", end="")
    print(f"{os.getloadavg()[0]:.1f}")
    print("| model calls per turn | turn | round trips | by store call |")
    print("|---:|---|---:|---|")
    with tempfile.TemporaryDirectory() as folder, fresh_database("pg", folder, postgres) as url:
        for steps in (1, 2, 3):
            first, later = asyncio.run(round_trips(url, steps, turns))
            for kind, counts in (("a new session's first (made by the turn)", first), ("a later one", later)):
                by_call = "; ".join(f"{name} {count:g}" for name, count in counts.items())
                print(f"| {steps} | {kind} | {sum(counts.values()):g} | {by_call} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="memory,sqlite,postgres", help="of memory, sqlite, postgres")
    parser.add_argument("--sessions", default="1,10,100", help="counts of concurrent sessions, one row each")
    parser.add_argument("--turns", type=int, default=5, help="turns per session, one after the other")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--jitter", type=float, default=0.0, help="each model call this share shorter or longer")
    parser.add_argument("--postgres", default=os.environ.get("REACTCHAT_TEST_POSTGRES", DEFAULT_POSTGRES))
    parser.add_argument("--round-trips", action="store_true", help="count a PostgreSQL turn's round trips instead")
    args = parser.parse_args()
    if args.round_trips:
        print_round_trips(args.postgres, args.turns)
        return
    print(
        f"{args.turns} turns per session, 3 model calls of {args.latency * 1000:g} ms"
        f"{f' ± {args.jitter:.0%}' if args.jitter else ''} (a turn's floor: {3 * args.latency * 1000:g} ms); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| store | sessions | turns/s | p50 turn ms | CPU ms/turn | store call: calls per turn, p50 / p90 / mean ms |"
    )
    print("|---|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        for store in args.stores.split(","):
            for sessions in (int(n) for n in args.sessions.split(",")):
                kind = {"memory": "memory:", "postgres": "pg"}.get(store, store)
                with fresh_database(kind, folder, args.postgres) as url:
                    row = asyncio.run(run(url, sessions, args.turns, args.latency, args.jitter))
                calls = "; ".join(
                    f"{name} {c['per_turn']:.0f}× {c['p50_ms']:.2f} / {c['p90_ms']:.2f} / {c['mean_ms']:.2f}"
                    for name, c in row["calls"].items()
                )
                print(
                    f"| {store} | {sessions} | {row['turns_per_s']:.1f} | {row['p50_turn_ms']:.1f} "
                    f"| {row['cpu_per_turn_ms']:.2f} | {calls} |"
                )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
