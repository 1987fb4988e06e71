"""Durable sessions through the public API: pause in one process, resume in another;
one turn at a time; exactly one of many racing answers resumes; a tool killed mid-call.

One suite over the backends (``durable_url``: SQLite and PostgreSQL; ``store_url`` adds
memory where a single process is enough).
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import pytest

from durable_child import PlanModel, make_agent
from durable_support import CHILD, effects_of, new_session, parse_child, run_child, stored
from reactchat import Agent, AlreadyAnswered, RunResult, SessionBusy
from reactchat.engine.session import SessionState
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    Event,
    ObservationEvent,
    QuestionEvent,
    ThoughtEvent,
    UserEvent,
)
from reactchat.store import SessionNotFound, resolve_store
from reactchat.store.memory import MemoryStore
from reactchat.tools import Effect

# ------------------------------------------------------------------ ask_user across processes


async def test_how_far_is_paris_across_two_processes(durable_url: str, tmp_path: Path) -> None:
    """Pause in one process, answer in another: the reasoning continues, nothing runs twice."""
    effects = tmp_path / "effects"
    session = await new_session(durable_url)
    first = await run_child(durable_url, session, "How far is Paris?", effects, "--plan", "bump,ask,bump")
    assert (first.code, first.status) == (3, "waiting")
    assert isinstance(first.events[-1], QuestionEvent)
    assert first.events[-1].question == "Where are you?"

    second = await run_child(durable_url, session, "Lyon", effects, "--plan", "bump,ask,bump")
    assert (second.code, second.status) == (0, "done")
    events = await stored(durable_url, session)
    assert events == first.events + second.events  # the store holds exactly what both processes reported
    state = SessionState.from_events(session, events)
    assert len(state.turns) == 1
    assert state.turns[0].answer is not None
    assert state.turns[0].answer.text == "2 bumps; user said Lyon"
    bumps = [e.call_id for e in events if isinstance(e, ActionEvent) and e.tool == "bump"]
    assert effects_of(effects) == Counter(bumps)  # each finished call ran exactly once, across processes
    assert len(bumps) == 2


async def test_history_carries_over_to_a_new_process(durable_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    session = await new_session(durable_url)
    first = await run_child(durable_url, session, "First question", effects, "--plan", "bump")
    assert first.status == "done"
    agent = make_agent(durable_url, ["bump"], str(effects))
    result = await agent.arun("Second question", session)
    assert result.status == "done"
    assert result.turn == 2
    state = await agent.state(session)
    assert state.history() == [("First question", "1 bumps; user said nothing"), ("Second question", result.answer)]
    # the prompt holds the earlier question and answer, not the earlier scratchpad
    assert isinstance(agent.model, PlanModel)
    prompt = " ".join(m.model_dump_json() for m in agent.model.requests[0].messages)
    assert "First question" in prompt
    assert "1 bumps; user said nothing" in prompt
    assert "bumped 1" not in prompt
    await agent.store.close()


async def test_history_budget_drops_the_oldest_whole_turns(durable_url: str, tmp_path: Path) -> None:
    effects = str(tmp_path / "effects")
    session = await new_session(durable_url)
    for i in range(4):  # each turn by a new agent with its own connection, as separate processes would
        agent = make_agent(durable_url, [], effects)
        result = await agent.arun(f"question {i} " + "q" * 100, session)
        assert result.status == "done"
        await agent.store.close()
    agent = make_agent(durable_url, [], effects)
    agent.history_tokens = 75  # 300 characters: room for two ~135-character exchanges, not three
    await agent.arun("last question", session)
    assert isinstance(agent.model, PlanModel)
    prompt = " ".join(m.model_dump_json() for m in agent.model.requests[0].messages)
    assert "question 0" not in prompt
    assert "question 1" not in prompt
    assert prompt.count("q" * 100) == 2  # questions 2 and 3, each whole, with their answers
    assert "question 2" in prompt
    assert "question 3" in prompt
    await agent.store.close()


# ------------------------------------------------------------------ durability


async def test_every_event_is_durable_before_the_next(store_url: str, tmp_path: Path) -> None:
    """Each event the engine yields can already be read back by another connection.

    A thought is committed together with the action it leads to, so the store may be one
    event ahead of the stream, never behind it.
    """
    agent = make_agent(store_url, ["bump", "bump", "ask"], str(tmp_path / "effects"))
    reader = agent.store if store_url == "memory:" else resolve_store(store_url)
    seen: list[Event] = []

    async def check(event: Event) -> None:
        seen.append(event)
        stored = await reader.events(event.session)
        assert stored[: len(seen)] == seen
        assert len(stored) == len(seen) or (isinstance(event, ThoughtEvent) and len(stored) == len(seen) + 1)

    async for event in agent.stream("go", None):
        await check(event)
    assert isinstance(seen[-1], QuestionEvent)
    async for event in agent.stream("Lyon", seen[0].session):
        await check(event)
    await reader.close()
    await agent.store.close()


async def test_a_turns_lock_ends_with_its_final_answer(store_url: str, tmp_path: Path) -> None:
    """The final answer's own store transaction releases the turn's lock: when the answer
    reaches the caller, another worker can already take the session; a turn that ends on
    a question keeps its lock until its stream ends, then lets it go as before."""
    agent = make_agent(store_url, ["bump", "ask"], str(tmp_path / "effects"))
    other = agent.store if store_url == "memory:" else resolve_store(store_url)
    session = await agent.store.create_session()
    async for event in agent.stream("go", session):
        if isinstance(event, QuestionEvent):
            assert not await other.try_lock(session, "next", 60)
    assert await other.try_lock(session, "next", 60)
    await other.unlock(session, "next")
    freed = []
    async for event in agent.stream("Lyon", session):
        if isinstance(event, AnswerEvent):
            freed.append(await other.try_lock(session, "next", 60))
    assert freed == [True]
    assert not await agent.store.try_lock(session, "third", 60)  # the run did not take it back
    await other.unlock(session, "next")
    assert [e.type for e in (await other.events(session))[-2:]] == ["observation", "answer"]
    if other is not agent.store:
        await other.close()
    await agent.store.close()


# ------------------------------------------------------------------ one turn at a time


async def test_a_message_during_a_running_turn_is_busy(store_url: str, tmp_path: Path) -> None:
    effects = str(tmp_path / "effects")
    runner = make_agent(store_url, ["bump", "bump"], effects, model_delay=0.05)
    session = await runner.store.create_session()
    other = make_agent(runner.store if store_url == "memory:" else store_url, ["bump"], effects)
    running = asyncio.create_task(runner.arun("slow question", session))
    await asyncio.sleep(0.03)
    before = await other.store.events(session)
    with pytest.raises(SessionBusy):
        await other.arun("impatient question", session)
    # nothing recorded for the busy message (the running turn may have gone on meanwhile)
    after = await other.store.events(session)
    assert after[: len(before)] == before
    assert all(e.turn == 1 and not isinstance(e, UserEvent) for e in after[len(before) :])
    result = await running
    assert result.status == "done"
    texts = [e.text for e in await other.store.events(session) if isinstance(e, UserEvent)]
    assert texts == ["slow question"]
    await runner.store.close()
    await other.store.close()


@pytest.mark.parametrize("explicit", [False, True], ids=["plain-message", "reply_to"])
async def test_twenty_concurrent_answers_resume_once(store_url: str, tmp_path: Path, explicit: bool) -> None:
    """20 answers to one question race, each on its own connection: exactly one resumes.

    With ``reply_to`` (what a UI sends) the outcome does not depend on timing. A plain
    message answers the question pending when it arrives; all 20 arrive while the winner's
    turn is still running (its model takes 0.2 s).
    """
    effects = str(tmp_path / "effects")
    plan = ["ask", "bump"]
    asker = make_agent(store_url, plan, effects)
    waiting = await asker.arun("How far is Paris?")
    assert waiting.status == "waiting"
    call_id = next(e.call_id for e in waiting.events if isinstance(e, QuestionEvent))
    shared = asker.store if store_url == "memory:" else None
    agents = [make_agent(shared or store_url, plan, effects, model_delay=0.2) for _ in range(20)]
    for agent in agents:
        await agent.store.exists(waiting.session)  # connected before the race starts

    async def answer(i: int) -> str:
        try:
            result = await agents[i].arun(f"city {i}", waiting.session, reply_to=call_id if explicit else None)
        except SessionBusy:
            return "busy"
        except AlreadyAnswered:
            return "already answered"
        return result.status

    outcomes = await asyncio.gather(*(answer(i) for i in range(20)))
    assert outcomes.count("done") == 1, outcomes
    assert set(outcomes) <= {"done", "busy", "already answered"}, outcomes
    # whoever was told "busy" learns, on retrying that same answer, that it was already answered
    for i, outcome in enumerate(outcomes):
        if outcome == "busy":
            with pytest.raises(AlreadyAnswered):
                await agents[i].arun(f"city {i}", waiting.session, reply_to=call_id)
    events = await asker.store.events(waiting.session)
    state = SessionState.from_events(waiting.session, events)
    assert len(state.turns) == 1  # no stray turn started by a losing answer
    answers = [e for e in events if isinstance(e, ObservationEvent) and e.tool == "ask_user"]
    assert len(answers) == 1
    assert state.turns[0].answer is not None
    assert state.turns[0].answer.text == f"1 bumps; user said {answers[0].text}"
    assert sum(effects_of(Path(effects)).values()) == 1
    for agent in {id(a.store): a for a in [asker, *agents]}.values():
        await agent.store.close()


async def test_twenty_processes_answer_at_once(durable_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    session = await new_session(durable_url)
    first = await run_child(durable_url, session, "How far is Paris?", effects, "--plan", "ask,bump")
    assert first.status == "waiting"
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            CHILD,
            durable_url,
            session,
            f"city {i}",
            "--effects",
            str(effects),
            "--plan",
            "ask,bump",
            "--go",
            "--model-delay",
            "0.2",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for i in range(20)
    ]
    for proc in procs:  # every child is connected before any of them answers
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
    results = []
    for proc in procs:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        results.append(parse_child(proc.returncode, "ready\n" + out.decode(), err.decode()))
    statuses = Counter(r.status for r in results)
    assert statuses["done"] == 1, statuses
    assert set(statuses) <= {"done", "busy", "already_answered"}
    events = await stored(durable_url, session)
    state = SessionState.from_events(session, events)
    assert len(state.turns) == 1
    assert len([e for e in events if isinstance(e, UserEvent)]) == 2  # the question and one answer
    winner = next(r for r in results if r.status == "done")
    assert events == first.events + winner.events
    assert sum(effects_of(effects).values()) == 1


# ------------------------------------------------------------------ a tool killed mid-call


async def killed_in_step_two(durable_url: str, tmp_path: Path) -> tuple[str, Path, list[Event], str]:
    """A child process that dies inside the second of three ``bump`` calls, after its effect."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    effects = tmp_path / "effects"
    session = await new_session(durable_url)
    died = await run_child(durable_url, session, "count to three", effects, "--plan", "bump,bump,bump", "--die-at", "2")
    assert died.code == -9
    assert await stored(durable_url, session) == died.events  # every reported event survived
    assert isinstance(died.events[-1], ActionEvent)
    return session, effects, died.events, died.events[-1].call_id


