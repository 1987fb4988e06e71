"""SIGTERM drains a real ``reactchat serve`` process: new turns get 503 with Retry-After,
the running turn finishes, and past the deadline a turn is left for another worker."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx

from reactchat.cli.main import parser
from test_health import serve_process

SLOW_TOOL = '''
import asyncio
from reactchat import tool

@tool
async def slow(seconds: float) -> str:
    """Wait, then say so."""
    await asyncio.sleep(seconds)
    return "waited"
'''


def _script(tmp_path: Path, seconds: float) -> str:
    (tmp_path / "slowtools.py").write_text(SLOW_TOOL, encoding="utf-8")
    replies = [
        f'Thought: wait first\nAction: slow\nAction Input: {{"seconds": {seconds}}}',
        "Thought: done\nFinal Answer: finished after the wait",
    ]
    (tmp_path / "script.json").write_text(json.dumps(replies), encoding="utf-8")
    return "scripted:script.json"


def _turn(url: str, session: str, lines: list[str], started: threading.Event) -> None:
    try:
        with httpx.stream("POST", f"{url}/v1/sessions/{session}/messages", json={"message": "go"}, timeout=60) as reply:
            for line in reply.iter_lines():
                lines.append(line)
                if line == "event: action":
                    started.set()
    except httpx.TransportError:  # the server stopped mid-turn: what the second test wants
        lines.append("cut")


def _session(url: str) -> str:
    created = httpx.post(f"{url}/v1/sessions")
    assert created.status_code in (200, 201), created.text
    session: str = created.json()["session"]
    return session


def test_sigterm_refuses_new_turns_and_lets_the_running_one_finish(tmp_path: Path) -> None:
    model = _script(tmp_path, 2.0)
    flags = ("--db", str(tmp_path / "s.db"), "--model", model, "--tools", "slowtools:slow")
    with serve_process(tmp_path, *flags) as (url, process):
        session, other = _session(url), _session(url)
        lines: list[str] = []
        started = threading.Event()
        turn = threading.Thread(target=_turn, args=(url, session, lines, started))
        turn.start()
        assert started.wait(30), lines
        process.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        refused = httpx.post(f"{url}/v1/sessions/{other}/messages", json={"message": "hi"})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "2", refused.text
        assert httpx.get(f"{url}/readyz").status_code == 503
        assert httpx.get(f"{url}/healthz").status_code == 200
        turn.join(30)
        assert any("finished after the wait" in line for line in lines), lines
        assert process.wait(15) == 0


def test_past_the_deadline_the_turn_is_left_interrupted_for_another_worker(tmp_path: Path) -> None:
    model = _script(tmp_path, 60.0)
    flags = ("--db", str(tmp_path / "s.db"), "--model", model, "--tools", "slowtools:slow")
    with serve_process(tmp_path, *flags, env={"REACTCHAT_DRAIN_SECONDS": "1"}) as (url, process):
        session = _session(url)
        started = threading.Event()
        threading.Thread(target=_turn, args=(url, session, [], started), daemon=True).start()
        assert started.wait(30)
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(20)
        assert time.monotonic() - began < 10
    with serve_process(tmp_path, *flags) as (url, _):
        view = httpx.get(f"{url}/v1/sessions/{session}").json()
        assert view["turns"][-1]["status"] == "interrupted", view  # not cancelled: it is finished later


DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def test_the_units_command_lines_parse_and_the_environment_is_read() -> None:
    for unit in ("reactchat@.service", "reactchat-worker@.service"):
        line = next(x for x in (DEPLOY / unit).read_text().splitlines() if x.startswith("ExecStart="))
        argv = line.split("bin/reactchat", 1)[1].replace("%i", "8001").split()
        assert parser().parse_args(argv).command in ("serve", "worker")
    names = [x.split("=", 1)[0].lstrip("# ") for x in (DEPLOY / "reactchat.env").read_text().splitlines() if "=" in x]
    source = "\n".join(p.read_text() for p in (Path(__file__).resolve().parents[1] / "src").rglob("*.py"))
    unread = [n for n in names if n.startswith("REACTCHAT_") and f'"{n}"' not in source]
    assert unread == []
