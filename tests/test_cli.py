"""The reactchat command, run as a user runs it: a subprocess with real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def reactchat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1"},
    )


def write_script(path: Path, *replies: str) -> str:
    path.write_text("\n---\n".join(replies), encoding="utf-8")
    return f"scripted:{path}"


def test_ask_prints_the_trace_and_the_answer(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "replies.txt",
        ' I need a 15% markup.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',
        " I now know the final answer.\nFinal Answer: 92.184",
    )
    done = reactchat("ask", "80.16 plus 15%?", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Action: calculator" in done.stdout and "Observation: 92.184" in done.stdout
    assert done.stdout.rstrip().endswith("Final Answer: 92.184")


def test_ask_waits_with_exit_3_and_resumes_in_another_process(tmp_path: Path) -> None:
    db = str(tmp_path / "sessions.db")
    first = write_script(
        tmp_path / "first.txt",
        ' I need to know where the user is.\nAction: ask_user\nAction Input: {"question": "Where are you?"}',
    )
    waiting = reactchat("ask", "How far is Paris?", "--model", first, "--db", db, "--json", cwd=tmp_path)
    assert waiting.returncode == 3, waiting.stderr
    state = json.loads(waiting.stdout)
    assert state["status"] == "waiting" and state["question"] == "Where are you?"

    second = write_script(tmp_path / "second.txt", " The user is in Lyon.\nFinal Answer: Paris is 465 km from Lyon.")
    done = reactchat(
        "ask", "Lyon", "--session", state["session"], "--model", second, "--db", db, "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "Paris is 465 km from Lyon." and result["turn"] == state["turn"]
    assert [s["tool"] for s in result["steps"]] == ["ask_user", None]
    assert result["steps"][0]["observation"] == "Lyon"


def test_waiting_message_names_the_session(tmp_path: Path) -> None:
    model = write_script(tmp_path / "r.txt", ' x\nAction: ask_user\nAction Input: {"question": "Which city?"}')
    out = reactchat("ask", "Weather?", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
    assert out.returncode == 3
    assert "Which city?" in out.stdout and "reactchat ask --session " in out.stdout


def test_guard_stop_exits_4(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "r.txt",
        ' a\nAction: calculator\nAction Input: {"expression": "1+1"}',
        " Best effort: 2.",
    )
    out = reactchat("ask", "1+1", "--model", model, "--db", str(tmp_path / "s.db"), "--max-steps", "1", cwd=tmp_path)
    assert out.returncode == 4 and "stopped: max_steps" in out.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["ask", "x", "--model", "nonsense"], 1, "unknown model spec 'nonsense'"),
        (["ask", "x", "--model", "scripted:/does/not/exist.txt"], 1, "cannot read the scripted replies file"),
        (["ask", "x", "--max-steps", "zero"], 2, "expected a positive integer"),
        (["ask"], 2, "the following arguments are required: question"),
        (["fly"], 2, "invalid choice"),
        (["ask", "x", "--session", "nope", "--model", "scripted:/dev/null"], 1, "no session 'nope'"),
    ],
)
def test_bad_flags_get_clear_errors(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    out = (
        reactchat(*args, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
        if args[0] == "ask" and len(args) > 1
        else (reactchat(*args, cwd=tmp_path))
    )
    assert out.returncode == code
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_a_model_failure_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    model = write_script(tmp_path / "short.txt", ' x\nAction: calculator\nAction Input: {"expression": "1+1"}')
    out = reactchat("ask", "1+1?", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
    assert out.returncode == 1
    assert "reactchat: error: ScriptedModel has no reply left" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_command_and_the_server_share_one_default_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reactchat.cli.main import parser
    from reactchat.store import store_url

    monkeypatch.delenv("REACTCHAT_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    expected = f"sqlite:///{tmp_path / 'reactchat' / 'sessions.db'}"
    assert store_url(None) == expected  # what `serve(db=None)` and `app_from_env()` open
    for command in (["ask", "q"], ["chat"], ["serve"]):
        assert store_url(parser().parse_args(command).db) == expected
    monkeypatch.setenv("REACTCHAT_DB", "postgresql://db.example/chat")
    assert store_url(None) == "postgresql://db.example/chat"
