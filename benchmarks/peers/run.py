"""Per-step overhead of reactchat against the frameworks users would pick instead.

    python benchmarks/peers/run.py                 # full run (about 10 minutes on 2 cores)
    python benchmarks/peers/run.py --rounds 1 --budget 200   # a quick look

Creates ``benchmarks/peers/.venv`` on first use (peers pinned in requirements.txt, plus
reactchat in editable mode) and re-runs itself inside it. Every (framework, N) job runs
in a fresh subprocess (``worker.py``); jobs are shuffled within each round and rounds
repeat, so drifting machine load spreads over all frameworks. Ratios against
reactchat-memory are taken round by round, then the median over rounds is reported.
Writes ``benchmarks/results/peers-<stamp>.json``, ``peers-latest.json``, ``peers.png``
and ``peers-latest.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VENV = HERE / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
RESULTS = REPO / "benchmarks" / "results"
BASELINE = "reactchat-memory"

FRAMEWORKS = [
    "reactchat-memory",
    "reactchat-sqlite",
    "reactchat-memory-inline",
    "reactchat-memory-native",
    "langgraph",
    "langgraph-checkpoint",
    "langchain-create-agent",
    "langchain-agentexecutor",
    "smolagents",
    "pydantic-ai",
    "bare-loop",
]
# package -> what its benchmark imports, timed in a fresh interpreter
IMPORTS = {
    "reactchat": "from reactchat import Agent, ScriptedModel, tool",
    "langgraph": "from langgraph.prebuilt import create_react_agent",
    "langchain-classic": "from langchain_classic.agents import AgentExecutor, create_react_agent",
    "smolagents": "from smolagents import ToolCallingAgent",
    "pydantic-ai": "from pydantic_ai import Agent",
    "pydantic (reference)": "import pydantic; pydantic.BaseModel",
}
DISTRIBUTIONS = [
    "reactchat",
    "pydantic",
    "langgraph",
    "langgraph-prebuilt",
    "langgraph-checkpoint",
    "langchain-core",
    "langchain",
    "langchain-classic",
    "smolagents",
    "pydantic-ai-slim",
]


def ensure_venv(script: Path | None = None) -> None:
    """Create the peers venv when missing, then re-execute ``script`` (default: this one) inside it."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not VENV_PYTHON.exists():
        print(f"creating {VENV} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV_PYTHON), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "-r", str(HERE / "requirements.txt")], check=True)
    link_reactchat()
    target = script or Path(__file__).resolve()
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(target), *sys.argv[1:]])


