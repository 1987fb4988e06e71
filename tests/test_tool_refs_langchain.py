"""``--tools module:name`` naming LangChain tools, from a module in the current directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reactchat.cli.tool_refs import tools_by_reference

# langchain-core's own tools, built as a toolkit's get_tools() returns them
LANGCHAIN_MODULE = '''
from langchain_core.tools import StructuredTool, tool


@tool
def petal_count(flower: str) -> int:
    """How many petals a flower has."""
    return {"lily": 6, "rose": 5}.get(flower, 0)


def _colour(flower: str) -> str:
    return {"lily": "white"}.get(flower, "unknown")


colour = StructuredTool.from_function(_colour, name="colour", description="The colour of a flower.")
toolkit = [petal_count, colour]
'''


def call(name: str, arguments: dict[str, object]) -> str:
    return f" I use {name}.\nAction: {name}\nAction Input: {json.dumps(arguments)}"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding ``garden.py`` that is the current directory but not on the path."""
    (tmp_path / "garden.py").write_text(LANGCHAIN_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "garden", raising=False)
    return tmp_path


def test_a_langchain_tool_and_a_toolkit_by_reference_from_the_current_directory(here: Path) -> None:
    found = tools_by_reference("garden:petal_count,garden:toolkit")
    assert [type(item).__name__ for item in found] == ["StructuredTool", "StructuredTool", "StructuredTool"]
    assert [item.name for item in found] == ["petal_count", "petal_count", "colour"]


def test_the_reactchat_script_runs_langchain_tools_from_the_current_directory(here: Path) -> None:
    replies = [
        call("petal_count", {"flower": "lily"}),
        call("colour", {"flower": "lily"}),
        " Done.\nFinal Answer: six, white",
    ]
    (here / "r.txt").write_text("\n---\n".join(replies), encoding="utf-8")
    script = Path(sys.executable).parent / "reactchat"  # the console script: no cwd on its path
    done = subprocess.run(
        [str(script), "ask", "go", "--model", f"scripted:{here / 'r.txt'}", "--db", str(here / "s.db"),
         "--json", "--tools", "garden:toolkit"],
        capture_output=True, text=True, cwd=here, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(here), "NO_COLOR": "1",
             "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [s["observation"] for s in steps[:2]] == ["6", "white"]
