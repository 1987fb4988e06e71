"""`reactchat sessions` and `reactchat show` on sessions stored by real runs (SQLite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.cli.main import main
from reactchat.toolbox import calculator

ACT = ' I need a 15% markup.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}'
ASK = ' I need the city.\nAction: ask_user\nAction Input: {"question": "Which city?"}'


def stored_sessions(db: Path) -> tuple[str, str]:
    """Two sessions: a finished two-step turn, and a turn waiting on a question."""
    agent = Agent(
        model=ScriptedModel([ACT, " I know it.\nFinal Answer: It costs **92.184** euros.", ASK]),
        tools=[calculator],
        store=f"sqlite:///{db}",
    )
    done = agent.run("What is 80.16 plus 15%?")
    waiting = agent.run("How far is Paris?")
    assert done.status == "done" and waiting.status == "waiting"
    return done.session, waiting.session


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_sessions_lists_newest_first_with_status_turns_and_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    done, waiting = stored_sessions(db)
    code, out, _ = run(capsys, "sessions", "--db", str(db))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "STARTED", "STATUS", "TURNS"]
    assert lines[1].startswith(waiting) and "waiting" in lines[1] and "How far is Paris?" in lines[1]
    assert lines[2].startswith(done) and " done " in lines[2] and "What is 80.16 plus 15%?" in lines[2]

    code, out, _ = run(capsys, "sessions", "--db", str(db), "--json", "--limit", "1")
    listed = json.loads(out)
    assert [s["session"] for s in listed] == [waiting]
    assert listed[0]["turns"] == 1 and listed[0]["status"] == "waiting"


def test_show_prints_the_turn_as_a_tree_with_timings_and_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    done, _ = stored_sessions(db)
    code, out, _ = run(capsys, "show", done, "--db", str(db))
    assert code == 0
    assert out.startswith(f"Session {done}")
    assert "Turn 1 · done" in out
    lines = out.splitlines()
    action = next(i for i, line in enumerate(lines) if "Action: calculator" in line)
    observation = lines[action + 1]
    # the observation is nested one level under its action
    assert observation.strip().startswith("Observation: 92.184")
    assert len(observation) - len(observation.lstrip()) > len(lines[action]) - len(lines[action].lstrip())
    assert "Final Answer: It costs **92.184** euros." in out
    # the scripted model is free, and says so
    assert "$0" in out


def test_show_json_has_every_event_and_usage_equal_to_the_sum_of_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    done, _ = stored_sessions(db)
    code, out, _ = run(capsys, "show", done, "--db", str(db), "--json")
    assert code == 0
    view = json.loads(out)
    assert view["session"] == done and view["status"] == "done"
    (turn,) = view["turns"]
    types = [e["type"] for e in turn["events"]]
    assert types == ["user", "thought", "action", "observation", "answer"]
    calls = [e["usage"] for e in turn["events"] if e.get("usage")]
    assert turn["usage"]["calls"] == len(calls) == 2
    assert turn["usage"]["input_tokens"] == sum(c["input_tokens"] for c in calls)
    assert turn["usage"]["output_tokens"] == sum(c["output_tokens"] for c in calls)
    assert view["usage"]["input_tokens"] == turn["usage"]["input_tokens"]


def test_show_markdown_exports_question_steps_and_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    done, _ = stored_sessions(db)
    code, out, _ = run(capsys, "show", done, "--db", str(db), "--markdown")
    assert code == 0
    assert out.startswith(f"# Session {done}\n")
    assert "## Turn 1: What is 80.16 plus 15%?" in out
    assert '- Action: calculator {"expression": "80.16 * 1.15"}' in out
    assert out.rstrip().endswith("It costs **92.184** euros.")


def test_show_an_unknown_session_says_how_to_find_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    stored_sessions(db)
    code, out, err = run(capsys, "show", "nope", "--db", str(db))
    assert code == 1 and out == ""
    assert "no session 'nope'" in err and "reactchat sessions" in err


def test_ask_json_reports_the_turn_s_usage_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "replies.txt"
    script.write_text(f"{ACT}\n---\n I know it.\nFinal Answer: 92.184", encoding="utf-8")
    code, out, _ = run(
        capsys, "ask", "80.16 plus 15%?", "--model", f"scripted:{script}", "--db", str(tmp_path / "s.db"), "--json"
    )
    assert code == 0
    usage = json.loads(out)["usage"]
    assert usage["calls"] == 2 and usage["cost"] == 0 and usage["output_tokens"] > 0
