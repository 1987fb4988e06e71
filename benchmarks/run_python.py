"""What the sandbox adds to starting Python: ``run_python("print(1)")`` against a plain
``python -c "print(1)"`` on the same interpreter, interleaved, the median of each.

    .venv/bin/python benchmarks/run_python.py [--runs 30]

Timed from the caller's side, from the start of the call to its result. Two sandboxed
figures: "cold" starts its sandbox in the call (bwrap, the pids cgroup when it is made,
the interpreter, the runner, the collection of /out); "started ahead" finds the sandbox
that the previous call started for it, as ``run_python`` does for a call without uploads
(the benchmark waits 0.3 s after such a call, so that the next one's start-up does not
overlap the next plain start). Prints the medians, the median of the differences taken
round by round (a plain start and a sandboxed one measured back to back share the
machine's load of that moment) and the load average: on a shared machine the paired
differences are the figures to read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

from reactchat.toolbox import SandboxLimits, run_sandboxed

#: limits no other call shares: the cold runs never find a sandbox waiting
COLD = SandboxLimits(wall_seconds=29.0)


async def measure(runs: int) -> tuple[list[float], list[float], list[float]]:
    """Wall seconds of each plain start, cold sandbox and sandbox started ahead, taken in turn."""
    plain, cold, ahead = [], [], []
    await run_sandboxed("print(1)")  # checks bwrap once, and starts the first sandbox ahead
    for _ in range(runs):
        await asyncio.sleep(0.3)
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "print(1)", stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, _ = await process.communicate()
        plain.append(time.perf_counter() - started)
        assert out == b"1\n"
        for times, options in ((cold, {"limits": COLD, "start_next": False}), (ahead, {})):
            started = time.perf_counter()
            run = await run_sandboxed("print(1)", **options)
            times.append(time.perf_counter() - started)
            assert run.stdout.text == "1\n", run
    return plain, cold, ahead


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    plain, cold, ahead = asyncio.run(measure(runs))
    base = statistics.median(plain) * 1000
    print(f"python -c 'print(1)'                  median {base:6.1f} ms  ({runs} runs each)")
    for label, times in (("cold         ", cold), ("started ahead", ahead)):
        paired = statistics.median(t - p for t, p in zip(times, plain, strict=True)) * 1000
        median = statistics.median(times) * 1000
        print(f"run_python('print(1)'), {label} median {median:6.1f} ms  {paired:+6.1f} ms (paired)")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
