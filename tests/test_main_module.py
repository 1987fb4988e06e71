"""``python -m reactchat`` is the ``reactchat`` command: same parser, same exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import reactchat

#: the reactchat under test, for the child process (its environment is otherwise empty)
SOURCE = str(Path(reactchat.__file__).resolve().parents[1])


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1", "PYTHONPATH": SOURCE}
    return subprocess.run(
        [sys.executable, "-m", "reactchat", *args], capture_output=True, text=True, cwd=cwd, timeout=60, env=env
    )


def test_python_m_reactchat_runs_the_command(tmp_path: Path) -> None:
    helped = run("--help", cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: reactchat ") and "ask" in helped.stdout

    replies = tmp_path / "replies.txt"
    replies.write_text(' I must ask.\nAction: ask_user\nAction Input: {"question": "Where are you?"}', encoding="utf-8")
    db = str(tmp_path / "s.db")
    waiting = run("ask", "How far is Paris?", "--model", f"scripted:{replies}", "--db", db, "--json", cwd=tmp_path)
    assert waiting.returncode == 3, waiting.stderr  # the command's "waiting for the user" status
    assert json.loads(waiting.stdout)["question"] == "Where are you?"
