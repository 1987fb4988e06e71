"""The engine's per-step cost of several revisions, side by side in one run.

    .venv/bin/python benchmarks/engine_compare.py 5e474ea HEAD [--rounds 16] [--steps 50] [--threaded] [--store sqlite]

Each revision's ``src`` is taken with ``git archive`` into a temporary folder. A round
runs every revision once, in a shuffled order, each in a fresh process: one warm-up turn,
then 25 turns of ``--steps`` tool steps (``engine_overhead.one_turn``; memory store, or
with ``--store sqlite`` a new SQLite file per process; inline tool, or the default
``@tool`` with ``--threaded``); a process reports the lowest and the median CPU time per step. Printed per
revision: the lowest of the lows, the median of the lows and of the medians; and each
revision's cost relative to the first, as the median over rounds of the paired ratio of
lows (a ratio within one round is what a shared machine measures best). The load average
is printed with each round.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = """
import asyncio, json, statistics, sys, tempfile
sys.path.insert(0, {benchmarks!r})
import engine_overhead

folder = tempfile.TemporaryDirectory()
store = "memory:" if {store!r} == "memory" else f"sqlite:///{{folder.name}}/bench.db"

async def main():
    await engine_overhead.one_turn({steps}, store, {threaded})
    return [(await engine_overhead.one_turn({steps}, store, {threaded}))[0] for _ in range(25)]

cpu = asyncio.run(main())
print(json.dumps({{"low": min(cpu), "median": statistics.median(cpu)}}))
"""


def export(revision: str, into: Path) -> Path:
    """The ``src`` folder of ``revision``, unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "src"], capture_output=True, check=True)
    folder = into / revision.replace("/", "_").replace("~", "_")
    folder.mkdir()
    with tempfile.TemporaryFile() as raw:
        raw.write(archive.stdout)
        raw.seek(0)
        with tarfile.open(fileobj=raw) as tar:
            tar.extractall(folder, filter="data")
    return folder / "src"


def one(src: Path, steps: int, threaded: bool, store: str) -> dict[str, float]:
    code = WORKER.format(benchmarks=str(ROOT / "benchmarks"), steps=steps, threaded=threaded, store=store)
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revisions", nargs="+")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--threaded", action="store_true", help="the default @tool (a worker thread)")
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    args = parser.parse_args()
    lows: dict[str, dict[int, float]] = {r: {} for r in args.revisions}
    medians: dict[str, list[float]] = {r: [] for r in args.revisions}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {r: export(r, Path(tmp)) for r in args.revisions}
        for round_ in range(args.rounds):
            order = random.sample(args.revisions, len(args.revisions))
            for revision in order:
                found = one(trees[revision], args.steps, args.threaded, args.store)
                lows[revision][round_] = found["low"] * 1e6
                medians[revision].append(found["median"] * 1e6)
            print(f"round {round_ + 1}: load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    first = args.revisions[0]
    print(f"CPU µs per step, N={args.steps}, {args.store} store, {'threaded' if args.threaded else 'inline'} tool:")
    for revision in args.revisions:
        mine = lows[revision]
        ratio = statistics.median(mine[r] / lows[first][r] for r in mine)
        print(
            f"{revision:>12}  lowest {min(mine.values()):7.1f}   median of lows {statistics.median(mine.values()):7.1f}"
            f"   median of medians {statistics.median(medians[revision]):7.1f}   vs {first}: {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
