"""Run one framework at one N in this process and print the measurements as JSON.

    python worker.py FRAMEWORK N RUNS

Called by ``run.py`` in a fresh subprocess per (framework, N), so the import time and
the peak RSS belong to that framework alone.
"""

from __future__ import annotations

import importlib
import itertools
import json
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# framework name -> (task module, variant)
FRAMEWORKS: dict[str, tuple[str, str]] = {
    "reactchat-memory": ("task_reactchat", "memory"),
    "reactchat-sqlite": ("task_reactchat", "sqlite"),
    "reactchat-memory-inline": ("task_reactchat", "memory-inline"),
    "reactchat-memory-native": ("task_reactchat", "memory-native"),
    "langgraph": ("task_langgraph", ""),
    "langgraph-checkpoint": ("task_langgraph", "checkpoint"),
    "langchain-create-agent": ("task_langgraph", "create_agent"),
    "langchain-agentexecutor": ("task_agentexecutor", ""),
    "smolagents": ("task_smolagents", ""),
    "pydantic-ai": ("task_pydanticai", ""),
    "bare-loop": ("task_bare", ""),
    # delegation.py: a parent agent handing N tasks to a sub-agent of one tool step each
    "reactchat-delegation-memory": ("task_delegation_reactchat", "memory"),
    "reactchat-delegation-memory-inline": ("task_delegation_reactchat", "memory-inline"),
    "reactchat-delegation-sqlite": ("task_delegation_reactchat", "sqlite"),
    "langgraph-agent-as-tool": ("task_delegation_langgraph", ""),
    "smolagents-managed-agents": ("task_delegation_smolagents", ""),
}


def rss_kib() -> int:
    """This process's resident-set high-water mark in KiB.

    Linux's ``VmHWM`` belongs to the process image: ``getrusage``'s ``ru_maxrss`` also
    survives ``fork`` + ``exec``, so it would start at the runner's own RSS and hide
    everything smaller.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS


def main() -> None:
    name, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    module_name, variant = FRAMEWORKS[name]
    warnings.simplefilter("ignore")
    rss_start = rss_kib()
    t0 = time.perf_counter()
    module = importlib.import_module(module_name)  # imports the framework
    import_s = time.perf_counter() - t0
    rss_import = rss_kib()

    marks: list[float] = []
    cpu_marks: list[float] = []

    def mark() -> None:
        marks.append(time.perf_counter())
        cpu_marks.append(time.process_time())

    t0 = time.perf_counter()
    run = module.build(n, mark, variant)
    build_s = time.perf_counter() - t0

    intervals: list[float] = []
    cpu_intervals: list[float] = []
    totals: list[float] = []
    cpu_totals: list[float] = []
    rss_one_run = 0
    for i in range(runs + 1):  # the first run warms caches and is not measured
        marks.clear()
        cpu_marks.clear()
        c0, t0 = time.process_time(), time.perf_counter()
        answer = run()
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
        if answer.strip() != "done" or len(marks) != n:
            raise SystemExit(f"{name}: wrong run: answer={answer!r}, tool calls={len(marks)} (expected {n})")
        if i == 0:
            rss_one_run = rss_kib()
        else:
            totals.append(total)
            cpu_totals.append(cpu)
            intervals.extend(b - a for a, b in itertools.pairwise(marks))
            cpu_intervals.extend(b - a for a, b in itertools.pairwise(cpu_marks))
    json.dump(
        {
            "framework": name,
            "n": n,
            "runs": runs,
            "import_s": import_s,
            "build_s": build_s,
            "rss_start_kib": rss_start,
            "rss_import_kib": rss_import,
            "rss_one_run_kib": rss_one_run,
            "rss_peak_kib": rss_kib(),
            "run_s": totals,
            "run_cpu_s": cpu_totals,
            "step_s": intervals,
            "step_cpu_s": cpu_intervals,
            "answer": answer.strip(),
            "tool_calls": len(marks),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
