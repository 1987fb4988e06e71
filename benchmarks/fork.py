"""How long a fork takes: ``agent.fork(session, before=seq)`` of a 200-event session.

    .venv/bin/python benchmarks/fork.py [--postgres URL] [--events 200] [--forks 50] [--json out.json]

A real turn of calculator steps with a scripted model writes the session (a user message,
then thought, action and observation per step, then the answer: ``--events`` in all). Each
store then forks it ``--forks`` times, alternately whole (``before=None``) and before an
event inside the turn (the last step's observation); the figure is the wall time of one
``agent.fork``, median and p99, with no file to copy. The target is 20 ms on SQLite and
PostgreSQL. The sessions made are deleted at the end.

PostgreSQL defaults to ``$REACTCHAT_TEST_POSTGRES`` or scripts/start-postgres.sh's URL; the
benchmark works in a schema of its own there, dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reactchat import Agent, ScriptedModel, calculator
from reactchat.messages import ObservationEvent
from reactchat.store import resolve_store

STEP = ' Step %d.\nAction: calculator\nAction Input: {"expression": "%d * 1.15"}'
#: the target, in milliseconds
TARGET_MS = 20.0


async def bench(url: str, events: int, forks: int) -> dict[str, Any]:
    """Fork one session of ``events`` events ``forks`` times; the timings in milliseconds."""
    steps = (events - 2) // 3  # a user message and an answer around them
    replies = [STEP % (i, i) for i in range(steps)] + [" Done.\nFinal Answer: ok"]
    store = resolve_store(url)
    agent = Agent(model=ScriptedModel(replies), tools=[calculator], store=store, max_steps=steps + 1, ask_user=False)
    made: list[str] = []
    try:
        session = (await agent.arun("count")).session
        made.append(session)
        stored = await store.events(session)
        inside = [e.seq for e in stored if isinstance(e, ObservationEvent)][-1]
        samples = []
        for i in range(forks):
            started = time.perf_counter()
            made.append(await agent.fork(session, before=None if i % 2 else inside))
            samples.append(time.perf_counter() - started)
        assert len(await store.events(made[-1])) == len(stored)
        ordered = sorted(samples)
        return {
            "events": len(stored),
            "forks": forks,
            "median_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        }
    finally:
        for done in made:
            await store.delete_session(done)
        await store.close()


@contextlib.contextmanager
def private_schema(url: str) -> Iterator[str]:
    """``url`` with a schema of its own (dropped at the end): the benchmark's tables and
    migrations leave the database as they found it."""
    import psycopg

    schema = f"bench_fork_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_pg = os.environ.get("REACTCHAT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:55432/reactchat_test")
    parser.add_argument("--postgres", default=default_pg)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder, private_schema(args.postgres) as postgres:
        stores = {"memory": "memory:", "sqlite": f"sqlite:///{folder}/fork.db", "postgres": postgres}
        for name, url in stores.items():
            results[name] = await bench(url, args.events, args.forks)
            figure = results[name]
            print(
                f"{name:9} fork of {figure['events']} events: median {figure['median_ms']:.2f} ms, "
                f"p99 {figure['p99_ms']:.2f} ms ({args.forks} forks)"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    slow = [name for name in ("sqlite", "postgres") if results[name]["median_ms"] > TARGET_MS]
    if slow:
        print(f"over the {TARGET_MS:.0f} ms target: {', '.join(slow)}", file=sys.stderr)
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
