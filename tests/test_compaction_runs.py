"""Compaction across runs: a sub-agent compacts its own run with its own ``compact_at``, and
a fork reads the summaries it copied instead of making new ones."""

from __future__ import annotations

from reactchat import Agent, ScriptedModel
from reactchat.messages import CompactionEvent, ObservationEvent, Request, UserEvent
from test_compaction import Oracle, known, prompt_text, read, value, within


def boss_of(reader: Agent, store: str = "memory:") -> tuple[Agent, ScriptedModel]:
    """A parent that hands ``read every page`` to ``reader`` and answers with what it said."""
    delegate = 'I delegate.\nAction: reader\nAction Input: {"task": "read every page"}'

    def answer(request: Request) -> str:
        said = prompt_text(request).rsplit("Observation: ", 1)[-1].split("\n", 1)[0]
        return f"Done.\nFinal Answer: the reader said {said}"

    model = ScriptedModel([delegate, answer])
    return Agent(model, [reader], name="boss", store=store, compact_at=0.8, context_tokens=16_000), model


async def test_a_sub_agent_compacts_its_own_run(store_url: str) -> None:
    oracle = Oracle(steps=40)
    reader = Agent(
        oracle,
        [read],
        name="reader",
        description="Reads pages.",
        compact_at=0.8,
        context_tokens=16_000,
        max_steps=45,
        max_observation_chars=25_000,
    )
    boss, boss_model = boss_of(reader, store_url)
    result = await boss.arun("What do the pages say?")
    assert result.status == "done", result.reason
    # the reader's first pages reached its answer through its own summaries
    assert result.answer == "the reader said read 40 pages"
    within(oracle.requests, 16_000)
    made = [e for e in await boss.store.events(result.session) if isinstance(e, CompactionEvent)]
    call = next(e for e in result.events if isinstance(e, ObservationEvent) and e.agent == "boss")
    assert made and all(e.agent == "boss/reader" and e.run == call.call_id for e in made)
    assert all(e.covers == "steps" and e.through_step > 0 for e in made)
    assert oracle.summaries and len(boss_model.requests) == 2  # the boss was never asked to summarise
    await boss.store.close()


async def test_a_sub_agent_without_compact_at_elides_instead_of_compacting() -> None:
    oracle = Oracle(steps=40)
    reader = Agent(
        oracle, [read], name="reader", description="Reads pages.", max_steps=45, max_observation_chars=25_000
    )
    boss, _ = boss_of(reader)
    result = await boss.arun("What do the pages say?")
    assert result.status == "done", result.reason
    assert not oracle.summaries
    assert not [e for e in result.events if isinstance(e, CompactionEvent)]
    # the old observations were elided, not summarised: the first pages' facts are gone
    assert known(prompt_text(oracle.requests[-1])).get(1) is None


async def test_a_fork_carries_the_summaries_it_copied(store_url: str) -> None:
    oracle = Oracle()
    agent = Agent(oracle, store=store_url, compact_at=0.8, context_tokens=800, ask_user=False)
    session = None
    for n in range(1, 41):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    assert session is not None
    events = await agent.store.events(session)
    latest = [e for e in events if isinstance(e, CompactionEvent)][-1]
    opening = next(e.seq for e in events if isinstance(e, UserEvent) and e.turn == latest.turn + 1)
    fork = await agent.fork(session, before=opening)
    copied = [e for e in await agent.store.events(fork) if isinstance(e, CompactionEvent)]
    assert [(e.summary, e.through_turn) for e in copied][-1] == (latest.summary, latest.through_turn)
    summaries = len(oracle.summaries)
    result = await agent.arun("what is code 3?", fork)
    assert result.answer == f"code 3 is {value(3)}"
    assert len(oracle.summaries) == summaries  # the fork made no summary of its own
    prompt = oracle.requests[-1].messages[1].content
    assert f"Summary of the earlier conversation:\n{latest.summary}" in prompt
    # the original goes on from the same summary
    original = await agent.arun("what is code 3?", session)
    assert original.answer == result.answer
    assert latest.summary in oracle.requests[-1].messages[1].content
    await agent.store.close()


async def test_a_fact_the_summary_lost_is_recalled_at_every_turn_after_it() -> None:
    """The recalled turns have their room whatever the size of the prompt: a prompt just
    under the threshold still carries them (compaction comes a little earlier instead)."""
    oracle = Oracle(fail="forgetful")
    agent = Agent(oracle, compact_at=0.8, context_tokens=800, ask_user=False)
    session = None
    for n in range(1, 61):  # every turn but the third is long: the prompt grows in big steps
        padding = "" if n == 3 else " and then more of the same," * 4
        session = (await agent.arun(f"remember code {n} is {value(n)}{padding}", session)).session
    assert session is not None and oracle.summaries
    events = await agent.store.events(session)
    opening = {e.turn: e.seq for e in events if isinstance(e, UserEvent)}
    first = next(e.through_turn for e in events if isinstance(e, CompactionEvent))
    wrong = []
    for turn in range(first + 2, 61):
        fork = await agent.fork(session, before=opening[turn])
        answer = (await agent.arun("what is code 3?", fork)).answer
        if answer != f"code 3 is {value(3)}":
            wrong.append((turn, answer))
    assert not wrong, wrong
