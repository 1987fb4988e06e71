"""What durability costs: per-step store overhead and the time to resume a waiting session.

    .venv/bin/python benchmarks/store.py [--postgres URL] [--turns 30] [--steps 20] [--json out.json]

* **append**: one ``store.append`` (a committed event), median and p99.
* **per step**: a turn of ``--steps`` calculator steps with a zero-latency scripted
  model; wall time per step on each store, its difference from the in-memory store, and
  the time spent inside store calls per step (a step writes three events: thought,
  action, observation). On a loaded machine the wall-time difference is noisy; the
  time in the store is the direct measure.
* **pg-async**: PostgreSQL with ``synchronous_commit=off`` (set through the URL), to show
  what the WAL flush at every commit costs.
* **resume**: a session waits on an ask_user question after ``--steps`` steps; the time
  from ``agent.arun(answer, session)`` to the model's first request, i.e. lock, read and
  replay of the events and the answer made durable, excluding the model call. ``warm``
  reuses the store's connection; ``cold`` is a new agent and store, as in a fresh worker.

PostgreSQL defaults to ``$REACTCHAT_TEST_POSTGRES`` or scripts/start-postgres.sh's URL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reactchat import Agent, ScriptedModel, calculator
from reactchat.messages import Reply, Request, UserEvent
from reactchat.store import Store, resolve_store

STEP = ' Step.\nAction: calculator\nAction Input: {"expression": "%d * 1.15"}'
ASK = ' I must ask.\nAction: ask_user\nAction Input: {"question": "Where are you?"}'
FINAL = " Done.\nFinal Answer: ok"


def quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


async def bench_append(store: Store, n: int) -> dict[str, float]:
    session = await store.create_session()
    samples = []
    for i in range(n):
        event = UserEvent(session=session, turn=1, step=i, text=f"message {i} " + "x" * 200)
        started = time.perf_counter()
        await store.append(event)
        samples.append(time.perf_counter() - started)
    return quantiles(samples)


class TimedStore:
    """A store wrapper that adds up the time spent in store calls."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.url = inner.url
        self.spent = 0.0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - started

        return timed


async def bench_steps(store: Store, turns: int, steps: int) -> dict[str, float]:
    """Per step of whole turns: the wall time (model and tool near zero here) and the time in the store."""
    wall, in_store = [], []
    timed = TimedStore(store)
    for _ in range(turns + 2):
        model = ScriptedModel([STEP % i for i in range(steps)] + [FINAL])
        agent = Agent(model=model, tools=[calculator], store=timed, max_steps=steps + 1, max_repeats=steps + 1)  # type: ignore[arg-type]
        timed.spent = 0.0
        started = time.perf_counter()
        result = await agent.arun("Compute.")
        elapsed = time.perf_counter() - started
        assert result.status == "done", result
        wall.append(elapsed / (steps + 1))
        in_store.append(timed.spent / (steps + 1))
    # the first turns warm caches and prepared statements
    return {**quantiles(wall[2:]), "store_median_ms": statistics.median(in_store[2:]) * 1000}


class Timed:
    """A model that notes when its first request arrives, then follows a script."""

    def __init__(self, replies: list[str]) -> None:
        self.inner = ScriptedModel(replies)
        self.first_request_at: float | None = None
        self.name = "timed"
        self.supports_tools = False
        self.context_tokens = None

    async def complete(self, request: Request) -> Reply:
        if self.first_request_at is None:
            self.first_request_at = time.perf_counter()
        return await self.inner.complete(request)


async def waiting_session(store: Store, steps: int) -> str:
    model = ScriptedModel([STEP % i for i in range(steps)] + [ASK])
    agent = Agent(model=model, tools=[calculator], store=store, max_steps=steps + 5, max_repeats=steps + 1)
    result = await agent.arun("Compute, then ask.")
    assert result.status == "waiting", result
    return result.session


async def bench_resume(url: str, store: Store, turns: int, steps: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("warm", "cold"):
        samples = []
        for _ in range(turns + 2):
            session = await waiting_session(store, steps)
            model = Timed([FINAL])
            target: Store = store if mode == "warm" else resolve_store(url)
            agent = Agent(model=model, tools=[calculator], store=target, max_steps=steps + 5)
            started = time.perf_counter()
            result = await agent.arun("Lyon", session)
            assert result.status == "done" and model.first_request_at is not None
            samples.append(model.first_request_at - started)
            if target is not store:
                await target.close()
        out[mode] = quantiles(samples[2:])
    return out


async def bench(url: str, turns: int, steps: int) -> dict[str, Any]:
    store = resolve_store(url)
    try:
        return {
            "append": await bench_append(store, turns * 20),
            "per_step": await bench_steps(store, turns, steps),
            "resume": await bench_resume(url, store, turns, steps) if url != "memory:" else None,
        }
    finally:
        await store.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--postgres",
        default=os.environ.get("REACTCHAT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:55432/reactchat_test"),
    )
    p.add_argument("--no-postgres", action="store_true")
    p.add_argument("--turns", type=int, default=30)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--json", type=Path, help="also write the numbers here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        urls = {"memory": "memory:", "sqlite": f"sqlite:///{tmp}/bench.db"}
        if not args.no_postgres:
            urls["postgres"] = args.postgres
            # what the fsync at each commit costs: the server may lose the last commits if *it*
            # crashes (like SQLite's synchronous=NORMAL on a power cut), never a killed client's
            sep = "&" if "?" in args.postgres else "?"
            urls["pg-async"] = f"{args.postgres}{sep}options=-csynchronous_commit%3Doff"
        results = {name: asyncio.run(bench(url, args.turns, args.steps)) for name, url in urls.items()}
    base = results["memory"]["per_step"]["median_ms"]
    load = os.getloadavg()[0]
    print(
        f"{args.turns} turns of {args.steps} steps + final answer; Python {sys.version.split()[0]}; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs (latencies stretch with load)"
    )
    print(
        f"{'store':10} {'append med':>11} {'append p99':>11} {'step med':>9} {'vs memory':>10} "
        f"{'in store':>9} {'resume warm':>12} {'resume cold':>12}"
    )
    for name, r in results.items():
        resume = r["resume"] or {}
        warm = f"{resume['warm']['median_ms']:.2f} ms" if resume else "-"
        cold = f"{resume['cold']['median_ms']:.2f} ms" if resume else "-"
        print(
            f"{name:10} {r['append']['median_ms']:8.3f} ms {r['append']['p99_ms']:8.3f} ms "
            f"{r['per_step']['median_ms']:6.3f} ms {r['per_step']['median_ms'] - base:+7.3f} ms "
            f"{r['per_step']['store_median_ms']:6.3f} ms {warm:>12} {cold:>12}"
        )
    if args.json:
        meta = {"turns": args.turns, "steps": args.steps, "load_average": load, "cpus": os.cpu_count()}
        args.json.write_text(json.dumps({**meta, "stores": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
