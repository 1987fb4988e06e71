"""Hosts, not processes: a database host, two worker hosts and a client host, each a network
namespace, joined by veth links through a bridge (in a namespace of its own: the machine's
own network is not touched).

* the database host runs a PostgreSQL 15 cluster of its own (``/usr/lib/postgresql/15/bin``,
  its data under a temporary directory), reachable as ``db.internal``;
* each worker host (``10.0.0.11``, ``10.0.0.12``: the addresses of ``deploy/haproxy.cfg``)
  runs ``reactchat serve`` as ``deploy/reactchat@.service`` starts it, on the environment
  file ``deploy/reactchat.env`` with its model line pointed at an OpenAI-compatible endpoint
  on the host's loopback (``hosts_parts``: the paid API's HTTP boundary) and the harness's
  own lines added (the tool, the lease);
* the client host runs the balancer (``hosts_parts``) over the ``server`` lines of
  ``deploy/haproxy.cfg``. The test process stays outside the hosts' network and reaches the
  balancer through a Unix socket, and the database through its Unix socket, to watch.

Faults: ``cut`` (the host's link goes down at the bridge: packets vanish, nobody is told),
``freeze`` (SIGSTOP of every process in the host), ``restart_database`` (an immediate
shutdown, as a crash, then a start). ``trial`` runs one turn through the balancer and
injects a fault once the turn's first tool call has been observed.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
#: address of each host; the worker hosts' are those of deploy/haproxy.cfg
ADDRESSES = {"db": "10.0.0.2", "host1": "10.0.0.11", "host2": "10.0.0.12", "client": "10.0.0.100"}
WORKERS = ("host1", "host2")
#: the port of the one worker each host runs (reactchat@8001)
PORT = "8001"


def unavailable() -> str | None:
    """Why the harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "the multi-host harness needs root: it builds network namespaces (ip netns)"
    if shutil.which("ip") is None:
        return "the multi-host harness needs iproute2 (ip netns)"
    if not (PG_BIN / "postgres").exists():
        return f"the multi-host harness runs PostgreSQL 15 from {PG_BIN}, which is not installed"
    probe = f"rcprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"ip netns is not usable here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=False)
    return None


