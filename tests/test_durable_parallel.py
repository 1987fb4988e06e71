"""A SIGKILL in the middle of a parallel group of three tool calls (native protocol), resumed
from another process, on SQLite and PostgreSQL.

The child's one model reply calls a ``read`` tool, an ``idempotent`` one and an ``unsafe``
one at once. The first call of the group returns at once; the other two have had their
effect (a line in the side-effect log) and are still running when the parent kills the
process. Resumed here, each call follows its class: the finished one keeps its recorded
result and never runs again, the ``read`` or ``idempotent`` one in flight runs again, the
``unsafe`` one is in doubt and runs again only if the user says ``retry``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from durable_support import parse_child, stored
from parallel_child import make_agent
from reactchat import Agent, RunResult, SessionBusy
from reactchat.messages import ActionEvent, Event, ObservationEvent, QuestionEvent
from reactchat.store import resolve_store

CHILD = str(Path(__file__).with_name("parallel_child.py"))


def runs(effects: Path) -> Counter[str]:
    """How many times each tool ran (tool name → count), from the side-effect log."""
    return Counter(line.split()[1] for line in effects.read_text().splitlines())


async def killed_in_the_group(url: str, calls: list[str], effects: Path) -> tuple[str, list[Event]]:
    """Run the group in a child; SIGKILL it once the first call's result is durable and the
    other two are inside their tools, after their effect. The session and what it reported."""
    store = resolve_store(url)
    session = await store.create_session()
    await store.close()
    held = ",".join(calls[1:])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        CHILD,
        url,
        session,
        "Do all three.",
        "--effects",
        str(effects),
        "--calls",
        ",".join(calls),
        "--hold",
        held,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    out = ""
    while '"type":"observation"' not in out.replace(" ", ""):  # the first call's result, durable
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line, "the child ended before the first call of the group returned"
        out += line
    for _ in range(500):  # and the other two calls inside their tools
        if effects.exists() and len(effects.read_text().splitlines()) == 3:
            break
        await asyncio.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    rest, err = await proc.communicate()
    child = parse_child(proc.returncode, out + rest.decode(), err.decode())
    assert child.code == -9, f"the child was not killed: {err.decode()}"
    assert runs(effects) == Counter(calls), "every call of the group had its effect before the kill"
    return session, child.events


async def resume_when_free(agent: Agent, session: str) -> RunResult:
    """``agent.resume``, retried while the dead process's lock is being released (PostgreSQL)."""
    for _ in range(250):
        with contextlib.suppress(SessionBusy):
            return await agent.resume(session)
        await asyncio.sleep(0.02)
    raise AssertionError(f"session {session} stayed busy after its process died")


@pytest.mark.parametrize(
    ("calls", "reply"),
    [(["look", "pay", "put"], "skip"), (["put", "look", "pay"], "retry")],
    ids=["read-done-idempotent-reruns-unsafe-skipped", "idempotent-done-read-reruns-unsafe-retried"],
)
async def test_a_sigkill_in_a_parallel_group_leaves_each_call_to_its_effect_class(
    durable_url: str, tmp_path: Path, calls: list[str], reply: str
) -> None:
    effects = tmp_path / "effects"
    session, reported = await killed_in_the_group(durable_url, calls, effects)
    before = await stored(durable_url, session)
    assert before[: len(reported)] == reported  # every event the child reported survived it
    actions = [e for e in before if isinstance(e, ActionEvent)]
    assert [a.tool for a in actions] == calls  # the whole group recorded before any call ran
    finished = [e for e in before if isinstance(e, ObservationEvent)]
    assert [o.tool for o in finished] == calls[:1]

    agent = make_agent(durable_url, calls, str(effects))  # another process, no tool held
    waiting = await resume_when_free(agent, session)
    assert waiting.status == "waiting" and waiting.pending is not None
    assert (waiting.pending.kind, waiting.pending.tool, waiting.pending.input) == ("in_doubt", "pay", {"key": "pay"})
    assert runs(effects)["pay"] == 1  # in doubt: not run again by itself
    await agent.store.close()

    answering = make_agent(durable_url, calls, str(effects))  # and the reply from a third
    done = await answering.arun(reply, session)
    assert done.status == "done", done
    events = await answering.store.events(session)
    await answering.store.close()
    assert events[: len(before)] == before
    observed = {e.tool: e for e in events if isinstance(e, ObservationEvent)}
    assert set(observed) == set(calls) and len([e for e in events if isinstance(e, ObservationEvent)]) == 3
    first, rerun = calls[0], next(c for c in calls[1:] if c != "pay")
    assert observed[first] == finished[0]  # the finished call's result kept, as recorded
    assert observed[rerun].text == f"{rerun} done" and not observed[rerun].is_error
    if reply == "retry":
        assert observed["pay"].text == "pay done" and not observed["pay"].is_error
    else:
        assert observed["pay"].is_error and not observed["pay"].interrupted
    # the side-effect log: the finished call once, the read or idempotent one in flight twice,
    # the unsafe one once, twice only because the user said retry
    assert runs(effects) == Counter({first: 1, rerun: 2, "pay": 2 if reply == "retry" else 1})
    questions = [e for e in events if isinstance(e, QuestionEvent)]
    assert [(q.kind, q.call_id) for q in questions] == [("in_doubt", actions[calls.index("pay")].call_id)]
    # the model saw the three results in call order
    assert done.answer is not None
    assert [part.split("=", 1)[0] for part in done.answer.split("; ")] == calls
