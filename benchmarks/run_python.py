"""What the sandbox adds to starting Python: ``run_python("print(1)")`` against a plain
``python -c "print(1)"`` on the same interpreter, interleaved, the median of each.

    .venv/bin/python benchmarks/run_python.py [--runs 30]

Both are timed from the caller's side, from the start of the call to its result (the
sandboxed one includes bwrap, the pids cgroup when it is made, the runner and the
collection of /out). Prints the two medians, their difference and the load average:
on a shared machine the difference is the figure to read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

from reactchat.toolbox import run_sandboxed


async def measure(runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds of each plain start and each sandboxed one, taken in turn."""
    plain, sandboxed = [], []
    await run_sandboxed("print(1)")  # the first call checks bwrap once
    for _ in range(runs):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "print(1)", stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, _ = await process.communicate()
        plain.append(time.perf_counter() - started)
        assert out == b"1\n"
        started = time.perf_counter()
        run = await run_sandboxed("print(1)")
        sandboxed.append(time.perf_counter() - started)
        assert run.stdout.text == "1\n", run
    return plain, sandboxed


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    plain, sandboxed = asyncio.run(measure(runs))
    a, b = statistics.median(plain) * 1000, statistics.median(sandboxed) * 1000
    print(f"python -c 'print(1)'        median {a:6.1f} ms  ({runs} runs)")
    print(f"run_python('print(1)')      median {b:6.1f} ms")
    print(f"sandbox overhead            {b - a:+6.1f} ms  (target <= 60 ms)")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
