"""Agents as tools, through the public API with scripted models and real stores."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agents_team import deep_team
from reactchat import Agent, ModelError, ScriptedModel, tool
from reactchat.messages import ActionEvent, AnswerEvent, Event, ObservationEvent, Usage, UserEvent


def action(tool_name: str, task: str) -> str:
    return f'I delegate.\nAction: {tool_name}\nAction Input: {{"task": "{task}"}}'


@tool
def lookup(key: str) -> str:
    """Return the value stored under key."""
    return f"value of {key}"


def two_levels(store: str) -> tuple[Agent, list[ScriptedModel]]:
    fetcher_model = ScriptedModel(
        ['Looking.\nAction: lookup\nAction Input: {"key": "k1"}', "Got it.\nFinal Answer: k1 is 42"]
    )
    researcher_model = ScriptedModel([action("fetcher", "get k1"), "Fetched.\nFinal Answer: k1 = 42"])
    boss_model = ScriptedModel([action("researcher", "find k1"), "Done.\nFinal Answer: The answer is 42."])
    fetcher = Agent(model=fetcher_model, tools=[lookup], name="fetcher", description="Looks keys up.")
    researcher = Agent(model=researcher_model, tools=[fetcher], name="researcher", description="Finds facts.")
    boss = Agent(model=boss_model, tools=[researcher], name="boss", store=store)
    return boss, [boss_model, researcher_model, fetcher_model]


async def test_delegation_two_levels_deep(store_url: str) -> None:
    boss, models = two_levels(store_url)
    events: list[Event] = []
    async for event in boss.stream("What is k1?"):
        events.append(event)
    assert [(e.agent, e.type) for e in events] == [
        ("boss", "user"),
        ("boss", "thought"),
        ("boss", "action"),
        ("boss/researcher", "user"),
        ("boss/researcher", "thought"),
        ("boss/researcher", "action"),
        ("boss/researcher/fetcher", "user"),
        ("boss/researcher/fetcher", "thought"),
        ("boss/researcher/fetcher", "action"),
        ("boss/researcher/fetcher", "observation"),
        ("boss/researcher/fetcher", "answer"),
        ("boss/researcher", "observation"),
        ("boss/researcher", "answer"),
        ("boss", "observation"),
        ("boss", "answer"),
    ]
    boss_call = next(e for e in events if isinstance(e, ActionEvent) and e.agent == "boss")
    researcher_call = next(e for e in events if isinstance(e, ActionEvent) and e.agent == "boss/researcher")
    runs = {e.agent: e.run for e in events}
    assert runs == {
        "boss": "",
        "boss/researcher": boss_call.call_id,
        "boss/researcher/fetcher": f"{boss_call.call_id}/{researcher_call.call_id}",
    }
    observations = {e.agent: e.text for e in events if isinstance(e, ObservationEvent)}
    assert observations["boss"] == "k1 = 42" and observations["boss/researcher"] == "k1 is 42"
    assert observations["boss/researcher/fetcher"] == "value of k1"
    tasks = [e.text for e in events if isinstance(e, UserEvent)]
    assert tasks == ["What is k1?", "find k1", "get k1"]
    # each sub-agent was asked its own task, with its own tools
    assert "find k1" in models[1].requests[0].messages[1].content  # type: ignore[union-attr]
    assert "lookup" in models[2].requests[0].messages[0].content  # type: ignore[union-attr]
    stored = await boss.store.events(events[0].session)
    assert [e.model_dump(exclude={"seq"}) for e in stored] == [e.model_dump(exclude={"seq"}) for e in events]
    state = await boss.state(events[0].session)
    assert state.turns[0].status == "done" and len(state.turns) == 1
    await boss.store.close()


async def test_usage_rolls_up_with_a_per_agent_breakdown() -> None:
    boss, _ = two_levels("memory:")
    result = await boss.arun("What is k1?")
    assert result.answer == "The answer is 42."
    by_agent = result.usage_by_agent
    assert set(by_agent) == {"boss", "boss/researcher", "boss/researcher/fetcher"}
    assert all(u.output_tokens > 0 for u in by_agent.values())
    total = Usage()
    for usage in by_agent.values():
        total = total + usage
    assert result.usage == total
    assert [s.tool for s in result.steps] == ["researcher", None]  # the top-level run's steps


async def test_as_tool_and_memory_across_calls() -> None:
    @tool
    def note(text: str) -> str:
        """Write a note."""
        return "noted"

    def sub_model() -> ScriptedModel:
        return ScriptedModel(["Noting.\nFinal Answer: first", "Noting again.\nFinal Answer: second"])

    for memory in (False, True):
        model = sub_model()
        scribe = Agent(model=model, tools=[note], name="scribe", description="Takes notes.")
        boss_model = ScriptedModel([action("scribe", "note A"), action("scribe", "note B"), "Done.\nFinal Answer: ok"])
        boss = Agent(model=boss_model, tools=[scribe.as_tool(memory=memory)], name="boss")
        result = await boss.arun("Take two notes.")
        assert result.answer == "ok"
        second = model.requests[1].messages[1].content  # type: ignore[union-attr]
        assert ("note A" in second and "first" in second) is memory
        assert second.rstrip().endswith("note B")


async def test_a_failing_sub_agent_is_an_observation_not_a_crash() -> None:
    class Broken:
        name = "broken"
        supports_tools = False
        supports_grammar = False
        context_tokens = None

        async def complete(self, request: object) -> object:
            raise ModelError("the provider is down")

    helper = Agent(model=Broken(), name="helper", description="Helps.")  # type: ignore[arg-type]
    boss_model = ScriptedModel([action("helper", "help"), "The helper failed.\nFinal Answer: no help today"])
    boss = Agent(model=boss_model, tools=[helper], name="boss")
    result = await boss.arun("Get help.")
    assert (result.status, result.answer) == ("done", "no help today")
    observation = next(e for e in result.events if isinstance(e, ObservationEvent) and e.agent == "boss")
    assert observation.is_error and "helper failed" in observation.text and "provider is down" in observation.text


async def test_a_sub_agent_out_of_steps_reports_it() -> None:
    looping = ScriptedModel(['Again.\nAction: lookup\nAction Input: {"key": "k"}'] * 1 + ["I could not finish."])
    helper = Agent(model=looping, tools=[lookup], name="helper", description="Helps.", max_steps=1)
    boss = Agent(
        model=ScriptedModel([action("helper", "go"), "Ok.\nFinal Answer: partial"]), tools=[helper], name="boss"
    )
    result = await boss.arun("Go.")
    observation = next(e for e in result.events if isinstance(e, ObservationEvent) and e.agent == "boss")
    assert observation.is_error and "helper stopped before finishing (max_steps)" in observation.text
    assert result.answer == "partial"


async def test_depth_limit_and_delegation_loop_guard() -> None:
    def chain(depth_limit: int) -> Agent:
        d = Agent(model=ScriptedModel(["Leaf.\nFinal Answer: leaf"]), name="d", description="d")
        c = Agent(model=ScriptedModel([action("d", "x"), "C.\nFinal Answer: c"]), tools=[d], name="c", description="c")
        b = Agent(model=ScriptedModel([action("c", "x"), "B.\nFinal Answer: b"]), tools=[c], name="b", description="b")
        return Agent(
            model=ScriptedModel([action("b", "x"), "A.\nFinal Answer: a"]), tools=[b], name="a", max_depth=depth_limit
        )

    result = await chain(3).arun("go")
    assert {e.agent for e in result.events} == {"a", "a/b", "a/b/c", "a/b/c/d"}
    result = await chain(2).arun("go")
    assert "a/b/c/d" not in {e.agent for e in result.events}
    refused = next(e for e in result.events if isinstance(e, ObservationEvent) and e.agent == "a/b/c")
    assert refused.is_error and "2 levels deep" in refused.text
    assert result.answer == "a"

    # A → B → A: an agent that appears again down its own path is refused, whatever the depth limit
    a_model = ScriptedModel([action("b", "ping"), "A.\nFinal Answer: a done"])
    b_model = ScriptedModel([action("a", "pong"), "B.\nFinal Answer: b done"])
    a = Agent(model=a_model, name="a", description="a", max_depth=10)
    b = Agent(model=b_model, tools=[a], name="b", description="b")
    a.tools.append(b.as_tool())
    result = await a.arun("start")
    looped = next(e for e in result.events if isinstance(e, ObservationEvent) and e.agent == "a/b")
    assert looped.is_error and "would loop" in looped.text
    assert result.answer == "a done"


async def test_cancelling_the_parent_ends_the_children(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool(timeout=None)
    async def slow(key: str) -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(30)
        return "late"

    worker = Agent(
        model=ScriptedModel(['Slow.\nAction: slow\nAction Input: {"key": "k"}', "Final Answer: never"]),
        tools=[slow],
        name="worker",
        description="Works slowly.",
    )
    boss = Agent(model=ScriptedModel([action("worker", "work")]), tools=[worker], name="boss")
    seen: list[Event] = []

    async def consume() -> None:
        async for event in boss.stream("Work."):
            seen.append(event)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert not any(isinstance(e, AnswerEvent) for e in seen)
    assert seen[-1].agent == "boss/worker" and isinstance(seen[-1], ActionEvent)
    assert all(t.get_coro().__qualname__ != "slow" for t in asyncio.all_tasks())  # type: ignore[union-attr]


async def test_deep_team_asks_at_depth_two_and_resumes_innermost_first(store_url: str, tmp_path: Path) -> None:
    boss = deep_team(store_url, str(tmp_path / "effects"))
    waiting = await boss.arun("How far is Paris?")
    assert waiting.status == "waiting" and waiting.question == "Where are you?"
    assert waiting.pending is not None and waiting.pending.agent == "boss/researcher/fetcher"
    state = await boss.state(waiting.session)
    assert state.turns[0].status == "waiting"
    done = await boss.arun("Lyon", waiting.session)
    assert (done.status, done.answer) == ("done", "boss: found: fetched: Lyon")
    resumed = [(e.agent, e.type) for e in done.events[len(waiting.events) :]]
    assert resumed[:3] == [
        ("boss/researcher/fetcher", "user"),
        ("boss/researcher/fetcher", "observation"),
        ("boss/researcher/fetcher", "thought"),
    ]
    assert resumed[-2:] == [("boss", "observation"), ("boss", "answer")]
    assert (tmp_path / "effects").read_text().count("\n") == 1
    await boss.store.close()


async def test_a_question_and_a_delegation_in_one_step_wait_for_the_answer() -> None:
    """The sub-agent's task (a user message of its own run) does not answer the parent's question."""
    from reactchat.messages import Reply, TextPart, ToolCallPart

    helper = Agent(model=ScriptedModel(["Final Answer: helped"]), name="helper", description="Helps.")
    both = Reply(
        parts=[
            ToolCallPart(id="q1", name="ask_user", input={"question": "Where are you?"}),
            ToolCallPart(id="h1", name="helper", input={"task": "help"}),
        ],
        stop_reason="tool_use",
    )
    boss_model = ScriptedModel([both, Reply(parts=[TextPart(text="From Lyon, helped.")])])
    boss = Agent(model=boss_model, tools=[helper], name="boss", protocol="native")
    waiting = await boss.arun("Go.")
    assert (waiting.status, waiting.question) == ("waiting", "Where are you?")
    done = await boss.arun("Lyon", waiting.session)
    assert (done.status, done.answer) == ("done", "From Lyon, helped.")


async def test_session_busy_while_a_sub_agent_runs(tmp_path: Path) -> None:
    from reactchat import SessionBusy

    boss = deep_team("memory:", str(tmp_path / "effects"), delay=0.3)
    session = await boss.store.create_session()
    running = asyncio.create_task(boss.arun("How far is Paris?", session))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if any(e.agent == "boss/researcher/fetcher" for e in await boss.store.events(session)):
            break
    with pytest.raises(SessionBusy):
        await boss.arun("hello", session)
    waiting = await running
    assert waiting.status == "waiting"
