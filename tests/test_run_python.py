"""run_python: the sandbox's walls, tried from inside with code an attacker would write.

Each test runs real code in a real bubblewrap sandbox and checks what the code could
reach; each would fail on a sandbox missing the wall it is about.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.errors import ConfigError
from reactchat.toolbox import SandboxLimits, _sandbox, run_python, run_sandboxed

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/setup.sh)")


async def test_the_code_runs_and_its_output_error_and_files_come_back() -> None:
    code = "print(sum(range(10)))\nopen('/out/n.txt', 'w').write('45')\nraise ValueError('no such thing')\n"
    run = await run_sandboxed(code)
    assert run.stdout.text == "45\n"
    assert run.error is not None and run.error.endswith("ValueError: no such thing")
    assert 'File "main.py", line 3' in run.error
    assert run.stderr.text == ""  # stderr is what the code wrote, the error is apart
    assert run.files == {"n.txt": b"45"}


async def test_no_network_not_even_the_hosts_loopback() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"leak")
    print("connected")
except OSError as exc:
    print("refused", type(exc).__name__)
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("internet")
except OSError as exc:
    print("no route", type(exc).__name__)
"""
    run = await run_sandboxed(code)
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert run.stdout.text.splitlines()[0].startswith("refused"), run.stdout.text
    assert run.stdout.text.splitlines()[1].startswith("no route"), run.stdout.text


async def test_the_hosts_tmp_home_and_environment_are_not_there(tmp_path: Path) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    in_tmp = Path("/tmp") / f"reactchat-test-{uuid.uuid4().hex}.txt"
    in_home = Path.home() / f".reactchat-test-{uuid.uuid4().hex}"
    in_tmp.write_text(secret)
    in_home.write_text(secret)
    os.environ["REACTCHAT_TEST_SECRET"] = secret
    try:
        code = f"""
import os, glob
for path in [{str(in_tmp)!r}, {str(in_home)!r}]:
    try:
        print(open(path).read())
    except OSError as exc:
        print("unreadable", type(exc).__name__)
print(sorted(glob.glob("/tmp/*")), os.path.exists({str(Path.home())!r} + "/.bashrc"))
print("REACTCHAT_TEST_SECRET" in os.environ)
"""
        run = await run_sandboxed(code)
    finally:
        in_tmp.unlink()
        in_home.unlink()
        del os.environ["REACTCHAT_TEST_SECRET"]
    assert secret not in run.stdout.text
    assert run.stdout.text.splitlines() == [
        "unreadable FileNotFoundError",
        "unreadable FileNotFoundError",
        "[] False",
        "False",
    ]


async def test_nothing_outside_out_and_tmp_can_be_written() -> None:
    # only opened for writing, never written: /proc/sysrq-trigger would act on the host.
    # With reactchat run as root (uid 0 outside), /proc's files are writable on owner bits
    # alone unless the sandbox makes them read-only.
    code = """
import os
paths = ["/usr/evil", "/etc/evil", sys_prefix + "/evil", "/data/evil", "/evil",
         "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger", "/proc/sys/kernel/core_pattern"]
for path in paths:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
        print("opened", path)
    except OSError as exc:
        print("refused", type(exc).__name__)
open("/out/ok", "w").write("fine")
"""
    run = await run_sandboxed(f"sys_prefix = {sys.prefix!r}\n{code}")
    assert "opened" not in run.stdout.text, run.stdout.text
    assert run.stdout.text.count("refused") == 8, run.stdout.text
    assert not Path(sys.prefix, "evil").exists()
    assert run.files == {"ok": b"fine"}


async def test_symlinks_folders_and_odd_names_in_out_are_not_followed() -> None:
    code = """
import os
os.symlink("/etc/passwd", "/out/passwd")
os.symlink("/data/secret.txt", "/out/secret")
os.mkdir("/out/sub")
open("/out/sub/inner.txt", "w").write("x")
open("/out/..hidden", "w").write("dots")
"""
    run = await run_sandboxed(code, {"secret.txt": b"uploaded"})
    assert run.files == {"..hidden": b"dots"}
    assert sorted(run.skipped) == ["passwd (not a regular file)", "secret (not a regular file)", "sub (a folder)"]