@pytest.mark.parametrize(
    ("effect", "reconcile", "ran", "text"),
    [
        ("read", False, 2, "bumped 2"),
        ("idempotent", False, 2, "bumped 2"),
        ("unsafe", True, 1, "bumped 2 (found in the log)"),
    ],
    ids=["read-reruns", "idempotent-reruns", "unsafe-reconciled"],
)
async def test_a_call_killed_after_its_effect_follows_its_effect_class(
    durable_url: str, tmp_path: Path, effect: Effect, reconcile: bool, ran: int, text: str
) -> None:
    """The process dies inside a tool, after its effect; another process resumes the turn and the
    tool's effect class decides: ``read`` and ``idempotent`` calls run again, an ``unsafe`` one
    with a ``reconcile`` check is told by it that the effect happened (and does not run again)."""
    session, effects, before, killed = await killed_in_step_two(durable_url, tmp_path)
    agent = make_agent(durable_url, ["bump"] * 3, str(effects), effect=effect, reconcile=reconcile)
    result = await resume_when_free(agent, session)
    assert result.status == "done"
    events = await agent.store.events(session)
    assert events[: len(before)] == before
    observation = next(e for e in events if isinstance(e, ObservationEvent) and e.call_id == killed)
    assert (observation.text, observation.is_error, observation.interrupted) == (text, False, False)
    runs = effects_of(effects)
    assert runs[killed] == ran
    assert all(runs[e.call_id] == 1 for e in events if isinstance(e, ObservationEvent) and e.call_id != killed)
    await agent.store.close()


