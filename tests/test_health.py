"""/healthz and /readyz of a real ``reactchat serve`` process, and a store that goes away."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from server_support import free_port

SRC = str(Path(__file__).resolve().parents[1] / "src")


@contextmanager
def serve_process(
    tmp_path: Path, *flags: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``reactchat serve`` of this checkout on a free loopback port, until it answers /healthz."""
    port = free_port()
    (tmp_path / "none").write_text("Final Answer: nothing to do", encoding="utf-8")  # for --model scripted:none
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": f"{SRC}:{tmp_path}", **(env or {})}
    command = [sys.executable, "-m", "reactchat.cli", "serve", "--port", str(port), *flags]
    log = tmp_path / f"serve-{port}.log"
    with log.open("w") as out:
        process = subprocess.Popen(command, env=environ, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"reactchat serve did not start: {log.read_text()}")
            time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


class Proxy:
    """A TCP relay on loopback to ``target`` that can be cut: a database host going away."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.links, self.open = target, list[socket.socket](), True
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.open:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.open:  # accepted as the relay was cut: a closed listener does not end a waiting accept
                client.close()
                return
            upstream = socket.create_connection(self.target)
            self.links += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        """Refuse new connections and drop the open ones."""
        self.open = False
        with contextlib.suppress(OSError):  # wakes the accept that waits (close alone does not)
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        for link in self.links:
            link.close()


def test_probes_answer_without_a_token_and_say_nothing_else(tmp_path: Path) -> None:
    token = {"REACTCHAT_TOKEN": "secret-token"}
    with serve_process(tmp_path, "--db", str(tmp_path / "s.db"), "--model", "scripted:none", env=token) as (url, _):
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}
        assert httpx.get(f"{url}/v1/sessions/x").status_code == 401  # everything else still needs the token


def test_readyz_fails_when_the_store_is_unreachable_and_healthz_does_not(tmp_path: Path, postgres_url: str) -> None:
    address = httpx.URL(postgres_url.replace("postgresql://", "http://"))
    proxy = Proxy((address.host, address.port or 5432))
    relayed = postgres_url.replace(f"{address.host}:{address.port}", f"127.0.0.1:{proxy.port}")
    with serve_process(tmp_path, "--db", relayed, "--model", "scripted:none") as (url, _):
        assert httpx.get(f"{url}/readyz").status_code == 200
        proxy.cut()
        ready = httpx.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 503 and ready.json()["status"] == "unavailable", ready.text
        assert httpx.get(f"{url}/healthz").status_code == 200
