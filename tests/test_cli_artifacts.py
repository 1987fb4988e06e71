"""``reactchat ask`` and the files a turn made: listed after the answer, saved with
``--out DIR`` without replacing anything, an unwritable ``DIR`` refused before any model
call. The command runs as a user runs it (a subprocess, real files, a real sandbox)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.pictures import png

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/setup.sh)")

CHART = png(6, 4)
CODE = (
    f"import base64; open('/out/chart.png', 'wb').write(base64.b64decode('{base64.b64encode(CHART).decode()}')); "
    "open('/out/notes.txt', 'w').write('made by the sandbox'); print('done')"
)


def reactchat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120, env=env
    )


def script(tmp_path: Path) -> str:
    path = tmp_path / "replies.json"
    call = f" I write the files.\nAction: run_python\nAction Input: {json.dumps({'code': CODE})}"
    path.write_text(json.dumps([call, " They are written.\nFinal Answer: two files"]))
    return f"scripted:{path}"


def ask(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    db = str(tmp_path / "s.db")
    tools = "reactchat.toolbox:run_python"
    return reactchat(
        "ask", "Make files.", "--model", script(tmp_path), "--db", db, "--tools", tools, *extra, cwd=tmp_path
    )


def test_ask_lists_the_files_the_turn_made(tmp_path: Path) -> None:
    done = ask(tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("file: ")]
    session = done.stdout.split("/v1/sessions/")[1].split("/")[0]
    assert lines == [
        f"file: chart.png ({len(CHART)} bytes) at /v1/sessions/{session}/artifacts/chart.png",
        f"file: notes.txt (19 bytes) at /v1/sessions/{session}/artifacts/notes.txt",
    ] or lines == [  # same instant: the store orders them by name
        f"file: notes.txt (19 bytes) at /v1/sessions/{session}/artifacts/notes.txt",
        f"file: chart.png ({len(CHART)} bytes) at /v1/sessions/{session}/artifacts/chart.png",
    ]


def test_out_saves_them_and_never_replaces_a_file(tmp_path: Path) -> None:
    out = tmp_path / "saved"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (tmp_path / "secret").write_text("do not touch")
    (out / "chart.png").symlink_to(tmp_path / "secret")  # a link left where a file would go
    done = ask(tmp_path, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    files = {f["name"]: f for f in json.loads(done.stdout)["files"]}
    assert Path(files["notes.txt"]["path"]) == out / "notes-1.txt"
    assert Path(files["chart.png"]["path"]) == out / "chart-1.png"
    assert (out / "notes.txt").read_text() == "mine" and (tmp_path / "secret").read_text() == "do not touch"
    assert (out / "notes-1.txt").read_text() == "made by the sandbox"
    assert (out / "chart-1.png").read_bytes() == CHART
    again = ask(tmp_path, "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert f"saved: {out / 'notes-2.txt'}" in again.stdout and (out / "notes-2.txt").exists()


@pytest.mark.parametrize(("where", "said"), [("a-file", "not a folder"), ("a-file/below", "cannot write there")])
def test_an_unwritable_out_is_refused_before_the_turn(tmp_path: Path, where: str, said: str) -> None:
    (tmp_path / "a-file").write_text("x")
    refused = ask(tmp_path, "--out", str(tmp_path / where))
    assert refused.returncode == 1
    assert f"reactchat: error: --out {tmp_path / where}: {said}" in refused.stderr
    assert not (tmp_path / "s.db").exists()  # no session, no model call


def test_an_image_given_with_file_goes_with_the_question(tmp_path: Path) -> None:
    (tmp_path / "photo.png").write_bytes(CHART)
    path = tmp_path / "replies.json"
    path.write_text(json.dumps([" I read the note.\nFinal Answer: a picture"]))
    db = str(tmp_path / "s.db")
    done = reactchat(
        "ask", "What is it?", "--file", "photo.png", "--model", f"scripted:{path}", "--db", db, "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    session = json.loads(done.stdout)["session"]
    shown = reactchat("show", session, "--db", db, "--json", cwd=tmp_path)
    assert '"photo.png"' in shown.stdout, shown.stdout[:2000]
    (tmp_path / "bomb.png").write_bytes(png(100_000, 100_000, rows=1))
    refused = reactchat(
        "ask", "And this?", "--file", "bomb.png", "--model", f"scripted:{path}", "--db", db, cwd=tmp_path
    )
    assert refused.returncode == 1 and "image 'bomb.png' refused: 100000x100000 pixels" in refused.stderr
