"""What OpenTelemetry tracing costs per agent step.

    .venv/bin/python benchmarks/tracing_overhead.py [--steps 50] [--repeat 15]

Runs the same turns (a zero-latency ScriptedModel, an inline tool, the memory store) in
three child processes, side by side:

* ``not installed``: ``opentelemetry`` cannot be imported (blocked), so every tracing
  hook is a no-op;
* ``no provider``: OpenTelemetry installed, no SDK configured (the API drops spans);
* ``exporter``: the SDK with a batch span processor and an exporter (which discards what
  it is given, so the network is not what is measured), plus an in-memory metric reader;
* ``baseline`` (with ``--baseline CHECKOUT``): the engine of another checkout, one without
  the tracing hooks, OpenTelemetry blocked as in ``not installed``.

Prints the median CPU time per step of each, their ratio to ``not installed``, and the
cost of the no-op hooks alone (timed in a loop) as a share of the ``not installed``
step: the target is that the hooks cost at most 10 % of the engine's own step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import asyncio, json, sys, time
MODE, STEPS, REPEAT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if MODE in ("not-installed", "baseline"):
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(name)
            return None
    sys.meta_path.insert(0, Block())
from reactchat import Agent, ScriptedModel, tool
if MODE == "exporter":
    from reactchat.engine import tracing
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def __init__(self):
            self.spans = 0
        def export(self, spans):
            self.spans += len(spans)
            return SpanExportResult.SUCCESS

    exporter = Discard()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing.configure(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))

@tool(timeout=None)
def lookup(key: str) -> str:
    "Return the value stored under key."
    return f"value-{key}"

def script():
    steps = [f' step {i}\nAction: lookup\nAction Input: {{"key": "k{i}"}}' for i in range(STEPS)]
    return [*steps, " done\nFinal Answer: finished"]

async def one():
    agent = Agent(model=ScriptedModel(script()), tools=[lookup], max_steps=STEPS + 1)
    cpu = time.process_time()
    result = await agent.arun("go")
    cpu = time.process_time() - cpu
    assert result.status == "done", result
    return cpu / (STEPS + 1)

async def main():
    await one()
    return [await one() for _ in range(REPEAT)]

samples = asyncio.run(main())
out = {"mode": MODE, "per_step": samples}
if MODE == "exporter":
    provider.force_flush()
    out["spans_exported"] = exporter.spans
if MODE == "not-installed":
    # the hooks alone, as the loop calls them per step: one chat span and one tool span
    from reactchat.engine import tracing
    from reactchat.messages import Reply, Request, Usage
    trace = tracing.start_turn("bench", "s", "scripted", ())
    request, reply, usage = Request(messages=[]), Reply(), Usage()
    n = 200_000
    started = time.process_time()
    for _ in range(n):
        with trace.chat(request) as span:
            span.finish(reply, usage)
        with trace.tool("lookup", "c", {}) as call:
            call.result("x")
    out["hooks_per_step"] = (time.process_time() - started) / n
print(json.dumps(out))
"""


def run(mode: str, steps: int, repeat: int, baseline: str | None) -> dict[str, object]:
    env = dict(os.environ)
    if mode == "baseline" and baseline:
        env["PYTHONPATH"] = os.path.join(baseline, "src")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(steps), str(repeat)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env=env,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3, help="alternate the three modes this many times")
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="also run a checkout without the tracing hooks (e.g. a git worktree of an older commit), "
        "OpenTelemetry blocked too",
    )
    args = parser.parse_args()
    modes = ["not-installed", "no-provider", "exporter"] + (["baseline"] if args.baseline else [])
    samples: dict[str, list[float]] = {m: [] for m in modes}
    extra: dict[str, object] = {}
    for _ in range(args.rounds):  # interleaved, so that a busy neighbour hits every mode alike
        for mode in modes:
            result = run(mode, args.steps, args.repeat, args.baseline)
            samples[mode].extend(result["per_step"])  # type: ignore[arg-type]
            extra.update({k: v for k, v in result.items() if k not in ("mode", "per_step")})
    base = statistics.median(samples["not-installed"])
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"{args.steps} tool steps per turn, {args.rounds}×{args.repeat} turns per mode, CPU time per step:")
    for mode in modes:
        median = statistics.median(samples[mode])
        print(f"  {mode:14} median {median * 1e6:7.1f} µs   × {median / base:.2f} of not installed")
    hooks = float(extra["hooks_per_step"])  # type: ignore[arg-type]
    print(
        f"  no-op hooks alone: {hooks * 1e6:.2f} µs per step = {hooks / base:.1%} of the engine's step (target ≤ 10 %)"
    )
    print(f"  spans exported in the last exporter run: {extra.get('spans_exported')}")


if __name__ == "__main__":
    main()
