"""Crash recovery: scripted runs SIGKILLed at random points, then finished by another process.

For each backend, 50 subprocesses run a scripted plan (tool calls with a side effect, and
in half of them an ask_user question answered in the same process). The parent reads the
events each child reports once durable and kills it after a random number of them plus
a random delay, so deaths land between events, inside tools and inside model calls.
Then, in this process, the session is finished (``agent.resume`` for an interrupted
turn, the answer for a waiting one) and checked:

* every event the child reported is in the store, in order (no step lost);
* the turn ends with the answer the plan implies, every step of the plan done once;
* every action has exactly one observation;
* the side-effect log shows no call ran twice, and every call that finished ran once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path

from durable_child import make_agent
from durable_support import CHILD, effects_of, new_session, stored
from reactchat.engine.session import SessionState
from reactchat.messages import EVENTS, ActionEvent, Event, ObservationEvent, QuestionEvent, UserEvent
from reactchat.store import SessionBusy

RUNS = int(os.environ.get("REACTCHAT_CRASH_RUNS", "50"))
PARALLEL = 4
SEED = int(os.environ.get("REACTCHAT_CRASH_SEED", "5"))


def random_plan(rng: random.Random) -> list[str]:
    plan = ["bump"] * rng.randint(1, 5)
    if rng.random() < 0.5:
        plan.insert(rng.randint(0, len(plan)), "ask")
    return plan


def expected_answer(plan: list[str]) -> str:
    return f"{plan.count('bump')} bumps; user said {'Lyon' if 'ask' in plan else 'nothing'}"


async def killed_run(url: str, plan: list[str], effects: Path, rng: random.Random) -> tuple[str, list[Event], bool]:
    """Start a child on a new session and SIGKILL it at a random point; what did it report?"""
    session = await new_session(url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        CHILD,
        url,
        session,
        "How far is Paris?",
        "--plan",
        ",".join(plan),
        "--answer",
        "Lyon",
        "--effects",
        str(effects),
        "--model-delay",
        "0.003",
        "--tool-delay",
        "0.003",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    total = 3 * len(plan) + 3  # about as many events as the run writes
    kill_after = rng.randint(0, total)
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        reported = sum(1 for x in lines if x.startswith("{"))
        if reported >= kill_after and lines[0] == "ready":
            await asyncio.sleep(rng.uniform(0, 0.006))
            break
    killed = proc.returncode is None
    if killed:
        # not proc.send_signal: it polls, and may reap a child that just exited under
        # asyncio's child watcher, which then reports exit status 255
        with contextlib.suppress(ProcessLookupError):  # it finished (and was reaped) just now
            os.kill(proc.pid, signal.SIGKILL)
    out, err = await proc.communicate()
    lines += out.decode().splitlines()
    assert lines[:1] == ["ready"], err.decode()
    assert proc.returncode in (-9, 0), err.decode()
    events = [EVENTS.validate_json(x) for x in lines if x.startswith("{")]
    return session, events, proc.returncode == -9


async def recover(url: str, session: str, plan: list[str], effects: Path) -> list[Event]:
    """Finish the session from this process, as a user or an operator would."""
    agent = make_agent(
        url, plan, str(effects), in_doubt="tell_model"
    )  # the contract kept: never re-run, the model told
    try:
        for _ in range(10):
            state = SessionState.from_events(session, await agent.store.events(session))
            last = state.last
            try:
                if last is None:  # killed before the question was recorded: the user sends it again
                    await agent.arun("How far is Paris?", session)
                elif last.status == "interrupted":
                    await agent.resume(session)
                elif last.status == "waiting":
                    await agent.arun("Lyon", session)
                else:
                    return await agent.store.events(session)
            except SessionBusy:  # PostgreSQL: the dead child's connection is still closing
                await asyncio.sleep(0.02)
        raise AssertionError(f"session {session} could not be finished")
    finally:
        await agent.store.close()


def check(session: str, plan: list[str], reported: list[Event], events: list[Event], effects: Path) -> None:
    assert events[: len(reported)] == reported, "an event the killed process reported as durable is missing"
    state = SessionState.from_events(session, events)
    assert len(state.turns) == 1
    turn = state.turns[0]
    assert turn.status == "done"
    assert turn.answer is not None
    assert turn.answer.text == expected_answer(plan)
    actions = [e for e in events if isinstance(e, ActionEvent)]
    # every step of the plan was taken exactly once, in order (the model reads the plan off the transcript)
    assert [a.tool for a in actions] == ["ask_user" if p == "ask" else "bump" for p in plan]
    assert [a.input["n"] for a in actions if a.tool == "bump" and isinstance(a.input, dict)] == [
        i + 1 for i, p in enumerate(plan) if p == "bump"
    ]
    observations = Counter(e.call_id for e in events if isinstance(e, ObservationEvent))
    assert all(observations[a.call_id] == 1 for a in actions), observations
    assert len([e for e in events if isinstance(e, QuestionEvent)]) == plan.count("ask")
    runs = effects_of(effects)
    assert set(runs) <= {a.call_id for a in actions}
    assert all(count == 1 for count in runs.values()), f"a tool call ran twice: {runs}"
    for event in events:
        if isinstance(event, ObservationEvent) and event.tool == "bump":
            assert runs[event.call_id] == 1 or event.interrupted
    assert [e.text for e in events if isinstance(e, UserEvent)][:1] == ["How far is Paris?"]


async def test_sigkill_at_random_points_leaves_every_session_recoverable(durable_url: str, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    plans = [random_plan(rng) for _ in range(RUNS)]
    seeds = [rng.random() for _ in range(RUNS)]
    gate = asyncio.Semaphore(PARALLEL)
    killed = 0

    async def one(i: int) -> None:
        nonlocal killed
        effects = tmp_path / f"effects-{i}"
        async with gate:
            session, reported, was_killed = await killed_run(durable_url, plans[i], effects, random.Random(seeds[i]))
        killed += was_killed
        events = await recover(durable_url, session, plans[i], effects)
        check(session, plans[i], reported, events, effects)

    # every run finishes (no child left writing into a pipe nobody reads) before any failure is raised
    outcomes = await asyncio.gather(*(one(i) for i in range(RUNS)), return_exceptions=True)
    failures = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, BaseException)]
    if failures:
        summary = "; ".join(f"run {i} plan {plans[i]}: {type(e).__name__}: {e}" for i, e in failures)
        raise AssertionError(f"{len(failures)} of {RUNS} runs failed: {summary}") from failures[0][1]
    assert killed >= RUNS * 3 // 4, f"only {killed} of {RUNS} runs were killed before they finished"


async def test_answer_recorded_but_not_observed_is_not_asked_again(durable_url: str, tmp_path: Path) -> None:
    """Killed between storing the user's answer and its observation: resume uses the stored answer."""
    effects = tmp_path / "effects"
    plan = ["ask", "bump"]
    agent = make_agent(durable_url, plan, str(effects))
    waiting = await agent.arun("How far is Paris?")
    question = next(e for e in waiting.events if isinstance(e, QuestionEvent))
    # what the answering process wrote before it died
    await agent.store.append(UserEvent(session=waiting.session, turn=question.turn, step=question.step, text="Lyon"))
    state = await agent.state(waiting.session)
    assert state.turns[0].status == "interrupted"  # not "waiting": the answer is already given
    result = await agent.resume(waiting.session)
    assert (result.status, result.answer) == ("done", expected_answer(plan))
    events = await stored(durable_url, waiting.session)
    assert [e.text for e in events if isinstance(e, UserEvent)] == ["How far is Paris?", "Lyon"]
    await agent.store.close()
