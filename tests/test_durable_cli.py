"""The command line on both durable stores: ``--db`` (a file or a URL) and ``REACTCHAT_DB``;
``reactchat ask`` waits with exit 3 and resumes in another process; ``reactchat chat``
answers ask_user inline and keeps its history across processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ASK = ' I need to know where the user is.\nAction: ask_user\nAction Input: {"question": "Where are you?"}'
DISTANCE = ' The user is in Lyon.\nAction: calculator\nAction Input: {"expression": "392 + 73"}'
FINAL = " I know it now.\nFinal Answer: Paris is 465 km from Lyon."


def reactchat(*args: str, cwd: Path, db: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command; a postgresql:// store goes through REACTCHAT_DB, a file through --db."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1"}
    flags = list(args)
    if db.startswith("postgresql://"):
        env["REACTCHAT_DB"] = db
    else:
        flags += ["--db", db]
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *flags],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env=env,
        input=stdin,
    )


def script(path: Path, *replies: str) -> str:
    path.write_text("\n---\n".join(replies), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def db(durable_url: str) -> str:
    """What a user passes: a file path for SQLite, the URL for PostgreSQL."""
    return durable_url.removeprefix("sqlite:///") if durable_url.startswith("sqlite:") else durable_url


def test_ask_waits_then_resumes_in_another_process(db: str, tmp_path: Path) -> None:
    waiting = reactchat("ask", "How far is Paris?", "--model", script(tmp_path / "1", ASK), cwd=tmp_path, db=db)
    assert waiting.returncode == 3, waiting.stderr
    assert "The agent asks: Where are you?" in waiting.stdout
    session = waiting.stdout.split("--session ", 1)[1].split()[0]

    second = script(tmp_path / "2", DISTANCE, FINAL)
    done = reactchat("ask", "Lyon", "--session", session, "--model", second, "--json", cwd=tmp_path, db=db)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "Paris is 465 km from Lyon."
    assert [(s["tool"], s["observation"]) for s in result["steps"]] == [
        ("ask_user", "Lyon"),
        ("calculator", "465"),
        (None, None),
    ]

    unknown = reactchat("ask", "Lyon", "--session", "no-such-session", "--model", second, cwd=tmp_path, db=db)
    assert unknown.returncode == 1
    assert "no-such-session" in unknown.stderr


def test_chat_answers_inline_and_keeps_history(db: str, tmp_path: Path) -> None:
    model = script(tmp_path / "chat", ASK, DISTANCE, FINAL, " Easy.\nFinal Answer: 4")
    lines = ["How far is Paris?", "Lyon", "What is 2+2?", "/history", "/quit"]
    out = reactchat("chat", "--model", model, cwd=tmp_path, db=db, stdin="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr
    assert "Question for you: Where are you?" in out.stdout
    assert "Observation: 465" in out.stdout
    assert "Final Answer: Paris is 465 km from Lyon." in out.stdout
    assert (
        "you: How far is Paris?\nagent asked: Where are you?\nyou answered: Lyon\nagent: Paris is 465 km from Lyon."
        in out.stdout
    )
    assert "you: What is 2+2?\nagent: 4" in out.stdout
    assert "you: Lyon" not in out.stdout  # an answer to ask_user is not a question of the history


def test_chat_new_starts_a_fresh_session(db: str, tmp_path: Path) -> None:
    model = script(tmp_path / "chat", " Easy.\nFinal Answer: 4", " Easy.\nFinal Answer: 6")
    lines = ["What is 2+2?", "/new", "/history", "What is 3+3?", "/history", "/quit"]
    out = reactchat("chat", "--model", model, cwd=tmp_path, db=db, stdin="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stderr
    after_new = out.stdout.split("(new session)", 1)[1]
    assert "(no messages yet)" in after_new
    assert "you: What is 3+3?\nagent: 6" in after_new
    assert "What is 2+2?" not in after_new


def test_postgres_url_in_db_flag(postgres_url: str, tmp_path: Path) -> None:
    """--db also takes the URL; an unreachable server is a clear error, not a traceback."""
    env_free = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    model = script(tmp_path / "m", " Easy.\nFinal Answer: 4")
    ok = subprocess.run(
        [sys.executable, "-m", "reactchat.cli", "ask", "2+2?", "--model", model, "--db", postgres_url],
        capture_output=True,
        text=True,
        env=env_free,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "reactchat.cli",
            "ask",
            "2+2?",
            "--model",
            model,
            "--db",
            "postgresql://x@127.0.0.1:1/db",
        ],
        capture_output=True,
        text=True,
        env=env_free,
        timeout=60,
    )
    assert bad.returncode == 1
    assert "cannot connect to PostgreSQL" in bad.stderr
    assert "Traceback" not in bad.stderr
