"""Time to cancel: from ``POST /v1/sessions/{id}/cancel`` to the provider seeing its
connection closed.

    .venv/bin/python benchmarks/cancel_latency.py [--runs 50]

A real ``reactchat`` server (uvicorn on loopback, SQLite store) runs an agent on an
OpenAI-compatible provider that streams a reply slowly and notes when its client hangs
up (``tests/fixtures/slow_stream.py``). Each run: a client posts a message and follows
the SSE stream; once the provider streams, a second client posts the cancel; the time
runs until the provider sees the connection closed. Prints p50/p99 of that, of the
cancel request's own round trip (which returns once the turn is recorded as cancelled),
and the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.slow_stream import SlowStream  # noqa: E402
from reactchat import Agent  # noqa: E402
from reactchat.models.openai import OpenAIModel  # noqa: E402
from reactchat.server import ServerConfig, create_app  # noqa: E402
from server_support import running  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    closed_after: list[float] = []
    round_trip: list[float] = []
    with tempfile.TemporaryDirectory() as folder, SlowStream(interval=0.05) as provider:

        def agent(store: object) -> Agent:
            model = OpenAIModel("slow-model", api_key="x", base_url=f"{provider.url}/v1", retries=0)
            return Agent(model=model, store=store)  # type: ignore[arg-type]

        app = create_app(agent, config=ServerConfig(store=f"sqlite:///{folder}/bench.db"))
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as first, httpx.Client(base_url=url) as second:
            for _ in range(args.runs):
                provider._first.clear()
                session = first.post("/v1/sessions").json()["session"]

                def follow(session: str = session) -> None:
                    with first.stream("POST", f"/v1/sessions/{session}/messages", json={"message": "roses?"}) as r:
                        r.read()

                reader = threading.Thread(target=follow)
                reader.start()
                assert provider.wait_streaming(), "the provider never streamed"
                count = len(provider.closed)
                started = time.monotonic()
                response = second.post(f"/v1/sessions/{session}/cancel")
                round_trip.append(time.monotonic() - started)
                assert response.status_code == 200, response.text
                assert provider.wait_closed(count + 1, 10), "the provider connection stayed open"
                closed_after.append(provider.closed[-1] - started)
                reader.join(10)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average: {load}  ({time.strftime('%Y-%m-%d %H:%M')}), {args.runs} runs")
    for label, values in (
        ("cancel request → provider connection closed", closed_after),
        ("cancel round trip", round_trip),
    ):
        print(
            f"  {label:44} p50 {percentile(values, 0.5) * 1000:6.1f} ms   p99 {percentile(values, 0.99) * 1000:6.1f} ms"
            f"   (mean {statistics.mean(values) * 1000:.1f} ms)"
        )


if __name__ == "__main__":
    main()
