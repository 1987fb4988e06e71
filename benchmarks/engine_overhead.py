"""Engine overhead per step with a zero-latency ScriptedModel and a trivial tool.

    .venv/bin/python benchmarks/engine_overhead.py [--repeat 15]

Prints the median and p90 cost of one agent step (model call + parse + tool + events)
at N = 10, 50 and 200 steps per turn, the ratio of the 200-step cost to the 10-step
cost, and the cold import time of ``reactchat``. Targets: ≤ 100 µs median
per step, ratio ≤ 1.5, import ≤ 150 ms.

The cost is the process's CPU time (``time.process_time``, all threads): on a shared
machine, wall time mostly measures the neighbours. Wall time is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time

from reactchat import Agent, ScriptedModel, tool


@tool(timeout=None)
def lookup(key: str) -> str:
    """Return the value stored under key."""
    return f"value-{key}"


@tool
def lookup_threaded(key: str) -> str:
    """Return the value stored under key (runs on a worker thread, with a timeout)."""
    return f"value-{key}"


def script(steps: int, name: str) -> list[str]:
    replies = [f' step {i}\nAction: {name}\nAction Input: {{"key": "k{i}"}}' for i in range(steps)]
    return [*replies, " done\nFinal Answer: finished"]


async def one_turn(steps: int, store: str, threaded: bool) -> tuple[float, float]:
    """CPU and wall seconds per step for one turn of ``steps`` tool steps."""
    target = lookup_threaded if threaded else lookup
    agent = Agent(model=ScriptedModel(script(steps, target.name)), tools=[target], max_steps=steps + 1, store=store)
    cpu, wall = time.process_time(), time.perf_counter()
    result = await agent.arun("go")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.status == "done" and len(result.steps) == steps + 1, result
    return cpu / (steps + 1), wall / (steps + 1)


def measure(steps: int, repeat: int, store: str = "memory:", threaded: bool = False) -> list[tuple[float, float]]:
    async def run_all() -> list[tuple[float, float]]:
        await one_turn(steps, store, threaded)  # warm-up
        return [await one_turn(steps, store, threaded) for _ in range(repeat)]

    return asyncio.run(run_all())


def import_time(code: str, runs: int = 9) -> float:
    """Median wall time of ``python -c CODE`` minus a bare interpreter start."""

    def wall(code: str) -> float:
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    return wall(code) - wall("pass")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {}
    for label, threaded in (("inline tool", False), ("threaded tool", True)):
        for steps in (10, 50, 200):
            samples = measure(steps, args.repeat if steps < 200 else max(5, args.repeat // 2), threaded=threaded)
            cpu = [c for c, _ in samples]
            wall = statistics.median(w for _, w in samples)
            rows[(label, steps)] = (statistics.median(cpu), statistics.quantiles(cpu, n=10)[-1])
            median, p90 = rows[(label, steps)]
            print(
                f"{label:14} N={steps:<4} per step: median {median * 1e6:7.1f} µs   p90 {p90 * 1e6:7.1f} µs"
                f"   (wall median {wall * 1e6:7.1f} µs)"
            )
        ratio = rows[(label, 200)][0] / rows[(label, 10)][0]
        print(f"{label:14} cost per step at N=200 / N=10: {ratio:.2f}")
    bare = import_time("import reactchat")
    full = import_time("import reactchat; reactchat.Agent")
    print(f"python -c 'import reactchat': {bare * 1000:.1f} ms above a bare interpreter")
    print(f"python -c 'import reactchat; reactchat.Agent' (loads pydantic and the engine): {full * 1000:.1f} ms")
    if args.json:
        print(json.dumps({f"{k[0]}:{k[1]}": v for k, v in rows.items()} | {"import_s": bare, "agent_import_s": full}))


if __name__ == "__main__":
    main()