def link_reactchat() -> None:
    """Put this checkout's ``src`` on the venv's path: an editable install without a build
    step, so the benchmark always measures the working tree (pydantic comes from requirements.txt)."""
    purelib = subprocess.run(
        [str(VENV_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pth = Path(purelib) / "reactchat-src.pth"
    if not pth.exists():
        pth.write_text(str(REPO / "src") + "\n")


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation (statistics.quantiles needs two points)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    found = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    # reactchat runs from the working tree (see link_reactchat): name the commit too.
    with (REPO / "pyproject.toml").open("rb") as f:
        version = tomllib.load(f)["project"]["version"]
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    found["reactchat"] = f"{version} ({commit or 'working tree'})"
    return found


def cold_imports(repeats: int) -> dict[str, dict[str, float]]:
    """Median wall-clock seconds of each import statement in a fresh interpreter, interleaved."""
    code = "import time; t = time.perf_counter(); {0}; print(time.perf_counter() - t)"
    samples: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(repeats):
        for name, module in IMPORTS.items():
            out = subprocess.run(
                [sys.executable, "-c", code.format(module)], capture_output=True, text=True, check=True
            )
            samples[name].append(float(out.stdout))
    return {name: {"median_s": statistics.median(s), "min_s": min(s)} for name, s in samples.items()}


def run_job(framework: str, n: int, runs: int) -> dict[str, Any] | str:
    """The worker's measurements, or the tail of its error output when it failed."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "worker.py"), framework, str(n), str(runs)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout or f"exit status {proc.returncode}").strip().splitlines()
        return lines[-1][-500:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def summarize(jobs: list[dict[str, Any]], frameworks: list[str], ns: list[int]) -> dict[str, Any]:
    """Pool the samples of every round; ratios are per round, then the median over rounds."""
    table: dict[str, Any] = {}
    for fw in frameworks:
        if not any(j["framework"] == fw for j in jobs):
            continue
        table[fw] = {}
        for n in ns:
            mine = [j for j in jobs if j["framework"] == fw and j["n"] == n]
            if not mine:
                continue
            steps = [s for j in mine for s in j["step_s"]]
            steps_cpu = [s for j in mine for s in j["step_cpu_s"]]
            per_step = [t / (n + 1) for j in mine for t in j["run_s"]]
            cpu_per_step = [t / (n + 1) for j in mine for t in j["run_cpu_s"]]
            entry: dict[str, Any] = {
                "step_median_us": statistics.median(steps) * 1e6,
                "step_p90_us": quantile(steps, 0.9) * 1e6,
                "step_cpu_median_us": statistics.median(steps_cpu) * 1e6,
                "step_cpu_p90_us": quantile(steps_cpu, 0.9) * 1e6,
                "run_per_step_median_us": statistics.median(per_step) * 1e6,
                "run_per_step_p90_us": quantile(per_step, 0.9) * 1e6,
                "cpu_per_step_median_us": statistics.median(cpu_per_step) * 1e6,
                "cpu_per_step_p90_us": quantile(cpu_per_step, 0.9) * 1e6,
                "run_median_ms": statistics.median(t for j in mine for t in j["run_s"]) * 1e3,
                "rss_import_mib": statistics.median(j["rss_import_kib"] for j in mine) / 1024,
                "rss_one_run_mib": statistics.median(j["rss_one_run_kib"] for j in mine) / 1024,
                "rss_peak_mib": statistics.median(j["rss_peak_kib"] for j in mine) / 1024,
                "import_s": statistics.median(j["import_s"] for j in mine),
                "build_ms": statistics.median(j["build_s"] for j in mine) * 1e3,
                "samples": {"steps": len(steps), "runs": len(per_step), "rounds": len(mine)},
            }
            base = [j for j in jobs if j["framework"] == BASELINE and j["n"] == n]
            pairs = (
                ("step", "step_s"),
                ("step_cpu", "step_cpu_s"),
                ("run_per_step", "run_s"),
                ("cpu_per_step", "run_cpu_s"),
            )
            for key, metric in pairs:
                ratios = []
                for job in mine:
                    partner = [b for b in base if b["round"] == job["round"]]
                    if partner and partner[0][metric] and job[metric]:
                        ratios.append(statistics.median(job[metric]) / statistics.median(partner[0][metric]))
                if ratios:
                    entry[f"{key}_ratio_vs_{BASELINE}"] = statistics.median(ratios)
            table[fw][str(n)] = entry
    return table


def fmt_us(us: float) -> str:
    return f"{us:,.1f}" if us < 100 else f"{us:,.0f}"


def fmt_ratio(entry: dict[str, Any], key: str) -> str:
    value = entry.get(f"{key}_ratio_vs_{BASELINE}")
    if value is None:
        return "–"
    return f"{value:.2f}×" if value < 10 else f"{value:.0f}×"


METRICS = {
    "cpu_per_step": (
        "CPU per step, whole run",
        "process CPU time, all threads, of one agent run divided by its N+1 model calls; "
        "median and p90 over runs. Other load on the machine barely moves it",
    ),
    "run_per_step": (
        "Wall time per step, whole run",
        "wall time of one agent run divided by its N+1 model calls; median and p90 over runs",
    ),
    "step": (
        "Wall time of one loop iteration",
        "between two consecutive tool calls: model call, parsing, tool, state update, "
        "persistence; median and p90 over all steps",
    ),
    "step_cpu": (
        "CPU time of one loop iteration",
        "process CPU time between two consecutive tool calls; median and p90 over all steps",
    ),
}


def metric_table(table: dict[str, Any], ns: list[int], key: str) -> list[str]:
    title, how = METRICS[key]
    lines = [
        f"**{title}** ({how}; ratio = framework ÷ {BASELINE}, paired round by round, median over rounds):",
        "",
        "| framework | " + " | ".join(f"N={n} median µs | p90 | ratio" for n in ns) + " |",
        "|---|" + "---:|---:|---:|" * len(ns),
    ]
    for fw, rows in table.items():
        cells = []
        for n in ns:
            e = rows.get(str(n))
            if e is None:
                cells += ["–", "–", "–"]
                continue
            cells += [fmt_us(e[f"{key}_median_us"]), fmt_us(e[f"{key}_p90_us"]), fmt_ratio(e, key)]
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def compact_table(table: dict[str, Any], ns: list[int], key: str) -> list[str]:
    """The README form: ``median (p90)`` and the paired ratio per N, reactchat rows in bold."""
    lines = [
        "| framework | " + " | ".join(f"N={n} | ratio" for n in ns) + " |",
        "|---|" + "---:|---:|" * len(ns),
    ]
    for fw, rows in table.items():
        bold = "**" if fw in (BASELINE, "reactchat-sqlite") else ""
        cells = [f"{bold}{fw}{bold}"]
        for n in ns:
            e = rows.get(str(n))
            if e is None:
                cells += ["–", "–"]
                continue
            median = fmt_us(e[f"{key}_median_us"])
            cells += [f"{bold}{median}{bold} ({fmt_us(e[f'{key}_p90_us'])})", fmt_ratio(e, key)]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def markdown(report: dict[str, Any]) -> str:
    ns = report["args"]["n"]
    table = report["results"]
    lines = [
        f"Measured {report['date']} on {report['machine']['cpu']}, {report['machine']['cores']} cores, "
        f"{report['machine']['os']}, Python {report['machine']['python']}.",
        f"Command: `{report['command']}`",
        "",
        "README form, CPU per step over the whole run, median (p90) µs and the paired ratio:",
        "",
        *compact_table(table, ns, "cpu_per_step"),
        "README form, CPU time of one loop iteration, median (p90) µs and the paired ratio:",
        "",
        *compact_table(table, ns, "step_cpu"),
    ]
    for key in METRICS:
        lines += metric_table(table, ns, key)
    big = str(max(ns))
    lines += [
        f"**Memory and start-up** (resident-set high-water mark, Linux VmHWM, of the worker process "
        f"after importing, after one run at N={big}, and after all its runs; a bare interpreter is "
        "about 9 MiB; import = first import in that worker; build = constructing the agent):",
        "",
        f"| framework | RSS after import MiB | after one N={big} run | after all runs | import s | build ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for fw, rows in table.items():
        e = rows.get(big)
        if e is None:
            continue
        lines.append(
            f"| {fw} | {e['rss_import_mib']:.0f} | {e['rss_one_run_mib']:.0f} | {e['rss_peak_mib']:.0f} "
            f"| {e['import_s']:.3f} | {e['build_ms']:.2f} |"
        )
    lines += ["", "**Cold import** (fresh interpreter, wall clock of the statement, median):", ""]
    lines += ["| package | statement | median s |", "|---|---|---:|"]
    for name, entry in report["cold_import"].items():
        lines.append(f"| {name} | `{IMPORTS[name]}` | {entry['median_s']:.3f} |")
    for fw, error in report.get("failures", {}).items():
        lines.append(f"\n**{fw} failed**: `{error}`")
    lines += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()) + "."]
    return "\n".join(lines) + "\n"


COLORS = {
    "reactchat-memory": "#1f4e9c",
    "reactchat-sqlite": "#4a90d9",
    "reactchat-memory-inline": "#7fb8f0",
    "reactchat-memory-native": "#17becf",
    "langgraph": "#d62728",
    "langgraph-checkpoint": "#ff9896",
    "langchain-create-agent": "#8c564b",
    "langchain-agentexecutor": "#e377c2",
    "smolagents": "#ff7f0e",
    "pydantic-ai": "#2ca02c",
    "bare-loop": "#7f7f7f",
}


def chart(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = report["args"]["n"]
    fig, grid = plt.subplots(2, 2, figsize=(13, 10), sharey=True)
    axes = list(grid.flat)
    for ax, (key, (title, _)) in zip(axes, METRICS.items(), strict=True):
        for fw, rows in report["results"].items():
            xs = [n for n in ns if str(n) in rows]
            ys = [rows[str(n)][f"{key}_median_us"] for n in xs]
            ours = fw.startswith("reactchat")
            style = "-o" if ours else "--s" if fw == "bare-loop" else "-^"
            ax.plot(xs, ys, style, label=fw, color=COLORS.get(fw), linewidth=2.4 if ours else 1.3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.set_xlabel("N tool steps per run")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    for ax in grid[:, 0]:
        ax.set_ylabel("median µs per step (log)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=9, frameon=False)
    fig.suptitle(f"Agent framework overhead with a zero-latency scripted model — {report['date']}")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="repetitions of every (framework, N) job")
    parser.add_argument("--n", type=int, nargs="+", default=[10, 50, 200], help="tool steps per run")
    parser.add_argument("--frameworks", nargs="+", default=FRAMEWORKS, choices=FRAMEWORKS)
    parser.add_argument("--budget", type=int, default=1000, help="measured steps per job (runs = budget/N, >= 3)")
    parser.add_argument("--import-repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--render", type=Path, metavar="JSON", help="re-render the tables and chart of a results file")
    args = parser.parse_args()
    ensure_venv()
    if args.render:
        report = json.loads(args.render.read_text())
        args.out.mkdir(parents=True, exist_ok=True)
        md = markdown(report)
        (args.out / "peers-latest.md").write_text(md)
        chart(report, args.out / "peers.png")
        print(md)
        return

    frameworks = list(args.frameworks)  # ratios need BASELINE among them
    started = time.time()
    report: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "versions": versions(),
        "command": "python benchmarks/peers/run.py " + " ".join(sys.argv[1:]),
        "args": {"rounds": args.rounds, "n": args.n, "budget": args.budget, "seed": args.seed},
    }
    print(f"cold imports x{args.import_repeats} ...", file=sys.stderr)
    report["cold_import"] = cold_imports(args.import_repeats)

    jobs: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    for round_ in range(args.rounds):
        order = [(fw, n) for fw in frameworks for n in args.n]
        random.Random(args.seed + round_).shuffle(order)
        for fw, n in order:
            if fw in failures:
                continue
            runs = max(3, args.budget // n)
            job = run_job(fw, n, runs)
            if isinstance(job, str):
                print(f"{fw} N={n} FAILED: {job}", file=sys.stderr)
                failures[fw] = job
                continue
            job["round"] = round_
            jobs.append(job)
            print(
                f"round {round_ + 1}/{args.rounds} {fw:24} N={n:<4} "
                f"{statistics.median(job['run_s']) / (n + 1) * 1e6:9.1f} µs/step",
                file=sys.stderr,
            )
    report["results"] = summarize([j for j in jobs if j["framework"] not in failures], frameworks, args.n)
    report["failures"] = failures
    report["elapsed_s"] = round(time.time() - started, 1)

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = json.dumps(report, indent=1)
    (args.out / f"peers-{stamp}.json").write_text(text)
    (args.out / "peers-latest.json").write_text(text)
    md = markdown(report)
    (args.out / "peers-latest.md").write_text(md)
    chart(report, args.out / "peers.png")
    print(md)
    print(f"wrote {args.out}/peers-{stamp}.json, peers-latest.md, peers.png", file=sys.stderr)


if __name__ == "__main__":
    main()
