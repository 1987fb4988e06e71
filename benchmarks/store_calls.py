"""How long a turn waits on its store: every store call timed, many sessions at once, no HTTP.

    .venv/bin/python benchmarks/store_calls.py [--stores memory,sqlite,postgres] [--sessions 1,10,100]
        [--turns 5] [--latency 0.05] [--jitter 0] [--postgres URL]

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
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict
from typing import Any

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="memory,sqlite,postgres", help="of memory, sqlite, postgres")
    parser.add_argument("--sessions", default="1,10,100", help="counts of concurrent sessions, one row each")
    parser.add_argument("--turns", type=int, default=5, help="turns per session, one after the other")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--jitter", type=float, default=0.0, help="each model call this share shorter or longer")
    parser.add_argument("--postgres", default=os.environ.get("REACTCHAT_TEST_POSTGRES", DEFAULT_POSTGRES))
    args = parser.parse_args()
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
