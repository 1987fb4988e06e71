"""Peak RSS of a real server, and of the sandbox tree below it, while ``run_python`` bombs run.

    .venv/bin/python benchmarks/sandbox_rss.py [--wall 8]

Starts ``uvicorn --factory sandbox_rss:bench_app`` (SQLite store, an agent whose model
calls ``run_python`` with the message as its code, then answers with the observation's
first line) and sends one bomb per session: a fork bomb, a memory bomb, 50 MB of output,
a million tiny files in ``/out``. The server's peak RSS during each is the kernel's own
high-water mark (``VmHWM``, reset before each bomb through ``/proc/PID/clear_refs``, which
needs root or the server's user); while each runs, a thread samples every 20 ms the
processes below the server (bwrap, its init, the runner and what the code started): their
number and their summed PSS (shared pages counted once, not once per fork), and a probe
asks the server for another session (``GET /v1/sessions/{id}``) every 100 ms. Prints, per
bomb: the server's RSS before, at its peak and after; the sandbox tree's peak PSS and
process count; the slowest probe; how the run ended (the model's answer: the first two
lines of the observation). The sandboxes have the default limits but ``--wall`` seconds of
wall time (the fork bomb runs until then).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
FORK_BOMB = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)"
BOMBS = {
    "fork bomb": FORK_BOMB,
    "memory bomb": "chunks = []\nwhile True:\n    chunks.append(bytearray(50 << 20))",
    "50 MB of output": "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * (1 << 20))",
    "a million tiny files": "for n in range(1_000_000):\n    open(f'/out/{n}', 'w').close()",
}


class CodeModel:
    """Calls ``run_python`` with the user's message as the code, then answers with the first
    two lines of what it observed."""

    name = "code-runner"
    supports_tools = True
    context_tokens = None

    async def complete(self, request: Any) -> Any:
        """The call, or the answer once the observation is in."""
        from reactchat.messages import Reply, TextPart, ToolCallPart, ToolResultMessage, UserMessage

        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return Reply(parts=[TextPart(text=" / ".join(last.content.splitlines()[:2])[:200])])
        code = next(m.content for m in reversed(request.messages) if isinstance(m, UserMessage))
        return Reply(parts=[ToolCallPart(id="run", name="run_python", input={"code": code})], stop_reason="tool_use")


def bench_app() -> Any:
    """The server under test (``uvicorn --factory sandbox_rss:bench_app``)."""
    from reactchat import Agent
    from reactchat.server import ServerConfig, create_app
    from reactchat.toolbox import SandboxLimits, run_python_tool

    tool = run_python_tool(SandboxLimits(wall_seconds=float(os.environ["BENCH_WALL"])))
    config = ServerConfig(model="code-runner", store=os.environ["REACTCHAT_DB"])
    return create_app(
        lambda store: Agent(model=CodeModel(), tools=[tool], protocol="native", store=store), config=config
    )


def _kib(path: str, key: str) -> int:
    """A ``KEY: N kB`` figure of a file of ``/proc`` (0 once the process is gone)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _rss_kib(pid: int, key: str = "VmRSS:") -> int:
    return _kib(f"/proc/{pid}/status", key)


def _pss_kib(pid: int) -> int:
    return _kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/*/stat`` (the parent is its fourth field)."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _below(pid: int) -> list[int]:
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class Samples:
    """What the sampler saw while one bomb ran."""

    tree_kib: list[int] = field(default_factory=list)
    tree_processes: list[int] = field(default_factory=list)
    probes: list[float] = field(default_factory=list)


def _sample(server: int, samples: Samples, stop: threading.Event) -> None:
    while not stop.is_set():
        below = _below(server)
        samples.tree_kib.append(sum(_pss_kib(pid) for pid in below))
        samples.tree_processes.append(len(below))
        stop.wait(0.02)


def _probe(base: str, session: str, samples: Samples, stop: threading.Event) -> None:
    with httpx.Client(base_url=base, timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            client.get(f"/v1/sessions/{session}").raise_for_status()
            samples.probes.append(time.perf_counter() - started)
            stop.wait(0.1)


def _start(db: str, wall: float) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "REACTCHAT_DB": db, "BENCH_WALL": str(wall)}
    command = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(HERE), "sandbox_rss:bench_app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
    server = subprocess.Popen(command, env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{base}/v1/models", timeout=1)
            return server, base
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                raise SystemExit("the server did not start") from None
            time.sleep(0.1)


def _bomb(client: httpx.Client, server: int, base: str, probe_session: str, code: str) -> tuple[Samples, str, float]:
    session = client.post("/v1/sessions").json()["session"]
    samples, stop = Samples(), threading.Event()
    threads = [
        threading.Thread(target=_sample, args=(server, samples, stop)),
        threading.Thread(target=_probe, args=(base, probe_session, samples, stop)),
    ]
    for thread in threads:
        thread.start()
    Path(f"/proc/{server}/clear_refs").write_text("5")  # VmHWM from now on
    started = time.perf_counter()
    try:
        answer = client.post(f"/v1/sessions/{session}/messages", json={"message": code})
    finally:
        seconds = time.perf_counter() - started
        time.sleep(0.3)  # the sandbox's end, seen by the sampler
        stop.set()
        for thread in threads:
            thread.join()
    events = [line for line in answer.text.splitlines() if line.startswith("data:") and '"type":"answer"' in line]
    return samples, json.loads(events[-1][5:])["text"] if events else answer.text[:200], seconds


def main() -> None:
    """Start the server, run each bomb and print what the sampler saw."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wall", type=float, default=8.0, help="wall-time limit of each sandbox, in seconds")
    wall = parser.parse_args().wall
    with tempfile.TemporaryDirectory() as folder:
        server, base = _start(f"sqlite:///{folder}/rss.db", wall)
        try:
            with httpx.Client(base_url=base, timeout=wall + 120) as client:
                probe_session = client.post("/v1/sessions").json()["session"]
                _bomb(client, server.pid, base, probe_session, "print(1)")  # warm: imports, first sandbox
                for name, code in BOMBS.items():
                    before = _rss_kib(server.pid)
                    samples, answer, seconds = _bomb(client, server.pid, base, probe_session, code)
                    peak, after = _rss_kib(server.pid, "VmHWM:"), _rss_kib(server.pid)
                    slowest, median = max(samples.probes) * 1000, statistics.median(samples.probes) * 1000
                    tree = f"{max(samples.tree_kib) / 1024:.1f} MiB PSS in {max(samples.tree_processes)} processes"
                    print(f"{name} ({seconds:.1f} s): {answer}")
                    rss = (before / 1024, peak / 1024, after / 1024)
                    print("    server RSS {:.1f} MiB before, {:.1f} at its peak, {:.1f} after".format(*rss))
                    print(f"    sandbox tree at its peak {tree}")
                    print(f"    another session answered within {slowest:.0f} ms (median {median:.0f} ms)")
        finally:
            server.terminate()
            server.wait(30)
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
