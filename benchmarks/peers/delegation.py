"""Cost of one delegation: reactchat sub-agents against smolagents ``managed_agents`` and
LangGraph's agent-as-tool pattern, side by side in one run.

    python benchmarks/peers/delegation.py                  # 5 rounds, N = 1 and 10
    python benchmarks/peers/delegation.py --rounds 1       # a quick look

One delegation = a parent step that calls the sub-agent, the sub-agent's run (one tool
step, then its answer), and the answer back as the parent's observation; every model is
scripted with zero latency, so what is measured is the frameworks' own cost. A run makes
N delegations and one final parent step; the cost of one delegation is the run's time
divided by N. Every (framework, N) job runs in a fresh subprocess (``worker.py``), jobs
are shuffled within each round, and ratios to reactchat are taken round by round, then
the median over rounds. Uses the peers venv of ``run.py``. Writes
``benchmarks/results/delegation-latest.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import RESULTS, machine, run_job, versions  # noqa: E402

BASELINE = "reactchat-delegation-memory"
FRAMEWORKS = [
    BASELINE,
    "reactchat-delegation-memory-inline",
    "reactchat-delegation-sqlite",
    "langgraph-agent-as-tool",
    "smolagents-managed-agents",
]
METRICS = {"cpu": ("run_cpu_s", "CPU per delegation"), "wall": ("run_s", "wall time per delegation")}


def summarize(jobs: list[dict[str, Any]], ns: list[int]) -> dict[str, Any]:
    """Median µs per delegation (over every run of every round) and the paired ratio to reactchat."""
    table: dict[str, Any] = {}
    for fw in FRAMEWORKS:
        for n in ns:
            mine = [j for j in jobs if j["framework"] == fw and j["n"] == n]
            if not mine:
                continue
            entry: dict[str, Any] = {"rounds": len(mine), "runs": sum(len(j["run_s"]) for j in mine)}
            for key, (metric, _) in METRICS.items():
                entry[f"{key}_us"] = statistics.median(t / n for j in mine for t in j[metric]) * 1e6
                ratios = []
                for job in mine:
                    base = [b for b in jobs if (b["framework"], b["n"], b["round"]) == (BASELINE, n, job["round"])]
                    if base:
                        ratios.append(statistics.median(job[metric]) / statistics.median(base[0][metric]))
                if ratios:
                    entry[f"{key}_ratio"] = statistics.median(ratios)
            table.setdefault(fw, {})[str(n)] = entry
    return table


def markdown(report: dict[str, Any]) -> str:
    ns = report["args"]["n"]
    lines = [
        f"Measured {report['date']} on {report['machine']['cpu']}, {report['machine']['cores']} cores, "
        f"Python {report['machine']['python']}; load average before/after: {report['load_before']} / "
        f"{report['load_after']}.",
        f"Command: `{report['command']}`",
        "",
    ]
    for key, (_, title) in METRICS.items():
        lines += [
            f"**{title}** (median µs over all runs; ratio = framework ÷ {BASELINE}, paired by round, median):",
            "",
            "| framework | " + " | ".join(f"N={n} µs | ratio" for n in ns) + " |",
            "|---|" + "---:|---:|" * len(ns),
        ]
        for fw, rows in report["results"].items():
            cells = []
            for n in ns:
                e = rows.get(str(n))
                cells += ["–", "–"] if e is None else [f"{e[f'{key}_us']:,.0f}", f"{e.get(f'{key}_ratio', 0):.2f}×"]
            lines.append(f"| {fw} | " + " | ".join(cells) + " |")
        lines.append("")
    for fw, error in report.get("failures", {}).items():
        lines.append(f"**{fw} failed**: `{error}`\n")
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + ".")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, nargs="+", default=[1, 10], help="delegations per run")
    parser.add_argument("--budget", type=int, default=200, help="measured delegations per job (runs = budget/N)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    from run import ensure_venv

    ensure_venv(Path(__file__).resolve())
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions(),
        "command": "python benchmarks/peers/delegation.py " + " ".join(sys.argv[1:]),
        "args": {"rounds": args.rounds, "n": args.n, "budget": args.budget, "seed": args.seed},
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    jobs: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    started = time.time()
    for round_ in range(args.rounds):
        order = [(fw, n) for fw in FRAMEWORKS for n in args.n]
        random.Random(args.seed + round_).shuffle(order)
        for fw, n in order:
            if fw in failures:
                continue
            job = run_job(fw, n, max(3, args.budget // n))
            if isinstance(job, str):
                print(f"{fw} N={n} FAILED: {job}", file=sys.stderr)
                failures[fw] = job
                continue
            job["round"] = round_
            jobs.append(job)
            per = statistics.median(job["run_cpu_s"]) / n * 1e6
            print(f"round {round_ + 1}/{args.rounds} {fw:36} N={n:<3} {per:9.0f} µs CPU/delegation", file=sys.stderr)
    report["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report["results"] = summarize([j for j in jobs if j["framework"] not in failures], args.n)
    report["failures"] = failures
    report["elapsed_s"] = round(time.time() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "delegation-latest.json").write_text(json.dumps(report, indent=1))
    md = markdown(report)
    (args.out / "delegation-latest.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
