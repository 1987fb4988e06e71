"""The peers benchmark's reactchat and bare-loop workers still run the task correctly.

The peer frameworks live in their own venv (benchmarks/peers/.venv) and are not
installed here; the reactchat rows and the bare loop need nothing beyond reactchat.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).resolve().parents[1] / "benchmarks" / "peers" / "worker.py"


@pytest.mark.parametrize(
    "framework",
    ["reactchat-memory", "reactchat-sqlite", "reactchat-memory-inline", "reactchat-memory-native", "bare-loop"],
)
def test_worker_runs_n_steps_and_reports(framework: str) -> None:
    n, runs = 4, 3
    proc = subprocess.run(
        [sys.executable, str(WORKER), framework, str(n), str(runs)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["framework"] == framework
    assert (report["answer"], report["tool_calls"]) == ("done", n)  # the task was done, not only timed
    assert len(report["run_s"]) == runs
    assert len(report["step_s"]) == len(report["step_cpu_s"]) == runs * (n - 1)
    assert all(t > 0 for t in report["run_s"])
    assert report["rss_peak_kib"] >= report["rss_import_kib"] > 0
