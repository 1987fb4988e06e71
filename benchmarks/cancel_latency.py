"""Time to cancel: from ``POST /v1/sessions/{id}/cancel`` to the provider seeing its
connection closed, when the cancel reaches the worker running the turn and when it
reaches another worker.

    .venv/bin/python benchmarks/cancel_latency.py [--runs 50] [--stores sqlite postgres]
                                                  [--postgres URL]

For each store (a fresh SQLite file; a fresh schema of the PostgreSQL database), two
``reactchat`` worker processes (uvicorn on loopback) serve an agent on an
OpenAI-compatible provider that streams a reply slowly and notes when its client hangs
up (``tests/fixtures/slow_stream.py``). Each run: a client posts a message to worker A
and follows the SSE stream; once the provider streams, a second client posts the cancel
to worker A (``same worker``) or to worker B (``other worker``: B asks the store, A sees
the request and stops the turn), the two alternating; the time runs until the provider
sees the connection closed. Prints p50/p99 of that and of the cancel request's own round
trip (which returns once the turn is recorded as cancelled), with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.slow_stream import SlowStream  # noqa: E402
from server_support import start_worker, stop_workers  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:55432/reactchat_test"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def store(kind: str, folder: str, postgres: str) -> Iterator[str]:
    """A fresh store URL: a new SQLite file, or a new schema (dropped afterwards)."""
    if kind == "sqlite":
        yield f"sqlite:///{folder}/bench.db"
        return
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        separator = "&" if "?" in postgres else "?"
        yield f"{postgres}{separator}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def cancel_once(provider: SlowStream, runner: httpx.Client, canceller: httpx.Client) -> tuple[float, float]:
    """One turn on ``runner`` cancelled through ``canceller``: (to connection closed, round trip)."""
    provider._first.clear()
    session = runner.post("/v1/sessions").json()["session"]

    def follow() -> None:
        with runner.stream("POST", f"/v1/sessions/{session}/messages", json={"message": "roses?"}) as reply:
            reply.read()

    reader = threading.Thread(target=follow)
    reader.start()
    assert provider.wait_streaming(), "the provider never streamed"
    count = len(provider.closed)
    started = time.monotonic()
    response = canceller.post(f"/v1/sessions/{session}/cancel")
    round_trip = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert provider.wait_closed(count + 1, 10), "the provider connection stayed open"
    reader.join(10)
    return provider.closed[-1] - started, round_trip


@contextmanager
def two_workers(url: str, folder: str, provider: SlowStream) -> Iterator[tuple[str, str]]:
    """Two worker processes serving the slow provider's agent over ``url``."""
    started = []
    try:
        for name in "ab":
            log = Path(folder) / f"worker-{uuid.uuid4().hex[:6]}-{name}.log"
            started.append(start_worker(url, log, "server_support:slow_app_from_env", REACTCHAT_SLOW_URL=provider.url))
        yield started[0][1], started[1][1]
    finally:
        stop_workers(started)


def measure(a: str, b: str, provider: SlowStream, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    """``runs`` cancels sent to the worker running the turn and ``runs`` sent to the other, alternating."""
    results: dict[str, tuple[list[float], list[float]]] = {"same worker": ([], []), "other worker": ([], [])}
    with (
        httpx.Client(base_url=a, timeout=60) as runner,
        httpx.Client(base_url=a, timeout=30) as near,
        httpx.Client(base_url=b, timeout=30) as far,
    ):
        for run in range(runs * 2):
            route = "same worker" if run % 2 == 0 else "other worker"
            closed, trip = cancel_once(provider, runner, near if route == "same worker" else far)
            results[route][0].append(closed)
            results[route][1].append(trip)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50, help="cancels per store and route")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--postgres", default=os.environ.get("REACTCHAT_TEST_POSTGRES", DEFAULT_POSTGRES))
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {args.runs} cancels per row, provider chunk every 50 ms")
    print(
        "| store | cancel sent to | to connection closed p50 / p99 (mean) ms | round trip p50 / p99 ms | load after |"
    )
    print("|---|---|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder, SlowStream(interval=0.05) as provider:
        for kind in args.stores:
            with store(kind, folder, args.postgres) as url, two_workers(url, folder, provider) as (a, b):
                results = measure(a, b, provider, args.runs)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            for route, (closed_after, round_trip) in results.items():
                closed = (
                    f"{ms(closed_after, 0.5)} / {ms(closed_after, 0.99)} ({statistics.mean(closed_after) * 1e3:.1f})"
                )
                print(f"| {kind} | {route} | {closed} | {ms(round_trip, 0.5)} / {ms(round_trip, 0.99)} | {load} |")


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1e3:.1f}"


if __name__ == "__main__":
    main()
