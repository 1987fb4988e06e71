"""The knowledge base on PostgreSQL through a restart of the database: its next calls work
on a new connection, and while the database is down the server answers 503 with the
reason, never a 500.

The shared test cluster must never stop, so this test starts a private one (initdb as the
``postgres`` user, which needs root and the PostgreSQL binaries ``scripts/setup.sh``
installs); where that cannot run, the test is skipped and says why.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reactchat import Agent
from reactchat.knowledge import KnowledgeBase
from reactchat.server import ServerConfig, create_app
from server_support import RuleModel, free_port, running


class Cluster:
    """A private PostgreSQL cluster on a loopback port, which the test may stop and start."""

    def __init__(self) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not binaries or shutil.which("runuser") is None:
            pytest.skip("no PostgreSQL binaries or no runuser here (scripts/setup.sh installs them)")
        self.bin = Path(binaries[-1])
        self.dir = Path(tempfile.mkdtemp(prefix="reactchat-pg-restart-"))
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        prepared = subprocess.run(["chown", "postgres:", str(self.dir)], capture_output=True, text=True, check=False)
        made = prepared.returncode == 0 and self._as_postgres(
            "initdb", "-D", str(self.dir / "data"), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"
        )
        if not made:
            shutil.rmtree(self.dir, ignore_errors=True)
            pytest.skip("a private PostgreSQL cluster cannot be made here (initdb as postgres needs root)")

    def _as_postgres(self, tool: str, *args: str) -> bool:
        command = ["runuser", "-u", "postgres", "--", str(self.bin / tool), *args]
        return subprocess.run(command, capture_output=True, timeout=120, check=False).returncode == 0

    def start(self) -> None:
        """Start it (waits until it accepts connections)."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.dir / 'data'}"
        data, log = str(self.dir / "data"), str(self.dir / "log")
        assert self._as_postgres("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "-o", options, "start")

    def stop(self) -> None:
        """Stop it at once (``-m fast``: every connection is ended, as in a restart)."""
        assert self._as_postgres("pg_ctl", "-D", str(self.dir / "data"), "-w", "-m", "fast", "stop")

    def remove(self) -> None:
        """Stop it if it runs, and delete its files."""
        self._as_postgres("pg_ctl", "-D", str(self.dir / "data"), "-w", "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    made.start()
    try:
        yield made
    finally:
        made.remove()


NOTES = b"Orchids need indirect light.\n\nWater them weekly.\n"


async def test_the_knowledge_base_reconnects_after_a_restart(cluster: Cluster) -> None:
    kb = KnowledgeBase(cluster.url)
    try:
        await kb.add_file("s1", "notes.txt", NOTES)
        assert (await kb.search("s1", "orchids light"))[0].text.startswith("Orchids")
        cluster.stop()
        cluster.start()
        assert [f.name for f in await kb.files("s1")] == ["notes.txt"]
        assert (await kb.search("s1", "water weekly"))[0].text.startswith("Orchids")
        await kb.add_file("s1", "more.txt", b"Tulips open in the sun.\n")
        cluster.stop()
        with pytest.raises(ConnectionError, match="the knowledge base cannot reach PostgreSQL at"):
            await kb.files("s1")
        cluster.start()
        assert [f.name for f in await kb.files("s1")] == ["notes.txt", "more.txt"]
    finally:
        await kb.close()


def test_the_server_answers_503_while_the_database_is_down_and_works_after(cluster: Cluster) -> None:
    app = create_app(lambda s: Agent(model=RuleModel(), store=s), config=ServerConfig(store=cluster.url))
    with running(app) as base, httpx.Client(base_url=base, timeout=60) as client:
        session = client.post("/v1/sessions").json()["session"]
        uploaded = client.post(f"/v1/sessions/{session}/files", files={"file": ("notes.txt", NOTES, "text/plain")})
        assert uploaded.status_code == 201, uploaded.text
        cluster.stop()
        try:
            for _ in range(3):  # every try, not only the first on a broken connection
                down = client.get(f"/v1/sessions/{session}")
                assert down.status_code == 503, down.text
                assert "a database is unavailable" in down.json()["error"]["message"]
        finally:
            cluster.start()
        view = client.get(f"/v1/sessions/{session}")
        assert view.status_code == 200, view.text
        assert [f["name"] for f in view.json()["files"]] == ["notes.txt"]
        done = client.post(f"/v1/sessions/{session}/messages", json={"message": "hello", "stream": False})
        assert done.json()["status"] == "done"
