"""run_python under hostile load: bombs are bounded, runs stay apart, nothing is left running."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reactchat.toolbox import SandboxLimits, _sandbox_run
from reactchat.toolbox import run_sandboxed as run_started


@pytest.fixture(autouse=True)
def no_sandbox_waiting() -> None:
    """End the sandboxes other tests' runs started ahead: the processes counted here are this test's."""
    _sandbox_run._end_waiting()


async def run_sandboxed(code: str, data: dict[str, bytes] | None = None, limits: SandboxLimits | None = None) -> Any:
    """A run that starts no sandbox for the next call: the processes counted here are its own."""
    return await run_started(code, data, limits, start_next=False)


pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/setup.sh)")

#: in the runner's command line (the code's processes are forks of it): how the host finds them
RUNNER_MARK = b"RLIMIT_NPROC"
SMALL = SandboxLimits(cpu_seconds=3, wall_seconds=6, processes=16, memory=512 << 20)


def sandbox_processes(mark: bytes | None = None) -> list[int]:
    """Pids of the sandboxes' processes on the host: bwrap (twice: it and its init) and the
    runner (and forks of it), whose command lines carry the runner's code."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                if RUNNER_MARK in cmdline and (mark is None or mark in cmdline.split(b"\0")):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def descendants(root: int) -> set[int]:
    """Pids of every live process below ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


class Peak:
    """The largest number of sandbox processes with ``mark`` in their arguments seen while
    it runs (sampled every 20 ms)."""

    def __init__(self, mark: bytes) -> None:
        self.mark = mark
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.most = max(self.most, len(sandbox_processes(self.mark)))

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def test_a_fork_bomb_is_bounded_and_another_run_still_answers() -> None:
    bomb = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"""
    # SMALL's memory limit is in the bomb's command lines, not in those of the run beside it
    with Peak(str(SMALL.memory).encode()) as peak:
        started = time.monotonic()
        task = asyncio.create_task(run_sandboxed(bomb, limits=SMALL))
        await asyncio.sleep(1)
        beside = time.monotonic()
        other = await run_sandboxed("print('still here')")
        answered = time.monotonic() - beside
        run = await task
    assert other.stdout.text == "still here\n" and answered < 2.0
    assert run.error is not None and "wall-time" in run.error
    assert time.monotonic() - started < SMALL.wall_seconds + 3
    # bwrap, its init, the runner and its forks: the processes limit counts them all
    assert 10 <= peak.most <= SMALL.processes + 2, peak.most
    assert sandbox_processes() == []


async def test_a_memory_bomb_is_a_memory_error() -> None:
    run = await run_sandboxed("chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))", limits=SMALL)
    assert run.error is not None and "MemoryError" in run.error
    run = await run_sandboxed("x = bytearray(64 << 30)", limits=SMALL)
    assert run.error is not None and "MemoryError" in run.error


async def test_an_infinite_loop_stops_at_the_cpu_limit() -> None:
    started = time.monotonic()
    run = await run_sandboxed("while True:\n    pass", limits=SandboxLimits(cpu_seconds=2, wall_seconds=20))
    assert run.error is not None and "CPU" in run.error
    assert time.monotonic() - started < 8
    assert sandbox_processes() == []


async def test_a_sleep_stops_at_the_wall_time_limit() -> None:
    started = time.monotonic()
    run = await run_sandboxed("import time\nprint('before', flush=True)\ntime.sleep(600)", limits=SMALL)
    assert run.stdout.text == "before\n"
    assert run.error is not None and "wall-time" in run.error
    assert time.monotonic() - started < SMALL.wall_seconds + 3


async def test_50_mb_of_output_is_cut_and_counted() -> None:
    run = await run_sandboxed("import sys\nfor _ in range(50):\n    sys.stdout.write('x' * 1_000_000)")
    assert run.error is None
    assert run.stdout.total == 50_000_000
    assert len(run.stdout.kept) == SandboxLimits().output
    assert run.stdout.cut == 50_000_000 - SandboxLimits().output


