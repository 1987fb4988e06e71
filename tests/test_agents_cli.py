"""``reactchat ask --plan``: the plan, each step's run indented under it, the answer."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import reactchat, write_script


def test_ask_plan_prints_the_checklist_and_the_steps_indented(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "replies.txt",
        json.dumps({"steps": [{"task": "compute 80.16 * 1.15"}]}),
        ' Multiply.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',
        " Done.\nFinal Answer: 92.184",
        json.dumps({"action": "answer", "answer": "92.184 with the markup"}),
    )
    done = reactchat("ask", "--plan", "80.16 plus 15%?", "--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["Plan:", "  1. [ ] compute 80.16 * 1.15"]
    assert "  [step 1] Task: compute 80.16 * 1.15" in lines
    assert '  [step 1] Action: calculator {"expression": "80.16 * 1.15"}' in lines
    assert "  [step 1] Observation: 92.184" in lines
    assert "  [step 1] Answer: 92.184" in lines
    assert 'Action: reactchat {"task": "compute 80.16 * 1.15"}' in lines and "Observation: 92.184" in done.stdout
    assert lines[-1] == "Final Answer: 92.184 with the markup"


def test_a_reply_to_a_question_asked_in_a_step_is_shown_as_a_reply(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    asks = write_script(
        tmp_path / "asks.txt",
        json.dumps({"steps": [{"task": "find the distance"}]}),
        ' I need the city.\nAction: ask_user\nAction Input: {"question": "Where are you?"}',
    )
    waiting = reactchat("ask", "--plan", "How far is Paris?", "--model", asks, "--db", db, cwd=tmp_path)
    assert waiting.returncode == 3, waiting.stderr
    assert "  [step 1] Task: find the distance" in waiting.stdout.splitlines()
    hint = waiting.stdout.splitlines()[-1]
    assert hint.startswith("Answer with: reactchat ask --plan --session ")
    session = hint.split("--session ", 1)[1].split()[0]
    goes_on = write_script(
        tmp_path / "goes_on.txt",
        " Lyon to Paris.\nFinal Answer: 465 km",
        json.dumps({"action": "answer", "answer": "465 km from Lyon"}),
    )
    done = reactchat("ask", "--plan", "--session", session, "Lyon", "--model", goes_on, "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  [step 1] Reply: Lyon" in lines and "  [step 1] Task: Lyon" not in lines
    assert lines[-1] == "Final Answer: 465 km from Lyon"
