"""The collector of a serving process: what start-up made is frozen, the youngest generation
is collected less often, and ``REACTCHAT_GC_THRESHOLD`` sets or turns off the tuning.

Each case runs in a process of its own: freezing the test process's objects would change
the collector for every test after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from reactchat.server._gc import SERVING_THRESHOLD

PROBE = """
import gc, json, sys
import uvicorn
from reactchat.server import app_from_env, serve
young, middle, oldest = gc.get_threshold()
if sys.argv[1] == "serve":
    from reactchat.server._serve import DrainingServer
    DrainingServer.run = lambda self, sockets=None: None  # everything reactchat serve does but listening
    serve(db="memory:")
else:
    app_from_env()
print(json.dumps({"before": young, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def collector_after_start(entry: str = "app_from_env", **env: str) -> dict[str, object]:
    """What ``entry`` (``app_from_env`` or ``serve``) leaves the collector of a fresh process at."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, entry],
        env={**os.environ, "REACTCHAT_DB": "memory:", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.mark.parametrize("entry", ["app_from_env", "serve"])
def test_a_serving_process_freezes_its_start_up_and_collects_less_often(entry: str) -> None:
    found = collector_after_start(entry)
    assert found["before"] == 700  # CPython's default, so the next assertion tells something
    assert found["threshold"] == [SERVING_THRESHOLD, 10, 10]
    assert isinstance(found["frozen"], int) and found["frozen"] > 10_000  # modules, classes, the app


def test_the_threshold_is_the_operators_choice() -> None:
    assert collector_after_start(REACTCHAT_GC_THRESHOLD="5000")["threshold"] == [5000, 10, 10]


def test_default_leaves_the_interpreters_collector_alone() -> None:
    found = collector_after_start(REACTCHAT_GC_THRESHOLD="default")
    assert found["threshold"] == [700, 10, 10]
    assert found["frozen"] == 0


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_threshold_is_refused_with_its_name(value: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "app_from_env"],
        env={**os.environ, "REACTCHAT_DB": "memory:", "REACTCHAT_GC_THRESHOLD": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "REACTCHAT_GC_THRESHOLD" in done.stderr and repr(value) in done.stderr
