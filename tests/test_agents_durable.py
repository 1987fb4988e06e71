"""Durability at any depth: a question at depth 2 answered from another process (and another
server worker on PostgreSQL), and plan-and-execute runs SIGKILLed at random points.

The crash test runs ``REACTCHAT_AGENTS_CRASH_RUNS`` (30) scripted plan-and-execute runs per
durable store in subprocesses (``agents_team.py``), kills each after a random number of
durable events plus a random delay, then finishes every session from this process and
checks: every event the child reported is stored, in order; the turn ends with the answer
the plan implies; every action of every run has exactly one observation; the side-effect
log shows that no finished tool call ran twice.
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

from agents_team import deep_team, plan_steps, plan_team
from durable_support import effects_of, new_session, stored
from reactchat.engine.session import SessionState
from reactchat.messages import EVENTS, ActionEvent, Event, ObservationEvent, QuestionEvent
from reactchat.store import SessionBusy

TEAM = str(Path(__file__).with_name("agents_team.py"))
RUNS = int(os.environ.get("REACTCHAT_AGENTS_CRASH_RUNS", "30"))
PARALLEL = 4
SEED = int(os.environ.get("REACTCHAT_AGENTS_CRASH_SEED", "11"))


async def child(url: str, session: str, message: str | None, effects: Path, *args: str) -> tuple[int, list[str]]:
    argv = [TEAM, url, session, *([message] if message else []), "--effects", str(effects), *args]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode in (0, 3), err.decode()
    return proc.returncode, out.decode().splitlines()


async def test_question_at_depth_two_answered_from_another_process(durable_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    session = await new_session(durable_url)
    code, lines = await child(durable_url, session, "How far is Paris?", effects, "--team", "deep")
    assert code == 3 and lines[-1].startswith("status waiting")
    events = await stored(durable_url, session)
    state = SessionState.from_events(session, events)
    pending = state.turns[0].pending
    assert pending is not None and (pending.agent, pending.question) == ("boss/researcher/fetcher", "Where are you?")
    assert sum(isinstance(e, QuestionEvent) for e in events) == 1
    # days later, in another process
    code, lines = await child(durable_url, session, "Lyon", effects)
    assert code == 0 and lines[-1] == 'status done "boss: found: fetched: Lyon"'
    assert effects_of(effects).most_common(1)[0][1] == 1
    # the answered question cannot be answered twice
    agent = deep_team(durable_url, str(effects), in_doubt="tell_model")
    from reactchat import AlreadyAnswered

    with contextlib.suppress(AlreadyAnswered):
        await agent.arun("Paris", session, reply_to=pending.call_id)
        raise AssertionError("a stale reply_to was accepted")
    await agent.store.close()


def random_steps(rng: random.Random) -> str:
    items = []
    for number in range(1, rng.randint(2, 4) + 1):
        kind = rng.choice(["w", "", "wa", "wb"]) if number > 1 else rng.choice(["w", ""])
        items.append(f"{kind}{number}")
    return ",".join(items)


def expected(spec: str) -> list[int]:
    return [int("".join(c for c in item if c.isdigit())) for item in spec.split(",")]


async def killed_run(url: str, spec: str, effects: Path, rng: random.Random) -> tuple[str, list[Event], bool]:
    session = await new_session(url)
    argv = [TEAM, url, session, "Bump.", "--team", "plan", "--steps", spec, "--answer", "Lyon"]
    argv += ["--effects", str(effects), "--delay", "0.002"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    lines: list[str] = []
    kill_after = rng.randint(0, 12 * len(spec.split(",")))
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if sum(x.startswith("{") for x in lines) >= kill_after and lines[0] == "ready":
            await asyncio.sleep(rng.uniform(0, 0.004))
            break
    killed = proc.returncode is None
    if killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    out, err = await proc.communicate()
    lines += out.decode().splitlines()
    assert lines[:1] == ["ready"], err.decode()
    assert proc.returncode in (-9, 0, 3), err.decode()
    return session, [EVENTS.validate_json(x) for x in lines if x.startswith("{")], proc.returncode == -9


async def finish(url: str, session: str, spec: str, effects: Path) -> list[Event]:
    agent = plan_team(url, str(effects), plan_steps(spec), in_doubt="tell_model")
    try:
        for _ in range(20):
            last = SessionState.from_events(session, await agent.store.events(session)).last
            try:
                if last is None:
                    await agent.arun("Bump.", session)
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


def check(session: str, spec: str, reported: list[Event], events: list[Event], effects: Path) -> None:
    assert [e.model_dump(exclude={"seq"}) for e in events[: len(reported)]] == [
        e.model_dump(exclude={"seq"}) for e in reported
    ], "an event the killed process reported as durable is missing"
    state = SessionState.from_events(session, events)
    assert len(state.turns) == 1 and state.turns[0].status == "done"
    actions = [e for e in events if isinstance(e, ActionEvent)]
    cut = {(e.run, e.call_id) for e in events if isinstance(e, ObservationEvent) and e.interrupted}
    # a bump the crash cut off is reported to the model as interrupted, not run again
    lost = {a.input["n"] for a in actions if (a.run, a.call_id) in cut and isinstance(a.input, dict)}
    answer = state.turns[0].answer
    assert answer is not None
    assert all(f"bumped {n}" in answer.text for n in expected(spec) if n not in lost), answer.text
    observations = Counter((e.run, e.call_id) for e in events if isinstance(e, ObservationEvent))
    assert all(observations[a.run, a.call_id] == 1 for a in actions), "a call has no observation, or two"
    assert sum(observations.values()) == len(actions)
    runs = effects_of(effects)
    assert all(count == 1 for count in runs.values()), f"a tool call ran twice: {runs}"
    bumps = {f"{a.run}/{a.call_id}" for a in actions if a.tool == "bump"}
    assert set(runs) <= bumps
    for event in events:  # every bump that returned ran exactly once
        if isinstance(event, ObservationEvent) and event.tool == "bump" and not event.interrupted:
            assert runs[f"{event.run}/{event.call_id}"] == 1


async def test_sigkill_at_random_points_of_plan_and_execute_runs(durable_url: str, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    specs = [random_steps(rng) for _ in range(RUNS)]
    seeds = [rng.random() for _ in range(RUNS)]
    gate = asyncio.Semaphore(PARALLEL)
    killed = 0

    async def one(i: int) -> None:
        nonlocal killed
        effects = tmp_path / f"effects-{i}"
        async with gate:
            session, reported, was_killed = await killed_run(durable_url, specs[i], effects, random.Random(seeds[i]))
        killed += was_killed
        events = await finish(durable_url, session, specs[i], effects)
        check(session, specs[i], reported, events, effects)

    outcomes = await asyncio.gather(*(one(i) for i in range(RUNS)), return_exceptions=True)
    failures = [(i, o) for i, o in enumerate(outcomes) if isinstance(o, BaseException)]
    if failures:
        summary = "; ".join(f"run {i} steps {specs[i]}: {type(e).__name__}: {e}" for i, e in failures)
        raise AssertionError(f"{len(failures)} of {RUNS} runs failed: {summary}") from failures[0][1]
    assert killed >= RUNS // 2, f"only {killed} of {RUNS} runs were killed before they finished"
