"""Chatting with uploaded files through an Agent: the tool, the rounds, the expiry."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from reactchat import Agent, ScriptedModel, Tool, tool
from reactchat.knowledge import KnowledgeBase, attach
from reactchat.messages import Request
from reactchat.models import tool_call
from reactchat.store import Store

ROSES = b"# Market\n\nA bouquet of roses costs 80.16 dollars on average.\n\n# Tulips\n\nTulips are cheaper in spring.\n"


MakeAgent = Callable[..., Agent]


@pytest.fixture
async def make_agent() -> AsyncIterator[MakeAgent]:
    """Agents whose store and knowledge base connections are closed after the test."""
    made: list[Agent] = []

    def make(**options: Any) -> Agent:
        made.append(Agent(**options))
        return made[-1]

    yield make
    for agent in made:
        await KnowledgeBase.for_store(agent.store).close()
        await agent.store.close()


def search(query: str) -> str:
    return " I should look in the file.\nAction: search_files\nAction Input: " + json.dumps({"query": query})


def final(answer: str) -> str:
    return f" I know it.\nFinal Answer: {answer}"


def offered(request: Request) -> list[str]:
    return [t.name for t in request.react_tools or request.tools]


async def test_search_files_is_offered_while_the_file_lives(store_url: str, make_agent: MakeAgent) -> None:
    model = ScriptedModel([final("hello"), search("price of roses"), final("80.16 dollars"), final("ok"), final("bye")])
    agent = make_agent(model=model, store=store_url)
    kb = attach(agent, retention=2)
    first = await agent.arun("hi")
    assert "search_files" not in offered(model.requests[0])
    session = first.session
    await kb.add_file(session, "roses.md", ROSES)

    second = await agent.arun("How much are roses?", session)
    assert "search_files" in offered(model.requests[1])
    spec = next(t for t in model.requests[1].react_tools if t.name == "search_files")
    assert spec.description.endswith("to cite. Files: roses.md.")
    observation = second.steps[0].observation or ""
    assert "roses.md · § Market" in observation and "80.16" in observation
    assert [f.rounds_left for f in await kb.files(session)] == [1]

    await agent.arun("thanks", session)  # the second round with the file: it expires now
    assert "search_files" in offered(model.requests[3])
    assert await kb.files(session) == []
    await agent.arun("one more", session)
    assert "search_files" not in offered(model.requests[4])
    model.assert_complete()


async def test_a_turn_waiting_on_the_user_is_not_a_round_until_it_ends(make_agent: MakeAgent) -> None:
    ask = ' I need to know which flower.\nAction: ask_user\nAction Input: {"question": "Which flower?"}'
    model = ScriptedModel([ask, search("roses"), final("80.16")])
    agent = make_agent(model=model, store="memory:")
    kb = attach(agent, retention=1)
    session = await agent.store.create_session()
    await kb.add_file(session, "roses.md", ROSES)
    waiting = await agent.arun("How much is my flower?", session)
    assert waiting.status == "waiting"
    assert [f.rounds_left for f in await kb.files(session)] == [1]
    done = await agent.arun("roses", session)
    assert done.status == "done" and "80.16" in (done.steps[-2].observation or "")
    assert await kb.files(session) == []


async def test_a_file_uploaded_while_the_agent_waits_is_searchable_when_it_resumes(make_agent: MakeAgent) -> None:
    ask = ' I need the document.\nAction: ask_user\nAction Input: {"question": "Please upload the price list."}'
    model = ScriptedModel([ask, search("roses"), final("80.16")])
    agent = make_agent(model=model, store="memory:")
    kb = attach(agent)
    waiting = await agent.arun("How much are roses?")
    assert "search_files" not in offered(model.requests[0])
    await kb.add_file(waiting.session, "roses.md", ROSES)
    done = await agent.arun("uploaded", waiting.session)
    assert "search_files" in offered(model.requests[1])
    assert "80.16" in (done.steps[-2].observation or "")


async def test_a_stopped_turn_counts_as_a_round(make_agent: MakeAgent) -> None:
    model = ScriptedModel([search("roses"), final("best effort: 80.16")])
    agent = make_agent(model=model, store="memory:", max_steps=1)
    kb = attach(agent, retention=1)
    session = await agent.store.create_session()
    await kb.add_file(session, "roses.md", ROSES)
    result = await agent.arun("How much are roses?", session)
    assert result.status == "stopped"
    assert await kb.files(session) == []


async def test_clearing_the_context_removes_the_tool(make_agent: MakeAgent) -> None:
    model = ScriptedModel([final("a"), final("b")])
    agent = make_agent(model=model, store="memory:")
    kb = attach(agent)
    session = await agent.store.create_session()
    await kb.add_file(session, "roses.md", ROSES)
    await agent.arun("one", session)
    await kb.clear(session)
    await agent.arun("two", session)
    assert ["search_files" in offered(r) for r in model.requests] == [True, False]


async def test_the_model_cannot_name_a_file_or_a_session(make_agent: MakeAgent) -> None:
    sneaky = ' Let me read the other chat.\nAction: search_files\nAction Input: {"query": "roses", "session": "other"}'
    model = ScriptedModel([sneaky, final("no")])
    agent = make_agent(model=model, store="memory:")
    kb = attach(agent)
    other, mine = await agent.store.create_session(), await agent.store.create_session()
    await kb.add_file(other, "roses.md", ROSES)
    await kb.add_file(mine, "owls.txt", b"Owls hunt at night.")
    tools = await agent.hooks.tools_for(mine, agent.store)
    schema = next(t for t in tools if t.name == "search_files").input_schema
    assert list(schema["properties"]) == ["query"]
    result = await agent.arun("What do roses cost?", mine)
    observation = result.steps[0].observation or ""
    assert result.steps[0].is_error and "80.16" not in observation


async def test_native_protocol_and_other_session_tools_are_kept(make_agent: MakeAgent) -> None:
    @tool
    def weather(city: str) -> str:
        """Today's weather in a city."""
        return f"sunny in {city}"

    async def extra(session: str, store: Store) -> list[Tool]:
        return [weather]

    ended: list[str] = []

    async def on_end(session: str, store: Store, status: str) -> None:
        ended.append(status)

    model = ScriptedModel([tool_call("search_files", {"query": "tulips season"}), "Tulips are cheaper in spring."])
    agent = make_agent(model=model, protocol="native", store="memory:", session_tools=extra, on_turn_end=on_end)
    kb = attach(agent, retention=1)
    session = await agent.store.create_session()
    await kb.add_file(session, "roses.md", ROSES)
    result = await agent.arun("When are tulips cheap?", session)
    assert result.answer == "Tulips are cheaper in spring."
    assert "§ Tulips" in (result.steps[0].observation or "")
    assert {"weather", "search_files"} <= set(offered(model.requests[0]))
    assert ended == ["done"] and await kb.files(session) == []


