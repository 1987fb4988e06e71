"""``reactchat chat`` in a real terminal (a pty), and the model's unreadable replies shown
in the live trace and in ``reactchat show``."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.cli.main import Trace
from reactchat.cli.report import session_tree

ASK = ' I need to know where the user is.\nAction: ask_user\nAction Input: {"question": "Where are you?"}'
DISTANCE = ' I compute it.\nAction: calculator\nAction Input: {"expression": "400 + 65"}'
FINAL = " I know it.\nFinal Answer: Paris is 465 km from Lyon."
UNREADABLE = "I think the answer is probably somewhere " + "around here " * 30


class Terminal:
    """``reactchat chat`` on a pty, read as a person sees it."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.master, slave = pty.openpty()
        env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1", "TERM": "xterm"}
        env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reactchat.cli", "chat", *args],
            stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, close_fds=True,
        )  # fmt: skip
        os.close(slave)
        self.seen = ""

    def expect(self, text: str, timeout: float = 60) -> str:
        """Read until ``text`` has appeared; returns everything read so far."""
        deadline = time.monotonic() + timeout
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} did not appear; the terminal shows:\n{self.seen}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096).decode("utf-8", "replace")
                except OSError:  # the process ended and closed the terminal
                    raise AssertionError(f"{text!r} did not appear; the terminal shows:\n{self.seen}") from None
        return self.seen

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> int:
        code = self.process.wait(timeout=30)
        os.close(self.master)
        return code


def script(path: Path, *replies: str) -> str:
    path.write_text("\n---\n".join(replies), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def chat(tmp_path: Path):  # type: ignore[no-untyped-def]
    started: list[Terminal] = []

    def start(*replies: str) -> Terminal:
        model = script(tmp_path / "replies.txt", *replies)
        terminal = Terminal("--model", model, "--db", str(tmp_path / "s.db"), cwd=tmp_path)
        started.append(terminal)
        return terminal

    yield start
    for terminal in started:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.close()


def test_help_and_unknown_commands_list_the_commands_and_never_reach_the_model(chat) -> None:  # type: ignore[no-untyped-def]
    term = chat()  # no scripted reply: a message sent to the model would be an error
    term.expect("you> ")
    term.type("/help")
    term.expect("/help lists these")
    term.type("/frobnicate")
    seen = term.expect("/frobnicate is not a command. Commands: /new")
    term.type("/quit")
    term.expect("resume with:")
    assert term.close() == 0
    assert "error" not in seen.lower()


def test_the_prompt_says_when_a_line_answers_the_question_and_history_shows_both(chat, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    term = chat(ASK, DISTANCE, FINAL)
    start = term.expect("you> ")
    session = start.split("session ", 1)[1].split()[0]
    term.type("How far is Paris?")
    term.expect("Question for you: Where are you?")
    term.expect("answer> ")
    term.type("Lyon")
    term.expect("Final Answer: Paris is 465 km from Lyon.")
    term.expect("you> ")
    term.type("/history")
    seen = term.expect("agent: Paris is 465 km from Lyon.")
    history = seen.rsplit("/history", 1)[1].replace("\r\n", "\n")
    assert "you: How far is Paris?\nagent asked: Where are you?\nyou answered: Lyon\nagent: Paris" in history
    term.type("/quit")
    seen = term.expect(f"resume with: reactchat chat --db {tmp_path / 's.db'} --session {session}")
    assert term.close() == 0


def test_ctrl_d_ends_the_line_and_prints_the_session_to_resume(chat) -> None:  # type: ignore[no-untyped-def]
    term = chat()
    start = term.expect("you> ")
    session = start.split("session ", 1)[1].split()[0]
    os.write(term.master, b"\x04")  # Ctrl-D on an empty line
    seen = term.expect(f"--session {session}")
    assert term.close() == 0
    assert f"you> \r\nsession {session} · resume with" in seen


def test_the_spinner_is_cleared_before_an_error(chat) -> None:  # type: ignore[no-untyped-def]
    term = chat()  # the model has no reply: the turn fails with a model error
    term.expect("you> ")
    term.type("hello")
    seen = term.expect("ScriptedModel has no reply left")
    term.expect("you> ")
    before = seen[: seen.index("error: ")]
    assert before.endswith("\r\x1b[K"), repr(before[-40:])
    term.type("/quit")
    assert term.close() == 0


# ------------------------------------------------------------------ unreadable replies


async def test_the_trace_and_show_print_what_the_model_wrote_when_it_could_not_be_read() -> None:
    agent = Agent(model=ScriptedModel([UNREADABLE, " Done.\nFinal Answer: here"]))
    out = io.StringIO()
    trace = Trace(out, io.StringIO())
    async for event in agent.stream("Where?"):
        trace.show(event)
        session = event.session
    live = out.getvalue()
    shown = " ".join(UNREADABLE.split())[:199] + "…"
    assert "Format error, correction sent: " in live
    assert f"\n  the model wrote: {shown}\n" in live
    tree = session_tree(await agent.state(session))
    assert "Format error, correction sent: " in tree and f"the model wrote: {shown}" in tree