async def test_an_unsafe_call_killed_after_its_effect_is_in_doubt_until_the_user_decides(
    durable_url: str, tmp_path: Path
) -> None:
    """An ``unsafe`` call with no reconcile check is never run again by itself: the turn waits
    (``pending.kind == "in_doubt"``), and the reply decides: a third process answers ``retry``
    for one crash and ``skip`` for another; any other text is the call's result."""
    for reply, runs_after, text in [
        ("retry", 2, "bumped 2"),
        ("skip", 1, None),
        ("it went through", 1, "it went through"),
    ]:
        session, effects, _, killed = await killed_in_step_two(durable_url, tmp_path / reply.replace(" ", "-"))
        agent = make_agent(durable_url, ["bump"] * 3, str(effects))
        waiting = await resume_when_free(agent, session)
        assert waiting.status == "waiting" and waiting.pending is not None
        assert (waiting.pending.kind, waiting.pending.tool, waiting.pending.input) == ("in_doubt", "bump", {"n": 2})
        assert "interrupted" in (waiting.question or "") and effects_of(effects)[killed] == 1
        await agent.store.close()
        other = make_agent(durable_url, ["bump"] * 3, str(effects))
        done = await other.arun(reply, session)
        assert done.status == "done"
        observation = next(
            e for e in await other.store.events(session) if isinstance(e, ObservationEvent) and e.call_id == killed
        )
        assert observation.text == (text or observation.text) and (text is not None or observation.is_error)
        assert effects_of(effects)[killed] == runs_after
        await other.store.close()