async def test_a_failed_round_count_is_logged_and_the_answer_still_arrives(
    sqlite_url: str, make_agent: MakeAgent, caplog: pytest.LogCaptureFixture
) -> None:
    import sqlite3

    def break_the_database(request: Request) -> str:
        with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
            db.execute("DROP TABLE kb_files")
        return final("80.16")

    agent = make_agent(model=ScriptedModel([break_the_database]), store=sqlite_url)
    kb = attach(agent)
    session = await agent.store.create_session()
    await kb.add_file(session, "roses.md", ROSES)
    result = await agent.arun("How much are roses?", session)
    assert (result.status, result.answer) == ("done", "80.16")
    assert f"could not count the round of session {session}" in caplog.text


async def test_a_session_without_files_costs_no_round_count(sqlite_url: str, make_agent: MakeAgent) -> None:
    """A turn of a session without files reads its files once and writes nothing: while
    another connection holds the database's write lock, such turns still end at once."""
    import sqlite3

    model = ScriptedModel([final("one"), final("two"), final("three")])
    agent = make_agent(model=model, store=sqlite_url)
    kb = attach(agent, retention=1)
    first = await agent.arun("hi")
    session = first.session
    index = kb._open()
    counted: list[str] = []
    end_round = index.end_round
    index.end_round = lambda s: counted.append(s) or end_round(s)  # type: ignore[method-assign]
    assert (await agent.arun("again", session)).answer == "two"
    assert counted == []  # no thread hop, no transaction: the turn began without files

    # another session's turn ends while a writer holds the file: no BEGIN IMMEDIATE waits on it
    other = await agent.store.create_session()
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert index.end_round(other) == []
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    await kb.add_file(session, "roses.md", ROSES)  # now the turn's end counts the round
    await agent.arun("and now?", session)
    assert counted == [other, session] and await kb.files(session) == []
