"""A SIGKILL during compaction leaves the session as it was: the summary's event is
appended only once the summary is made, and the next run compacts and finishes the turn.

    python tests/test_compaction_kill.py URL SESSION   (the child: hangs in its summary call)
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from reactchat import Agent
from reactchat.messages import CompactionEvent, Reply, Request
from test_compaction import SUMMARY, Oracle, known, value


class Hanging(Oracle):
    """Says ``summarising`` on stdout when asked for a summary, then never answers."""

    async def complete(self, request: Request) -> Reply:
        if request.messages[0].content == SUMMARY:
            print("summarising", flush=True)
            await asyncio.sleep(3600)
        return await super().complete(request)


def agent_of(url: str, model: Oracle) -> Agent:
    return Agent(model, store=url, compact_at=0.8, context_tokens=2000, ask_user=False)


async def test_a_sigkill_during_compaction_leaves_the_session_as_it_was(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    agent = Agent(Oracle(), store=url, context_tokens=2000, history_tokens=5000, ask_user=False)
    session = None
    for n in range(1, 101):  # no compaction yet: the history is within its budget
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    assert session is not None
    before = await agent.store.events(session)
    await agent.store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), *sys.path])}
    child = subprocess.Popen(
        [sys.executable, __file__, url, session], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    assert child.stdout is not None
    with child.stdout:
        assert child.stdout.readline().strip() == "summarising"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    oracle = Oracle()
    again = agent_of(url, oracle)
    after = await again.store.events(session)
    # what was stored is intact; no compaction event; only the new turn's message was recorded
    assert [e.model_dump() for e in after[: len(before)]] == [e.model_dump() for e in before]
    assert [e.type for e in after[len(before) :]] == ["user"]
    result = await again.resume(session)
    assert result.status == "done" and result.answer == f"noted: code 101 is {value(101)}"
    events = await again.store.events(session)
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    assert len(compactions) == 1 and compactions[0].turn == 101
    assert all(known(compactions[0].summary)[n] == value(n) for n in range(1, compactions[0].through_turn + 1))
    await again.store.close()
    # two turns later, each read afresh from the file: the summary of an earlier turn is read
    # with the questions and answers, and carried instead of compacting again
    for question in ("what is code 7?", "what is code 5?"):
        oracle = Oracle()
        later = agent_of(url, oracle)
        result = await later.arun(question, session)
        await later.store.close()
    assert result.answer == f"code 5 is {value(5)}"
    assert "Summary of the earlier conversation:" in oracle.requests[-1].messages[1].content
    assert not oracle.summaries


async def _child(url: str, session: str) -> None:
    await agent_of(url, Hanging()).arun(f"remember code 101 is {value(101)}", session)


if __name__ == "__main__":
    asyncio.run(_child(sys.argv[1], sys.argv[2]))