async def test_the_hosts_processes_are_not_in_sight() -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        code = """
import os
seen = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            seen.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
        except OSError:
            pass
print(len(seen))
print("\\n".join(seen))
"""
        run = await run_sandboxed(code)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert marker not in run.stdout.text
    # bwrap's init and the runner, nothing else
    assert int(run.stdout.text.splitlines()[0]) <= 3, run.stdout.text


async def test_uploads_are_readable_under_data_and_read_only() -> None:
    code = """
print(open("/data/table.csv").read())
try:
    open("/data/table.csv", "a").write("more")
except OSError as exc:
    print("read-only", type(exc).__name__)
"""
    run = await run_sandboxed(code, {"table.csv": b"a,b\n1,2\n"})
    assert run.stdout.text == "a,b\n1,2\n\nread-only OSError\n"


async def test_matplotlib_draws_a_png_into_out() -> None:
    pytest.importorskip("matplotlib", reason="the python extra is not installed: pip install 'reactchat[python]'")
    code = """
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig("/out/squares.png")
print("saved")
"""
    run = await run_sandboxed(code, limits=SandboxLimits(wall_seconds=60, cpu_seconds=30))
    assert run.error is None, run.stderr.text
    assert run.files["squares.png"].startswith(b"\x89PNG\r\n\x1a\n")


async def test_an_agent_runs_code_and_its_files_become_artifacts() -> None:
    call = json.dumps({"code": "print(6 * 7)\nopen('/out/answer.txt', 'w').write('42')"})
    model = ScriptedModel([f" I compute.\nAction: run_python\nAction Input: {call}", " Done.\nFinal Answer: 42"])
    agent = Agent(model=model, tools=[run_python], store="memory:")
    result = await agent.arun("What is 6 times 7?")
    observation = result.steps[0].observation or ""
    assert observation.startswith("stdout:\n42")
    assert "answer.txt (2 bytes)" in observation and "kept as this chat's files" in observation
    store = agent.store
    artifact = await store.artifact(result.session, "answer.txt")  # type: ignore[attr-defined]
    assert artifact is not None and artifact.data == b"42" and artifact.content_type.startswith("text/plain")


async def test_without_bwrap_the_tool_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        await run_sandboxed("print(1)")


async def test_a_bwrap_that_cannot_make_namespaces_is_a_config_error(tmp_path: Path) -> None:
    # a bwrap that fails the way it does where user namespaces are disabled
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(ConfigError, match="enable unprivileged user namespaces"):
        await asyncio.to_thread(_sandbox._check_usable, str(fake))


async def test_the_sandbox_started_ahead_is_fresh_for_each_call() -> None:
    limits = SandboxLimits(wall_seconds=20)
    first = await run_sandboxed(
        "import os\nx = 42\nopen('/tmp/left', 'w').write('x')\nprint(os.getpid())", None, limits
    )
    await asyncio.sleep(0.5)  # the next call's sandbox starts meanwhile
    code = "import os\nprint('x' in globals(), os.path.exists('/tmp/left'), os.listdir('/out'))"
    second = await run_sandboxed(code, None, limits)
    assert first.error is None and second.error is None, (first, second)
    assert second.stdout.text == "False False []\n"
    # a run with uploads starts its own: /data is bound in when the sandbox starts
    third = await run_sandboxed("import os\nprint(os.listdir('/data'))", {"a.txt": b"a"}, limits)
    assert third.stdout.text == "['a.txt']\n"


async def test_the_observation_shows_output_stderr_the_error_and_what_was_cut() -> None:
    from reactchat.toolbox._python import render

    code = "import sys\nprint('x' * 100_000)\nprint('careful', file=sys.stderr)\n{}['key']"
    text = render(await run_sandboxed(code), kept=[])
    stdout, stderr, error = text.split("\n\n")
    assert stdout.startswith("stdout:\nxxx") and stdout.endswith("[stdout cut: 96001 more bytes not shown]")
    assert stderr == "stderr:\ncareful"
    assert error == "error:\n  File \"main.py\", line 4, in <module>\nKeyError: 'key'"
