"""The path of a turn through the public API: one event loop per thread for ``Agent.run``,
events that carry their place in the log and their agent, deltas as events, the
pending item, and stored facts that do not depend on wording."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from reactchat import Agent, AlreadyAnswered, ModelError, NothingToRun, ScriptedModel, SessionNotFound, tool
from reactchat.engine import recovery as recovery_module
from reactchat.messages import (
    ActionEvent,
    DeltaEvent,
    Event,
    ObservationEvent,
    Reply,
    Request,
    TextPart,
    ThoughtEvent,
    UserEvent,
)
from reactchat.store import resolve_store


def act(tool_name: str, value: dict[str, object], thought: str = "I look.") -> str:
    return f" {thought}\nAction: {tool_name}\nAction Input: {json.dumps(value)}"


def final(answer: str) -> str:
    return f" I know.\nFinal Answer: {answer}"


def test_run_keeps_one_event_loop_per_thread() -> None:
    loops: list[int] = []

    @tool
    async def where() -> str:
        """Say which event loop runs this."""
        loops.append(id(asyncio.get_running_loop()))
        return "here"

    script = [act("where", {}), final("a"), act("where", {}), final("b")]
    agent = Agent(model=ScriptedModel(script * 2), tools=[where])
    agent.run("one")
    agent.run("two")
    other = threading.Thread(target=lambda: agent.run("three"))
    other.start()
    other.join()
    assert loops[0] == loops[1] != loops[2]


async def test_run_inside_a_running_loop_says_to_await_arun() -> None:
    agent = Agent(model=ScriptedModel([final("x")]))
    with pytest.raises(RuntimeError, match=r"await agent\.arun"):
        agent.run("q")


async def test_events_carry_their_place_in_the_log_and_their_agent(store_url: str) -> None:
    store = resolve_store(store_url)
    model = ScriptedModel([act("ask_user", {"question": "Which city?"}), final("Lyon it is")])
    agent = Agent(model=model, store=store, name="guide")
    streamed: list[Event] = []
    first = await agent.arun("Where am I?", on_event=streamed.append)
    assert first.status == "waiting" and first.pending is not None
    assert first.pending.kind == "question" and first.pending.question == "Which city?"
    second = await agent.arun("Lyon", first.session, on_event=streamed.append)
    assert second.answer == "Lyon it is"
    stored = await store.events(first.session)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert [e.seq for e in streamed] == [e.seq for e in stored]  # what was streamed is what was stored
    assert {e.agent for e in stored} == {"guide"} and {e.run for e in stored} == {""}
    assert [e.seq for e in await store.events(first.session, since=3)] == list(range(4, len(stored) + 1))
    await store.close()


async def test_a_stale_reply_and_an_unknown_session_say_what_to_do() -> None:
    agent = Agent(model=ScriptedModel([act("ask_user", {"question": "Which city?"}), final("ok")]))
    waiting = await agent.arun("Where am I?")
    assert waiting.pending is not None
    await agent.arun("Lyon", waiting.session, reply_to=waiting.pending.call_id)
    with pytest.raises(AlreadyAnswered, match="reload the session"):
        await agent.arun("Paris", waiting.session, reply_to=waiting.pending.call_id)
    with pytest.raises(SessionNotFound, match="start a new session"):
        await agent.arun("hello", "no-such-session")
    with pytest.raises(NothingToRun, match="send a message"):
        await agent.resume(waiting.session)


class StreamingModel:
    """Sends each reply to the request's delta sink in pieces before returning it."""

    name = "streaming"
    supports_tools = False
    context_tokens = None

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies

    async def complete(self, request: Request) -> Reply:
        text = self.replies.pop(0)
        for start in range(0, len(text), 5):
            if request.on_delta is not None:
                request.on_delta(text[start : start + 5])
            await asyncio.sleep(0)
        return Reply(parts=[TextPart(text=text)])


async def test_deltas_are_events_of_the_stream_and_are_never_stored() -> None:
    replies = [act("calculator", {"expression": "2+2"}), final("4")]
    agent = Agent(model=StreamingModel(list(replies)), tools=[])
    events = [e async for e in agent.stream("2+2?", deltas=True)]
    deltas = [e for e in events if isinstance(e, DeltaEvent)]
    assert "".join(d.text for d in deltas) == "".join(replies)
    thought = next(i for i, e in enumerate(events) if isinstance(e, ThoughtEvent))
    assert all(isinstance(e, DeltaEvent) for e in events[1:thought])  # the text comes before its step
    stored = await agent.store.events(events[0].session)
    assert not any(isinstance(e, DeltaEvent) for e in stored)
    assert [e.type for e in stored] == [e.type for e in events if not isinstance(e, DeltaEvent)]
    quiet = Agent(model=StreamingModel(list(replies)), tools=[])
    assert not [e async for e in quiet.stream("2+2?") if isinstance(e, DeltaEvent)]


# ------------------------------------------------------------ stored facts, not wording

CALLS: list[str] = []