async def test_many_tiny_files_keep_only_the_first_few() -> None:
    # a million: about a minute on two busy cores; 200,000 shows the same bound
    code = "for i in range(200_000):\n    open(f'/out/{i}.txt', 'w').close()\nprint('made')"
    limits = SandboxLimits(cpu_seconds=60, wall_seconds=90)
    run = await run_sandboxed(code, limits=limits)
    assert run.error is None, run.error
    assert run.stdout.text == "made\n"
    assert len(run.files) == limits.out_files
    assert run.skipped == [f"{200_000 - limits.out_files} more files (over the limit of 20 files, 32 MB)"]


async def test_a_big_file_stops_at_the_file_size_limit() -> None:
    code = "open('/out/big.bin', 'wb').write(b'x' * (40 << 20))"
    run = await run_sandboxed(code, limits=SandboxLimits(file_size=8 << 20))
    assert run.error is not None and ("File too large" in run.error or "SIGXFSZ" in run.error), run.error
    assert "big.bin" not in run.files or len(run.files["big.bin"]) <= 8 << 20


async def test_ten_sandboxes_at_once_each_see_only_their_own() -> None:
    code = "import os\nopen('/out/me.txt', 'w').write('{n}')\nprint('{n}', sorted(os.listdir('/out')))"
    runs = await asyncio.gather(*(run_sandboxed(code.format(n=n), {f"in{n}.txt": b"x"}) for n in range(10)))
    for n, run in enumerate(runs):
        assert run.stdout.text == f"{n} ['me.txt']\n"
        assert run.files == {"me.txt": str(n).encode()}
    assert sandbox_processes() == []


def test_killing_the_process_that_started_a_sandbox_leaves_nothing_running() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import asyncio; from reactchat.toolbox import run_sandboxed; "
            "asyncio.run(run_sandboxed('import os, time\\nos.fork()\\ntime.sleep(600)'))",
        ],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")},
    )
    try:
        deadline = time.monotonic() + 20
        # bwrap, its init, the runner and its fork
        while time.monotonic() < deadline and len(sandbox_processes()) < 4:
            time.sleep(0.05)
        below = descendants(parent.pid)
        assert len(sandbox_processes()) == 4 and len(below) >= 4, "the sandbox did not start"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (sandbox_processes() or any(Path(f"/proc/{p}").exists() for p in below)):
        time.sleep(0.05)
    assert sandbox_processes() == []
    assert [p for p in below if Path(f"/proc/{p}").exists()] == []


def _system_python_like_this_one() -> bool:
    if not Path("/usr/bin/python3").exists():
        return False
    version = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"], capture_output=True)
    return version.stdout.decode().strip() == str(sys.version_info[:2])


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or not _system_python_like_this_one(),
    reason="needs root (to start a process as an ordinary user) and a system Python of this version",
)
def test_an_ordinary_user_is_bounded_by_the_process_limit_alone() -> None:
    # reactchat as uid 65534: no cgroup it could write, so RLIMIT_NPROC alone must hold
    # the bomb; the system Python, since this one's venv may sit in root's home
    site = next(p for p in sys.path if p.endswith("site-packages"))
    bomb = "import os, time\nn = 0\ntry:\n    while True:\n        os.fork() or time.sleep(5) or os._exit(0)\n"
    bomb += "        n += 1\nexcept OSError as exc:\n    print(n, exc.errno)"
    script = f"""
import asyncio
from reactchat.toolbox import SandboxLimits, _sandbox, run_sandboxed
assert _sandbox.PidsCgroup.base() is None
print(asyncio.run(run_sandboxed({bomb!r}, limits=SandboxLimits(processes=16))).stdout.text, end="")
"""
    source = Path(__file__).parents[1] / "src"
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{source}:{site}"},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    # 16 processes of the code: the runner and 15 forks (errno 11: EAGAIN)
    assert done.stdout.decode() == "15 11\n"