async def test_in_doubt_tell_model_keeps_the_interrupted_note(durable_url: str, tmp_path: Path) -> None:
    """``Agent(in_doubt="tell_model")``: the model is told the call was interrupted; it never runs again."""
    session, effects, _, killed = await killed_in_step_two(durable_url, tmp_path)
    agent = make_agent(durable_url, ["bump"] * 3, str(effects), in_doubt="tell_model")
    result = await resume_when_free(agent, session)
    assert result.status == "done"
    observation = next(
        e for e in await agent.store.events(session) if isinstance(e, ObservationEvent) and e.call_id == killed
    )
    assert (observation.interrupted, observation.is_error) == (True, True)
    assert effects_of(effects)[killed] == 1  # never silently re-run
    await agent.store.close()


@pytest.mark.parametrize("effect", ["idempotent", "unsafe"])
async def test_a_new_message_finishes_the_interrupted_turn_first(
    durable_url: str, tmp_path: Path, effect: Effect
) -> None:
    """A message (not ``resume``) to a session whose turn a crash cut off: that turn is finished
    first. An idempotent call runs again, the turn ends, and the message starts the next turn;
    an unsafe call is in doubt, and that question comes first: the message is not recorded."""
    session, effects, before, killed = await killed_in_step_two(durable_url, tmp_path)
    agent = make_agent(durable_url, ["bump"] * 3, str(effects), effect=effect)
    for _ in range(250):  # the dead process's lock is being released (PostgreSQL)
        try:
            result = await agent.arun("And now?", session)
            break
        except SessionBusy:
            await asyncio.sleep(0.02)
    events = await agent.store.events(session)
    assert events[: len(before)] == before
    state = SessionState.from_events(session, events)
    if effect == "unsafe":
        assert result.status == "waiting" and result.pending is not None and result.pending.kind == "in_doubt"
        assert len(state.turns) == 1 and "And now?" not in [e.text for e in events if isinstance(e, UserEvent)]
        assert effects_of(effects)[killed] == 1
    else:
        assert result.status == "done" and result.turn == 2
        assert [t.status for t in state.turns] == ["done", "done"]
        assert state.turns[0].answer is not None and state.turns[0].answer.text == "3 bumps; user said nothing"
        assert effects_of(effects)[killed] == 2
    await agent.store.close()


async def resume_when_free(agent: Agent, session: str, seconds: float = 5.0) -> RunResult:
    """``agent.resume``, retried while the dead process's lock is still being released (PostgreSQL)."""
    for _ in range(int(seconds / 0.02)):
        try:
            return await agent.resume(session)
        except SessionBusy:
            await asyncio.sleep(0.02)
    raise AssertionError(f"session {session} stayed busy after its process died")