@tool
def lookup(key: str) -> str:
    """Return the value stored under key."""
    CALLS.append(key)
    return f"value-{key}"


async def crashed_session(store_url: str, observation: ObservationEvent | None) -> tuple[str, Agent]:
    """A session whose turn called lookup(k) and then (if given) recorded ``observation``."""
    store = resolve_store(store_url)
    session = await store.create_session()
    events: list[Event] = [
        UserEvent(session=session, turn=1, text="What is k?"),
        ThoughtEvent(session=session, turn=1, step=1, text="I look.", raw=act("lookup", {"key": "k"})),
        ActionEvent(session=session, turn=1, step=1, call_id="call_1_1_0", tool="lookup", input={"key": "k"}),
    ]
    if observation is not None:
        events.append(observation.model_copy(update={"session": session, "turn": 1, "step": 1}))
    await store.append(*events)
    model = ScriptedModel([act("lookup", {"key": "k"}, "Again."), final("done")])
    return session, Agent(model=model, tools=[lookup], store=store, in_doubt="tell_model")


@pytest.mark.parametrize("interrupted", [True, False])
async def test_replay_knows_an_interrupted_call_by_its_field_whatever_its_text(interrupted: bool) -> None:
    observation = ObservationEvent(
        call_id="call_1_1_0", tool="lookup", text="Reworded: it stopped.", is_error=True, interrupted=interrupted
    )
    CALLS.clear()
    session, agent = await crashed_session("memory:", observation)
    result = await agent.resume(session)  # the turn never ended: it is finished
    assert result.answer == "done"
    # an interrupted call may run again; a finished one is refused as a repeat
    assert (["k"] if interrupted else []) == CALLS


async def test_rewording_the_interrupted_sentence_changes_nothing_on_replay(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    CALLS.clear()
    session, agent = await crashed_session(sqlite_url, None)
    monkeypatch.setattr(recovery_module, "INTERRUPTED", "Cut off; its effect is unknown.")
    failing = Agent(model=ScriptedModel([]), tools=[lookup], store=sqlite_url, in_doubt="tell_model")
    with pytest.raises(ModelError):  # the interrupted call gets its observation, then the model fails
        await failing.resume(session)
    await failing.store.close()
    stored = [e for e in await agent.store.events(session) if isinstance(e, ObservationEvent)]
    assert stored[0].interrupted and stored[0].text == "Cut off; its effect is unknown."
    monkeypatch.setattr(recovery_module, "INTERRUPTED", "Yet another wording.")
    result = await agent.resume(session)  # replays the observation stored with the first wording
    assert result.answer == "done" and CALLS == ["k"]  # the interrupted call may run again: it did, once
    await agent.store.close()


#: how earlier versions marked an interrupted call: in the observation's text alone
LEGACY = (
    "This call was interrupted before it returned (the process running it stopped), so its "
    "effect is unknown and it was not run again. Check before relying on it."
)


async def test_sessions_stored_before_the_interrupted_field_are_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    CALLS.clear()
    session, agent = await crashed_session(f"sqlite:///{path}", None)
    await agent.store.close()
    legacy = ObservationEvent(
        session=session, turn=1, step=1, call_id="call_1_1_0", tool="lookup", text=LEGACY, is_error=True
    )
    body = json.loads(legacy.model_dump_json(exclude={"seq", "agent", "run", "interrupted"}))  # today's form
    with sqlite3.connect(path) as db:  # as the previous version stored it, before migration 3
        db.execute("INSERT INTO events VALUES (?, 4, 1, 1, 'observation', 0, ?)", (session, json.dumps(body)))
        db.execute("DELETE FROM reactchat_migrations WHERE name = 'm003_interrupted_field'")
    reopened = Agent(model=agent.model, tools=[lookup], store=f"sqlite:///{path}")
    observation = next(e for e in await reopened.store.events(session) if isinstance(e, ObservationEvent))
    assert observation.interrupted
    result = await reopened.resume(session)
    assert result.answer == "done" and CALLS == ["k"]
    await reopened.store.close()


def test_a_process_that_used_agent_run_exits_promptly(tmp_path: Path) -> None:
    script = tmp_path / "uses_run.py"
    script.write_text(
        "import threading\n"
        "from reactchat import Agent, ScriptedModel, tool\n"
        "@tool\n"
        "def look(key: str) -> str:\n"
        '    """Look a key up."""\n'
        "    return key\n"
        "def turn(i):\n"
        '    replies = [\' I look.\\nAction: look\\nAction Input: {"key": "k"}\', " Done.\\nFinal Answer: ok"]\n'
        f"    agent = Agent(model=ScriptedModel(replies), tools=[look], store='sqlite:///{tmp_path}/s.db')\n"
        "    assert agent.run(f'q{i}').answer == 'ok'\n"
        "turn(1)\n"
        "turn(2)\n"
        "worker = threading.Thread(target=turn, args=(3,))\n"
        "worker.start()\n"
        "worker.join()\n"
        "print('done', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout.strip()) == (0, "done"), proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr
