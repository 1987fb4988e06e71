"""Uploaded files on the command line, run as a user runs it: a subprocess with real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROSES = "# Market\n\nA bouquet of roses costs 80.16 dollars on average.\n"
SEARCH = ' I should read the file.\nAction: search_files\nAction Input: {"query": "roses price"}'


def reactchat(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reactchat.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        input=stdin,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1"},
    )


def script(path: Path, *replies: str) -> str:
    path.write_text("\n---\n".join(replies), encoding="utf-8")
    return f"scripted:{path}"


def test_ask_with_a_file_cites_it(tmp_path: Path) -> None:
    (tmp_path / "roses.md").write_text(ROSES)
    model = script(tmp_path / "r.txt", SEARCH, " Found it.\nFinal Answer: 80.16 dollars")
    db = str(tmp_path / "s.db")
    done = reactchat("ask", "How much are roses?", "--file", "roses.md", "--model", model, "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "(added roses.md (markdown" in done.stdout and "4 of 5 rounds left" not in done.stdout
    assert "roses.md · § Market · line 3" in done.stdout
    assert done.stdout.rstrip().endswith("Final Answer: 80.16 dollars")


def test_ask_with_json_keeps_stdout_json_and_counts_the_round(tmp_path: Path) -> None:
    (tmp_path / "roses.md").write_text(ROSES)
    model = script(tmp_path / "r.txt", SEARCH, " Found it.\nFinal Answer: 80.16")
    db = str(tmp_path / "s.db")
    args = ("--model", model, "--db", db, "--json", "--retention", "1")
    done = reactchat("ask", "Roses?", "--file", "roses.md", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "80.16" in result["steps"][0]["observation"]
    # retention 1: the file is gone after that turn, so the next turn has no search_files
    model2 = script(tmp_path / "r2.txt", SEARCH, " ok\nFinal Answer: gone")
    again = reactchat(
        "ask", "Roses again?", "--session", result["session"], "--model", model2, "--db", db, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    assert "There is no tool named 'search_files'" in again.stdout


def test_a_rejected_file_is_an_error_and_nothing_runs(tmp_path: Path) -> None:
    (tmp_path / "fake.pdf").write_text("not a pdf")
    model = script(tmp_path / "r.txt", " x\nFinal Answer: should not run")
    done = reactchat("ask", "q", "--file", "fake.pdf", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 1
    assert "fake.pdf: named .pdf but it is not a PDF" in done.stderr
    assert "should not run" not in done.stdout
    missing = reactchat(
        "ask", "q", "--file", "nope.txt", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path
    )
    assert missing.returncode == 1 and "nope.txt: cannot read the file" in missing.stderr


def test_chat_upload_files_and_clear(tmp_path: Path) -> None:
    (tmp_path / "roses.md").write_text(ROSES)
    model = script(tmp_path / "r.txt", SEARCH, " Found it.\nFinal Answer: 80.16 dollars")
    lines = (
        "/files\n/upload roses.md\n/upload ../secret.txt\n/files\nHow much are roses?\n/files\n/clear\n/files\n/quit\n"
    )
    done = reactchat("chat", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path, stdin=lines)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("(no files: /upload PATH adds one)") == 2
    assert "(added roses.md (markdown, 61 bytes, 1 chunk, 5 of 5 rounds left))" in out
    assert "not added: ../secret.txt: cannot read the file" in done.stderr
    assert "roses.md · § Market" in out and "Final Answer: 80.16 dollars" in out
    assert "  roses.md (markdown, 61 bytes, 1 chunk, 4 of 5 rounds left)" in out
    assert "(forgot 1 file)" in out
