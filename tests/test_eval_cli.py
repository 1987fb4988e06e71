"""``reactchat eval``: the summary, the result file, the CI gate and the comparison."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactchat.cli.main import main

CASES = [
    {"id": "markup", "input": "80.16 plus 15%?", "expected": 92.184, "tags": ["math"]},
    {"id": "city", "input": "Which city is the capital of France?", "expected": "Paris", "scorer": "contains"},
    {"id": "sum", "input": "2 + 2?", "expected": 5, "tags": ["math"]},
]
REPLIES = [
    ' A markup.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',
    " Done.\nFinal Answer: 92.184",
    " Known.\nFinal Answer: Paris",
    " Easy.\nFinal Answer: 4",
]


def eval_files(tmp_path: Path) -> tuple[Path, str]:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in CASES), encoding="utf-8")
    (tmp_path / "replies.txt").write_text("\n---\n".join(REPLIES), encoding="utf-8")
    return cases, f"scripted:{tmp_path / 'replies.txt'}"


def test_eval_prints_the_summary_writes_the_result_and_stores_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases, model = eval_files(tmp_path)
    db, out = str(tmp_path / "s.db"), tmp_path / "result.json"
    # one at a time: the scripted replies are served in order
    code = main(["eval", str(cases), "--model", model, "--db", db, "--concurrency", "1", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "3/3, 1 failed" in printed.err  # the progress bar
    assert printed.out.startswith("passed 2/3 (66.7%)") and "cost $0.0000" in printed.out
    assert "  math: 1/2" in printed.out
    result = json.loads(out.read_text(encoding="utf-8"))
    assert (result["passed"], result["total"]) == (2, 3)
    failed = result["cases"][2]
    assert set(failed) >= {"id", "passed", "answer", "session", "seconds", "usage"}
    assert (failed["id"], failed["passed"], failed["answer"]) == ("sum", False, "4")
    assert f"FAIL sum: answer '4' (reactchat show {failed['session']})" in printed.out
    # the failed case can be read back
    assert main(["show", failed["session"], "--db", db]) == 0
    tree = capsys.readouterr().out
    assert "2 + 2?" in tree and "4" in tree


def test_min_pass_gates_and_against_reports_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, model = eval_files(tmp_path)
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps(
            {
                "passed": 2,
                "total": 3,
                "cases": [
                    {"id": "markup", "passed": False},
                    {"id": "sum", "passed": True},
                    {"id": "gone", "passed": True},
                ],
            }
        ),
        encoding="utf-8",
    )
    db = str(tmp_path / "s.db")
    args = ["eval", str(cases), "--model", model, "--db", db, "--concurrency", "1", "--against", str(old)]
    assert main([*args, "--min-pass", "0.9"]) == 1
    printed = capsys.readouterr()
    assert "below --min-pass 0.9: 66.7% passed" in printed.err
    assert "now pass (1): markup" in printed.out and "now fail (1): sum" in printed.out
    assert "new (1): city" in printed.out and "gone (1): gone" in printed.out
    assert main([*args[:-2], "--min-pass", "0.6"]) == 0


def test_a_bad_cases_file_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, model = eval_files(tmp_path)
    cases.write_text(
        cases.read_text(encoding="utf-8") + '{"id": "x", "input": "q", "scorer": "fuzzy"}\n', encoding="utf-8"
    )
    db = tmp_path / "s.db"
    assert main(["eval", str(cases), "--model", model, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert f"{cases}:4: unknown scorer 'fuzzy'" in err and "no case was run" in err
    assert main(["sessions", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_min_pass_must_be_a_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, model = eval_files(tmp_path)
    with pytest.raises(SystemExit) as exit:
        main(["eval", str(cases), "--model", model, "--min-pass", "80"])
    assert exit.value.code == 2 and "share between 0 and 1" in capsys.readouterr().err


def test_the_installed_command_finds_a_python_scorer_in_the_current_directory(tmp_path: Path) -> None:
    """``reactchat`` (the installed script, not ``python -m``) does not put the current
    directory on the path: a ``python:myscorers:check`` scorer there must still be found."""
    cases, model = eval_files(tmp_path)
    (tmp_path / "myscorers.py").write_text(
        "def shouts(answer, case):\n    return answer.isupper() == case.expected\n", encoding="utf-8"
    )
    line = {"id": "loud", "input": "2 + 2?", "expected": False, "scorer": "python:myscorers:shouts"}
    cases.write_text(json.dumps(line) + "\n", encoding="utf-8")
    launcher = tmp_path / "bin" / "reactchat"  # what pip writes for the console script
    launcher.parent.mkdir()
    launcher.write_text("import sys\nfrom reactchat.cli import main\nsys.exit(main())\n", encoding="utf-8")
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    command = [sys.executable, str(launcher), "eval", "cases.jsonl", "--model", model, "--db", "s.db"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("passed 1/1")
