"""What the default ``@tool``'s hand-off to a worker thread costs, and how much of it is placement.

    .venv/bin/python benchmarks/handoff.py [--calls 20000] [--rounds 3]

A sync tool with a timeout runs on a ``ToolThreads`` worker while the event loop awaits it
(``reactchat.tools.threads``). Timed here: a call of a function that returns at once, start
to result, as ``Tool.run`` makes it (``start``, then ``settled`` awaited on the loop), wall
and CPU time per call, in two placements that alternate round by round:

* **as the kernel places them**: on a machine whose other core is idle the worker is
  woken there, and each call then wakes an idle core twice (the worker, then the caller);
* **both threads on one core** (``os.sched_setaffinity``, a benchmark only): the floor
  of the mechanism itself, a switch to the worker and back.

Printed per placement: wall and CPU time per call (user and system apart) and the
voluntary context switches per call. Their difference is what the placement costs: a
little on a busy machine, where the kernel keeps both threads on the caller's core, and
most of the hand-off on a quiet virtual machine, where waking an idle core is an
interprocessor interrupt.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import threading
import time

from reactchat.tools import ToolTimeout
from reactchat.tools.threads import ToolThreads


def returns() -> int:
    return 1


def expired() -> ToolTimeout:
    return ToolTimeout("the call did not return within 10 s")


async def one(pool: ToolThreads) -> None:
    """One hand-off, as ``Tool.run`` makes it."""
    await pool.start(returns).settled(10.0, expired)


async def per_call(pool: ToolThreads, calls: int) -> tuple[float, float, float, float]:
    """Per hand-off of ``returns`` (after a warm-up): wall µs, the process's user and system
    CPU µs, and its voluntary context switches."""
    for _ in range(500):
        await one(pool)
    wall, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(calls):
        await one(pool)
    wall, after = time.perf_counter() - wall, resource.getrusage(resource.RUSAGE_SELF)
    return (
        wall / calls * 1e6,
        (after.ru_utime - before.ru_utime) / calls * 1e6,
        (after.ru_stime - before.ru_stime) / calls * 1e6,
        (after.ru_nvcsw - before.ru_nvcsw) / calls,
    )


def pin(cpus: set[int]) -> None:
    """Every thread of this process on ``cpus``."""
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), cpus)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    home = os.sched_getaffinity(0)
    pool = ToolThreads()
    await one(pool)  # its thread exists before the masks are set
    print(f"{len(home)} CPUs, {threading.active_count()} threads; load average {os.getloadavg()[0]:.1f}")
    results: dict[str, list[tuple[float, float, float, float]]] = {"as placed": [], "one core": []}
    for _ in range(args.rounds):
        pin(home)
        results["as placed"].append(await per_call(pool, args.calls))
        pin({min(home)})
        results["one core"].append(await per_call(pool, args.calls))
    pin(home)
    for label, rows in results.items():
        wall, user, system, switches = (statistics.median(column) for column in zip(*rows, strict=True))
        cpus = ", ".join(f"{u + s:.1f}" for _, u, s, _ in rows)
        print(
            f"{label:10s} per call: wall {wall:5.1f} µs, CPU {user + system:5.1f} µs (user {user:4.1f}, "
            f"system {system:4.1f}), {switches:.2f} voluntary switches (rounds' CPU: {cpus} µs)"
        )
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
