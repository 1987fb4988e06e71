"""The walls of ``run_python``'s bubblewrap sandbox: its command line and its limits.

The sandbox (``bwrap``) has its own user, PID, network, IPC, UTS and cgroup namespaces:
no network device but its own loopback, no process of the host in sight, no way back
out when the process that started it dies (``--die-with-parent``; the PID namespace
ends with its first process, taking every process inside with it). Its file system is
a fresh tmpfs holding the system read-only (``/usr`` and the interpreter reactchat runs
on), fresh size-bounded tmpfs ``/tmp`` and ``/out``, and the session's files read-only
under ``/data``, copied in from memory: no directory of the host is visible, nor any
of its environment variables.

(``_sandbox_run`` starts it and reads what the code left behind.)

Limits: CPU seconds, address space, open files and file size are rlimits the runner
sets on itself; wall time is enforced by ``_sandbox_run`` (the sandbox is killed). The process limit
is ``RLIMIT_NPROC`` set inside the sandbox, where the kernel counts only the sandbox's
own processes (counts are per user namespace since Linux 5.14). The kernel does not
apply it to root, so when reactchat runs as root the processes go in a ``pids`` cgroup
of their own, and without a writable one the tool refuses to run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reactchat.errors import ConfigError

#: what to run the code with, inside the sandbox; its arguments: the report's fd, the limits,
#: then the folders of installed packages (the interpreter starts without ``site``: see ``command``)
_RUNNER = r"""
import builtins, os, resource, sys
fd, nproc, aspace, cpu, nofile, fsize, max_files, max_bytes = map(int, sys.argv[1:9])
sys.path.extend(sys.argv[9:])
builtins.exit = builtins.quit = sys.exit  # what ``site`` would have given the code
os.set_inheritable(fd, False)
for kind, value in ((resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_AS, aspace),
                    (resource.RLIMIT_NOFILE, nofile), (resource.RLIMIT_FSIZE, fsize),
                    (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(kind, (value, value))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
sys.argv = ["main.py"]
error = ""
try:
    # the code comes on stdin, so that a sandbox can be started before it is known
    code = compile(sys.stdin.buffer.read().decode("utf-8", "surrogateescape"), "main.py", "exec")
    exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit as exc:
    if exc.code not in (None, 0):
        error = "SystemExit: " + str(exc.code)
except BaseException as exc:
    import traceback
    # the last three frames and the exception: the report's, not stderr's (which is the code's)
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)
    error = "".join(lines[1:][-4:]).rstrip()
for stream in (sys.stdout, sys.stderr):
    try:
        stream.flush()
    except Exception:
        pass
files, skipped, more, total = [], [], 0, 0
for entry in os.scandir("/out"):
    if not entry.is_file(follow_symlinks=False):
        kind = "a folder" if entry.is_dir(follow_symlinks=False) else "not a regular file"
        skipped.append(entry.name + " (" + kind + ")")
        continue
    size = entry.stat(follow_symlinks=False).st_size
    if len(files) >= 2 * max_files or total + size > max_bytes:
        more += 1
        continue
    with open(os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
        data = file.read(max_bytes - total + 1)
    total += len(data)
    files += [os.fsencode(entry.name), data]
items = [error.encode("utf-8", "replace"), str(more).encode(), str(len(skipped[:20])).encode()]
items += [os.fsencode(name) for name in skipped[:20]] + files
with open(fd, "wb") as out:
    for item in items:
        out.write(b"%d:" % len(item) + item)
"""

#: the only environment the code sees (none of the host's: API keys live there)
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/matplotlib",
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
}
#: pieces of /etc that libraries read (fonts for matplotlib, shared-library cache, time zone)
_ETC = ("/etc/fonts", "/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives", "/etc/ssl/certs")
#: parts of /proc that act on the whole host (sysctls, SysRq, IRQ affinity...): read-only
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi")
#: processes of bwrap's own beside the code's (``SandboxLimits.processes``, the runner
#: included): its init counts in the sandbox's user namespace, bwrap itself too in the cgroup
_BWRAP_IN_USERNS = 1
_BWRAP_IN_CGROUP = 2
ENABLE_USERNS = (
    "bwrap could not create a user namespace: enable unprivileged user namespaces "
    "(sysctl user.max_user_namespaces=15000; on Debian kernel.unprivileged_userns_clone=1; "
    "on Ubuntu 24.04 an AppArmor profile for bwrap or kernel.apparmor_restrict_unprivileged_userns=0)"
)


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use. Sizes in bytes, times in seconds."""

    cpu_seconds: int = 10
    wall_seconds: float = 30.0
    memory: int = 1 << 30
    #: processes of the code at once, its first one included
    processes: int = 64
    open_files: int = 256
    #: the largest file the code may write (in /tmp or /out)
    file_size: int = 16 << 20
    #: the size of each of /tmp and /out (tmpfs, in memory)
    disk: int = 64 << 20
    #: bytes of stdout and of stderr kept (the rest is read and counted)
    output: int = 32 << 10
    #: files of /out kept, and their total size
    out_files: int = 20
    out_bytes: int = 32 << 20
    #: total size of the files put under /data
    data_bytes: int = 64 << 20


def bwrap() -> str:
    """The ``bwrap`` program, checked once to work here; ``ConfigError`` saying what to fix."""
    path = shutil.which("bwrap")
    if path is None:
        raise ConfigError(
            "run_python needs bubblewrap: install it (apt-get install bubblewrap, dnf install bubblewrap)"
        )
    _check_usable(path)
    return path


@functools.cache
def _check_usable(path: str) -> None:
    probe = subprocess.run(
        [path, "--unshare-all", "--unshare-user", *_system_binds(), "/usr/bin/true"],
        capture_output=True,
        timeout=30,
    )
    if probe.returncode != 0:
        reason = probe.stderr.decode(errors="replace").strip()
        raise ConfigError(f"{ENABLE_USERNS} ({reason})")


class PidsCgroup:
    """A ``pids`` cgroup for one run: bounds its processes where ``RLIMIT_NPROC`` cannot (root)."""

    def __init__(self, path: Path, limit: int) -> None:
        self.path = path
        path.mkdir()
        (path / "pids.max").write_text(str(limit))

    @staticmethod
    def base() -> Path | None:
        """The writable folder of this process's ``pids`` cgroup (v1 or v2), or None."""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, where = line.split(":", 2)
            if "pids" in controllers.split(","):
                folder = Path("/sys/fs/cgroup/pids") / where.lstrip("/")
            elif controllers == "" and "pids" in _v2_controllers():
                folder = Path("/sys/fs/cgroup") / where.lstrip("/")
            else:
                continue
            if os.access(folder, os.W_OK):
                return folder
        return None

    def wrap(self, args: list[str]) -> list[str]:
        """``args`` run by a shell that first moves itself in, so that all it starts stays in
        (a shell, not ``preexec_fn``: the server has threads, and forks here must not run Python)."""
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(self.path / "cgroup.procs"), *args]

    def remove(self) -> None:
        """Kill whatever is still in it, then delete it (once the kernel has let go of its
        processes, within a millisecond or two: polled often, since a call waits for it)."""
        for attempt in range(1000):
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                self.path.rmdir()
                return
            time.sleep(0.0005 if attempt < 100 else 0.01)


def _v2_controllers() -> list[str]:
    try:
        return Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:
        return []


def pids_cgroup(limits: SandboxLimits) -> PidsCgroup | None:
    """A pids cgroup for one run when one can be made; ``ConfigError`` when root has none."""
    base = PidsCgroup.base()
    if base is None:
        if os.geteuid() == 0:
            raise ConfigError(
                "run_python cannot bound the number of processes of a sandbox started by root "
                "(the kernel does not apply RLIMIT_NPROC to root) and this process has no writable "
                "pids cgroup: run reactchat as an ordinary user, or give it a pids cgroup"
            )
        return None
    _remove_stale(base)
    name = f"reactchat-sandbox-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    return PidsCgroup(base / name, limits.processes + _BWRAP_IN_CGROUP)


def _remove_stale(base: Path) -> None:
    """Remove the empty cgroups of runs whose process was killed before it could."""
    for folder in base.glob("reactchat-sandbox-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                folder.rmdir()


def memfd(name: str, data: bytes) -> int:
    """A file in memory holding ``data``, read from its start (bwrap copies it in)."""
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _system_binds() -> list[str]:
    """``/usr`` read-only, and ``/bin``, ``/lib``... as the host has them (links into /usr or folders)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        target = Path("/") / link
        if target.is_symlink():
            args += ["--symlink", os.readlink(target), f"/{link}"]
        elif target.is_dir():
            args += ["--ro-bind", str(target), f"/{link}"]
    return args


def _interpreter_binds() -> list[str]:
    """Read-only binds of the interpreter reactchat runs on (its venv and base install)."""
    args: list[str] = []
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for path in sorted(paths | {os.path.realpath(p) for p in paths}):
        if not path.startswith("/usr/"):
            args += ["--ro-bind", path, path]
    return args


def command(program: str, limits: SandboxLimits, report_fd: int, data: Mapping[str, int]) -> list[str]:
    """The ``bwrap`` command line of one run."""
    args = [program, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    if os.geteuid() == 0:
        # bwrap keeps every capability (of the sandbox's user namespace) for uid 0 inside;
        # with them, root-owned files of the host bound in could be changed
        args += ["--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
    args += _system_binds()
    for piece in _ETC:
        if os.path.exists(piece):
            args += ["--ro-bind", piece, piece]
    args += _interpreter_binds()
    args += ["--proc", "/proc", "--dev", "/dev"]
    # bwrap covers only some of these, and not /proc/sys: with uid 0 outside (reactchat
    # run as root) their files are writable on owner bits alone, and they act on the host
    for name in _PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    for folder in ("/tmp", "/out"):
        args += ["--size", str(limits.disk), "--perms", "0700", "--tmpfs", folder]
    args += ["--dir", "/data"]
    for name, fd in data.items():
        args += ["--ro-bind-data", str(fd), f"/data/{name}"]
    # the root is bwrap's own tmpfs, unbounded: read-only, so that only /tmp and /out take writes
    args += ["--remount-ro", "/", "--chdir", "/out", "--", sys.executable, *_PYTHON_FLAGS, _RUNNER, str(report_fd)]
    numbers = (limits.processes + _BWRAP_IN_USERNS, limits.memory, limits.cpu_seconds, limits.open_files)
    args += [str(n) for n in (*numbers, limits.file_size, limits.out_files, limits.out_bytes)]
    return args + site_packages()


#: isolated (no environment variables, no user site, no script folder on the path), no .pyc
#: written (the system is read-only), and no ``site`` at start-up: the runner puts the
#: package folders on the path itself, which skips running their ``.pth`` files (a fifth
#: of the interpreter's start: ``benchmarks/run_python.py``)
_PYTHON_FLAGS = ("-I", "-S", "-B", "-c")


@functools.cache
def site_packages() -> list[str]:
    """The folders of the packages installed for this interpreter (its venv's, or its own)."""
    import site  # already imported at start-up: a lookup, not a load

    return [path for path in site.getsitepackages() if os.path.isdir(path)]