def sh(*command: str) -> str:
    """Run a command; its output (a ``RuntimeError`` with its stderr if it fails)."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
    return done.stdout


def environment_file(path: Path) -> dict[str, str]:
    """The variables of a systemd environment file (``KEY=VALUE`` lines, ``#`` comments)."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def unit_command(unit: Path, instance: str) -> list[str]:
    """The ``ExecStart`` of a unit for an instance, with this interpreter for ``reactchat``."""
    line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    program, *args = line.removeprefix("ExecStart=").replace("%i", instance).split()
    assert program.endswith("/bin/reactchat"), program
    return [sys.executable, "-m", "reactchat", *args]


class Hosts:
    """The namespaces, the database, the workers and the balancer; ``close()`` removes them all."""

    def __init__(self, lease: float, inter: float = 0.5, model_delay: float = 0.5) -> None:
        self.prefix = f"rc{os.getpid() % 100000}"
        self.lease, self.inter, self.model_delay = lease, inter, model_delay
        self.dir = Path(tempfile.mkdtemp(prefix="reactchat-hosts-"))
        self.dir.chmod(0o755)  # the database runs as postgres
        self.effects = self.dir / "effects.log"
        self.env = environment_file(DEPLOY / "reactchat.env")
        self.db_url = self.env["REACTCHAT_DB"]
        self.token = self.env["REACTCHAT_TOKEN"]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.namespaces: list[str] = []
        self.frozen: set[str] = set()
        self.files: list[Any] = []

    # ------------------------------------------------------------------ building

    def start(self) -> Hosts:
        self.network()
        self.database()
        threads = [threading.Thread(target=self.worker, args=(host,)) for host in WORKERS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for host in WORKERS:
            self.wait_started(host)
        self.balancer()
        return self

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def network(self) -> None:
        """A bridge in a namespace of its own, and one veth link from each host to it."""
        switch = self.ns("switch")
        sh("ip", "netns", "add", switch)
        self.namespaces.append(switch)
        sh("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", switch, "link", "set", "br0", "up")
        for host, address in ADDRESSES.items():
            ns = self.ns(host)
            sh("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", host, "netns", switch)
            sh("ip", "-n", switch, "link", "set", host, "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            # ip netns exec puts /etc/netns/NS/hosts in place of /etc/hosts: the name of the URL
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(f"127.0.0.1 localhost\n{ADDRESSES['db']} db.internal\n")

    def database(self) -> None:
        """A PostgreSQL cluster on the database host, with the role and database of the URL."""
        data, self.sockets = self.dir / "pgdata", self.dir / "pgsock"
        for made in (data, self.sockets):
            made.mkdir(mode=0o700)
            shutil.chown(made, "postgres")
        sh("runuser", "-u", "postgres", "--", str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "--no-sync")
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 10.0.0.0/24 scram-sha-256\n")
        self.start_database()
        url = urlsplit(self.db_url)
        name = url.path.lstrip("/")
        with psycopg.connect(host=str(self.sockets), user="postgres", dbname="postgres", autocommit=True) as db:
            db.execute(f"CREATE ROLE {url.username} LOGIN PASSWORD '{url.password}'")
            db.execute(f"CREATE DATABASE {name} OWNER {url.username}")

    def start_database(self) -> None:
        command = [str(PG_BIN / "postgres"), "-D", str(self.dir / "pgdata"), "-c", "listen_addresses=10.0.0.2"]
        command += ["-c", f"unix_socket_directories={self.sockets}", "-c", "fsync=off", "-c", "max_connections=60"]
        log = self.opened(self.dir / "postgres.log")
        self.processes["db"] = subprocess.Popen(
            ["ip", "netns", "exec", self.ns("db"), "runuser", "-u", "postgres", "--", *command],
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 30
        while subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", str(self.sockets)], check=False).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {(self.dir / 'postgres.log').read_text()[-2000:]}")
            time.sleep(0.1)

    def worker_environment(self, host: str) -> dict[str, str]:
        """deploy/reactchat.env with the model line pointed at the host's endpoint, plus the harness's lines."""
        env = dict(self.env)
        env["REACTCHAT_MODEL"] = "openai:hosts?stream=false"
        env |= {
            "OPENAI_BASE_URL": "http://127.0.0.1:9000/v1",
            "OPENAI_API_KEY": "none",
            "REACTCHAT_TOOLS": "hosts_parts:record",
            "REACTCHAT_LEASE_SECONDS": str(self.lease),
        }
        (self.dir / "reactchat.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
        here = {"PATH": "/usr/bin:/bin", "HOME": str(self.dir), "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
        harness = {
            "HOSTS_NAME": host,
            "HOSTS_EFFECT_LOG": str(self.effects),
            "HOSTS_MODEL_DELAY": str(self.model_delay),
        }
        return {**environment_file(self.dir / "reactchat.env"), **here, **harness}

    def worker(self, host: str) -> None:
        """The host's model endpoint, then ``reactchat serve`` as the unit runs it."""
        env = self.worker_environment(host)
        inside = ["ip", "netns", "exec", self.ns(host)]
        model = [sys.executable, str(ROOT / "tests" / "hosts_parts.py"), "model", "9000"]
        self.processes[f"{host}-model"] = subprocess.Popen([*inside, *model], env=env, stdout=subprocess.DEVNULL)
        log = self.opened(self.dir / f"{host}.log")
        command = unit_command(DEPLOY / "reactchat@.service", PORT)
        self.processes[host] = subprocess.Popen([*inside, *command], env=env, stdout=log, stderr=log)

    def opened(self, path: Path) -> Any:
        """A log file for a process, closed with the hosts."""
        self.files.append(file := path.open("ab"))
        return file

    def wait_started(self, host: str) -> None:
        deadline = time.monotonic() + 60
        while b"Application startup complete" not in self.log(host).encode():
            if self.processes[host].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"reactchat serve did not start on {host}: {self.log(host)[-3000:]}")
            time.sleep(0.1)

    def balancer(self) -> None:
        self.socket = str(self.dir / "balancer.sock")
        command = [sys.executable, str(ROOT / "tests" / "hosts_parts.py"), "balancer", self.socket]
        command += [str(DEPLOY / "haproxy.cfg"), str(self.inter)]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}"}
        process = subprocess.Popen(
            ["ip", "netns", "exec", self.ns("client"), *command], env=env, stdout=subprocess.PIPE
        )
        self.processes["balancer"] = process
        assert process.stdout is not None
        self.files.append(process.stdout)
        assert process.stdout.readline().strip() == b"ready"
        self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        """Until both workers answer through the balancer (each is checked ``rise`` times)."""
        time.sleep(self.inter * 3)
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                with _quiet():
                    if client.get("/readyz", timeout=2).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError("no worker is ready behind the balancer")
                time.sleep(0.2)

    def warm(self, timeout: float = 60) -> None:
        """Turns through the balancer until each worker has run one: a worker's first turn
        loads what it loads lazily (the uploaded-files index), which is no part of a takeover."""
        deadline = time.monotonic() + timeout
        warmed: set[str] = set()
        for n in itertools.count():
            with self.client(timeout=30) as client:
                session = client.post("/v1/sessions").json()["session"]
                client.post(f"/v1/sessions/{session}/messages", json={"message": f"warm{n}"}).read()
            warmed |= {host for _, host in self.effects_of(f"warm{n}")}
            if warmed == set(WORKERS):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {warmed} ran a turn behind the balancer")

    def log(self, host: str) -> str:
        return (self.dir / f"{host}.log").read_text(errors="replace")

    # ------------------------------------------------------------------ faults

    def cut(self, host: str) -> None:
        """The host's link goes down at the bridge: its packets vanish, nobody is told."""
        sh("ip", "-n", self.ns("switch"), "link", "set", host, "down")

    def heal(self, host: str) -> None:
        sh("ip", "-n", self.ns("switch"), "link", "set", host, "up")

    def pids(self, host: str) -> list[int]:
        return [int(pid) for pid in sh("ip", "netns", "pids", self.ns(host)).split()]

    def freeze(self, host: str) -> None:
        """SIGSTOP to every process of the host."""
        self.frozen.add(host)
        for pid in self.pids(host):
            with _quiet():
                os.kill(pid, signal.SIGSTOP)

    def thaw(self, host: str) -> None:
        for pid in self.pids(host):
            with _quiet():
                os.kill(pid, signal.SIGCONT)
        self.frozen.discard(host)

    def restart_database(self, down: float = 1.0) -> None:
        """An immediate shutdown (as in a crash: unlogged tables are emptied), then a start."""
        postmaster = int((self.dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGQUIT)
        self.processes["db"].wait(30)
        time.sleep(down)
        self.start_database()

    # ------------------------------------------------------------------ watching

    def client(self, timeout: float = 5.0) -> httpx.Client:
        """An HTTP client of the balancer (through its Unix socket), with the deployment's token."""
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=self.socket),
            base_url="http://chat.example.com",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        name = urlsplit(self.db_url).path.lstrip("/")
        with psycopg.connect(host=str(self.sockets), user="postgres", dbname=name, autocommit=True) as db:
            return db.execute(sql, params).fetchall()

    def holder(self, session: str) -> tuple[str, int] | None:
        """The host whose worker holds the session's turn lock, and the lock's epoch."""
        rows = self.query(
            """SELECT host(a.client_addr), r.epoch FROM running_turns r JOIN pg_stat_activity a ON a.pid = r.backend
            WHERE r.session = %s""",
            session,
        )
        if not rows:
            return None
        hosts = {address: host for host, address in ADDRESSES.items()}
        return hosts.get(rows[0][0], rows[0][0]), rows[0][1]

    def events(self, session: str) -> list[tuple[int, str, dict[str, Any]]]:
        rows = self.query("SELECT seq, type, body::text FROM events WHERE session = %s ORDER BY seq", session)
        return [(seq, kind, json.loads(body)) for seq, kind, body in rows]

    def effects_of(self, question: str) -> list[tuple[str, str]]:
        """The (key, host) of each ``record`` call of the question's turn, in the order they ran."""
        if not self.effects.exists():
            return []
        lines = [line.split() for line in self.effects.read_text().splitlines()]
        return [(key, host) for key, host, _ in lines if key.startswith(f"{question}#")]

    # ------------------------------------------------------------------ ending

    def close(self) -> None:
        for host in list(self.frozen):
            self.thaw(host)
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for ns in self.namespaces:
            for pid in sh("ip", "netns", "pids", ns).split():
                with _quiet():
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], check=False)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        for file in self.files:
            file.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class _quiet:
    """Suppress the errors of a probe or a signal to a process that may be gone."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, (OSError, httpx.HTTPError))


# ------------------------------------------------------------------ one turn with a fault


@dataclass
class Trial:
    """What one turn with a fault came to, as the client and the database saw it."""

    question: str
    session: str = ""
    #: the host that ran the turn when the fault came, and its lock's epoch
    first: tuple[str, int] | None = None
    #: the host that held the turn after the fault, and its lock's epoch (None: nobody yet)
    then: tuple[str, int] | None = None
    #: when the fault came (``time.time()``), and when the client read the turn's end
    fault_at: float = 0.0
    ended_at: float = 0.0
    #: seconds from the fault to the turn's lock held again (by another host, or a new epoch)
    takeover: float | None = None
    #: every event frame the client received, over all its streams: (seq, type, data)
    received: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    #: the data of the ``end`` frame that closed the last stream
    end: dict[str, Any] = field(default_factory=dict)
    #: how many times the client had to connect again
    reconnects: int = 0


FAULTS = ("partition", "freeze", "database")


def trial(hosts: Hosts, fault: str, question: str, hold: float = 0.0, deadline: float = 60.0) -> Trial:
    """One turn through the balancer; once the client has seen its first observation, the
    ``fault`` (``partition``, ``freeze`` of the host running it, or ``database`` restart),
    lifted after the turn was taken over and ``hold`` more seconds; the client follows the
    turn to its end, reconnecting with ``Last-Event-ID`` whenever its stream breaks or stalls."""
    result = Trial(question)
    timeout = httpx.Timeout(connect=2.0, read=2.5, write=2.0, pool=2.0)
    with hosts.client(timeout=10) as client:
        result.session = client.post("/v1/sessions").json()["session"]
    watcher: threading.Thread | None = None
    until = time.monotonic() + deadline
    # the message, then (once its stream broke or stalled) the session's events from the last one seen
    method, url, body = "POST", f"/v1/sessions/{result.session}/messages", {"message": question}
    while time.monotonic() < until:
        try:
            with hosts.client() as client:
                last = result.received[-1][0] if result.received else None
                headers = {"Last-Event-ID": str(last)} if last is not None else {}
                with client.stream(method, url, json=body, headers=headers, timeout=timeout) as stream:
                    if stream.status_code != 200:
                        raise httpx.ReadError(f"status {stream.status_code}")
                    for seq, kind, data in frames(stream.iter_lines()):
                        if kind == "end":
                            result.end, result.ended_at = data, time.time()
                            break
                        if seq is not None:
                            result.received.append((seq, kind, data))
                        if kind == "observation" and not result.fault_at:
                            result.first = hosts.holder(result.session)
                            result.fault_at = time.time()
                            watcher = threading.Thread(target=_watch_takeover, args=(hosts, result, result.fault_at))
                            watcher.start()
                            inject(hosts, fault, result.first[0] if result.first else "host1")
            if result.end.get("status") == "done":
                break
        except (httpx.HTTPError, OSError):
            pass  # broke or stalled: follow on from the last event received
        result.reconnects += 1
        method, url, body = "GET", f"/v1/sessions/{result.session}/events", None
        time.sleep(0.2)
    if watcher is not None:
        watcher.join(deadline)
    time.sleep(hold)
    lift(hosts, fault, result.first[0] if result.first else "host1")
    return result


def inject(hosts: Hosts, fault: str, host: str) -> None:
    if fault == "partition":
        hosts.cut(host)
    elif fault == "freeze":
        hosts.freeze(host)
    elif fault == "database":
        threading.Thread(target=hosts.restart_database, daemon=True).start()
    else:
        raise ValueError(f"unknown fault {fault!r}: one of {FAULTS}")


def lift(hosts: Hosts, fault: str, host: str) -> None:
    if fault == "partition":
        hosts.heal(host)
    elif fault == "freeze":
        hosts.thaw(host)


def _watch_takeover(hosts: Hosts, result: Trial, since: float) -> None:
    """Poll the database until the turn's lock is held again with a new epoch."""
    first_epoch = result.first[1] if result.first else -1
    while time.time() - since < 60:
        try:
            now = hosts.holder(result.session)
        except psycopg.Error:  # the database is restarting
            now = None
        if now is not None and now[1] != first_epoch:
            result.then, result.takeover = now, time.time() - since
            return
        if result.end.get("status") == "done" and now is None:
            return  # finished between two looks
        time.sleep(0.05)


def frames(lines: Any) -> Any:
    """SSE lines → ``(seq, event, data)`` per frame (comments skipped)."""
    seq, kind, data = None, "message", ""
    for line in lines:
        if line.startswith("id: "):
            seq = int(line[4:])
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data += line[6:]
        elif line == "":
            if data:
                yield seq, kind, json.loads(data)
            seq, kind, data = None, "message", ""
