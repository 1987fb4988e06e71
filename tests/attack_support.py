"""A real server process under attack, watched while the attack runs.

``serve`` starts uvicorn in a subprocess with the rule model of ``server_support``
over a SQLite file; ``Watch`` samples the resident memory of the server and of every
process it started (the parser processes), and keeps timing an innocent session's
requests, so a test can assert that the attack neither bloats nor blocks the server.
``benchmarks/attacks.py`` uses the same pieces to print the numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from server_support import free_port, make_app

TESTS = Path(__file__).resolve().parent


def app() -> Any:
    """For ``uvicorn --factory``: the rule model over ``REACTCHAT_DB``, options from ``REACTCHAT_TEST_OPTIONS``."""
    options = json.loads(os.environ.get("REACTCHAT_TEST_OPTIONS", "{}"))
    if "file_limits" in options:
        from reactchat.knowledge import Limits

        options["file_limits"] = Limits(**options["file_limits"])
    return make_app(os.environ["REACTCHAT_DB"], **options)


@dataclass
class Served:
    """A running server: its URL and process id."""

    url: str
    pid: int


@contextmanager
def serve(tmp_path: Path, **options: Any) -> Iterator[Served]:
    """uvicorn with the rule model on a free loopback port; ``options`` go to ``ServerConfig``."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "REACTCHAT_TOKEN"}
    env["REACTCHAT_DB"] = f"sqlite:///{tmp_path / 'attack.db'}"
    env["REACTCHAT_TEST_OPTIONS"] = json.dumps(options)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "uvicorn", "--factory", "attack_support:app", "--port", str(port)]
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen([*command, "--log-level", "warning"], env=env, cwd=TESTS, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, (tmp_path / "server.log").read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        yield Served(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _rss(pid: int) -> int:
    """Resident bytes of ``pid`` (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as children:
                    kids = [int(k) for k in children.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


@dataclass
class Watch:
    """Samples the server's memory, its children's (all together, and the largest one) and an
    innocent session's latency."""

    served: Served
    interval: float = 0.05
    probe_every: float = 0.25
    peak_server: int = 0
    peak_children: int = 0
    peak_child: int = 0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def peak_total(self) -> int:
        """The largest resident size seen, server and parsers together (an upper bound: peaks add)."""
        return self.peak_server + self.peak_children

    def __enter__(self) -> Watch:
        self.client = httpx.Client(base_url=self.served.url, timeout=10)
        self.session = self.client.post("/v1/sessions").json()["session"]
        self._threads = [threading.Thread(target=self._sample), threading.Thread(target=self._probe)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.client.close()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak_server = max(self.peak_server, _rss(self.served.pid))
            children = [_rss(child) for child in _descendants(self.served.pid)]
            self.peak_children = max(self.peak_children, sum(children))
            self.peak_child = max([self.peak_child, *children])
            self._stop.wait(self.interval)

    def _probe(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            try:
                response = self.client.post(
                    f"/v1/sessions/{self.session}/messages", json={"message": "hi", "stream": False}, timeout=5
                )
                if response.status_code != 200 or response.json().get("answer") != "echo: hi":
                    self.failures.append(f"{response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as exc:
                self.failures.append(f"{type(exc).__name__}: {exc}")
            self.latencies.append(time.perf_counter() - start)
            self._stop.wait(self.probe_every)

    def assert_responsive(self, within: float = 1.0) -> None:
        """The innocent session answered every probe, each within ``within`` seconds."""
        assert not self.failures, self.failures[:3]
        assert self.latencies, "no probe ran"
        assert max(self.latencies) < within, f"slowest answer to another session: {max(self.latencies):.2f} s"