def test_a_turns_outcome_follows_events_appended_after_it_was_read() -> None:
    # a turn's outcome is folded once and then only over the events added since
    turn = SessionState.from_events(
        "s", [UserEvent(turn=1, text="book it"), QuestionEvent(turn=1, call_id="c1", question="Which day?")]
    ).turns[0]
    assert turn.status == "waiting" and turn.pending is not None and turn.pending.question == "Which day?"
    turn.events.append(UserEvent(turn=1, text="Monday"))
    assert turn.status == "interrupted" and turn.pending is None
    turn.events.append(AnswerEvent(turn=1, text="Booked for Monday."))
    assert turn.status == "done" and turn.answer is not None and turn.answer.text == "Booked for Monday."
    turn.events = turn.events[:2]  # another list: folded afresh
    assert turn.status == "waiting"


async def test_a_new_turn_reads_its_last_turn_whole_and_the_history_of_the_others(store_url: str) -> None:
    # what a turn reads before it starts gives the same history and the same last turn as the
    # whole session, through cancelled, resumed, answered and nested turns; and where the store
    # reads less, the lock's read after it starts right after the session's last event
    from reactchat.engine.run import turn_events

    store = resolve_store(store_url)
    session = await store.create_session()

    def turn(index: int, *events: Event) -> list[Event]:
        for event in events:
            event.__dict__.update(session=session, turn=index)
        return list(events)

    def step(call: str, tool: str = "lookup", run: str = "") -> list[Event]:
        return [
            ThoughtEvent(text="I look it up.", run=run),
            ActionEvent(call_id=call, tool=tool, input={"q": call}, run=run),
            ObservationEvent(call_id=call, tool=tool, text=f"found {call}", run=run),
        ]

    log = [
        turn(1, UserEvent(text="first?"), *step("a"), AnswerEvent(text="one")),
        turn(2, UserEvent(text="second?"), *step("b"), AnswerEvent(text="", status="cancelled", reason="cancelled")),
        # cancelled, then resumed and cut off: no answer to remember
        turn(3, UserEvent(text="third?"), AnswerEvent(text="", status="cancelled"), *step("c")),
        # cancelled, then resumed to an answer; a sub-agent's answer is not the turn's
        turn(
            4,
            UserEvent(text="fourth?"),
            AnswerEvent(text="", status="cancelled"),
            *step("d", "helper"),
            AnswerEvent(text="inner", run="r1"),
            AnswerEvent(text="four"),
        ),
        # an ask_user question answered by the user, then the answer
        turn(
            5,
            UserEvent(text="fifth?"),
            ThoughtEvent(text="I ask."),
            ActionEvent(call_id="e", tool="ask_user", input={"question": "which?"}),
            QuestionEvent(call_id="e", question="which?"),
            UserEvent(text="this one"),
            ObservationEvent(call_id="e", tool="ask_user", text="this one"),
            AnswerEvent(text="five"),
        ),
        # the last turn waits on a question
        turn(
            6,
            UserEvent(text="sixth?"),
            *step("f"),
            ThoughtEvent(text="I ask."),
            ActionEvent(call_id="g", tool="ask_user", input={"question": "when?"}),
            QuestionEvent(call_id="g", question="when?"),
        ),
    ]
    for events in log:
        await store.append(*events)
    everything = await store.events(session)
    read, since = await turn_events(store, session)
    assert since == len(everything) and read[-1] == everything[-1]
    assert await store.events(session, since=since) == []
    whole, seen = SessionState.from_events(session, everything), SessionState.from_events(session, read)
    questions = ["first?", "second?", "third?", "fourth?", "fifth?", "sixth?"]
    assert [t.question for t in seen.turns] == [t.question for t in whole.turns] == questions
    assert seen.history() == whole.history() == [("first?", "one"), ("fourth?", "four"), ("fifth?", "five")]
    for budget in (0, 8, 20, 1000):
        assert seen.history(budget=budget) == whole.history(budget=budget)
    assert seen.turns[-1].events == whole.turns[-1].events  # the last turn whole
    assert seen.turns[-1].pending == whole.turns[-1].pending is not None
    if not isinstance(store, MemoryStore):  # the memory store hands out every event (nothing to parse)
        assert len(read) < len(everything)  # the earlier turns' steps are not read
        # several sessions asked at once (PostgreSQL reads them in one statement): each the same
        # as alone, an empty session nothing, a missing one SessionNotFound
        empty = await store.create_session()
        together = await asyncio.gather(
            store.turn_events(session), store.turn_events(empty), store.turn_events("nobody"), return_exceptions=True
        )
        assert together[0] == read and together[1] == []
        assert isinstance(together[2], SessionNotFound)
    await store.close()
