"""``reactchat.a2a.RemoteAgent``: a remote A2A agent as a sub-agent of a reactchat agent, the
remote being a real ``reactchat serve`` app or an agent built with the SDK's own server
classes, each on uvicorn on loopback."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a", reason="the a2a extra is not installed: pip install 'reactchat[a2a]'")

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    TASK_STATE_COMPLETED,
    TASK_STATE_INPUT_REQUIRED,
    TASK_STATE_WORKING,
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskStatus,
)
from starlette.applications import Starlette

from reactchat import Agent
from reactchat.a2a import RemoteAgent
from reactchat.messages import (
    AnswerEvent,
    Event,
    ObservationEvent,
    QuestionEvent,
    Reply,
    Request,
    TextPart,
    ThoughtEvent,
)
from reactchat.server import ServerConfig, create_app
from server_support import make_app, running
from test_a2a_server import ask, said


class Delegating:
    """A text-ReAct model that hands the user's message to ``tool`` and answers with what it said."""

    name = "delegating"
    supports_tools = False
    context_tokens = None

    def __init__(self, tool: str) -> None:
        self.tool = tool

    async def complete(self, request: Request) -> Reply:
        question = str(getattr(request.messages[1], "content", "")).rsplit("Question:", 1)[-1].strip()
        seen = re.findall(r"Observation: (.*?)\nThought:", str(getattr(request.messages[-1], "text", "")), re.S)
        if not seen:
            text = f" Ask it.\nAction: {self.tool}\nAction Input: {json.dumps({'task': question})}"
        else:
            text = f" It answered.\nFinal Answer: {seen[-1]}"
        return Reply(parts=[TextPart(text=text)])


async def turn(agent: Agent, message: str, session: str) -> list[Event]:
    """The events of one turn of ``session`` (created when new)."""
    if not await agent.store.exists(session):
        await agent.store.create_session(session)
    return [event async for event in agent.turn(message, session)]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'parent.db'}"


async def test_a_remote_reactchat_agent_asks_and_the_parents_next_message_answers(store: str) -> None:
    with running(make_app(token="remote-token")) as base:
        geo = await RemoteAgent.discover(base, token="remote-token")
        assert geo.name == "reactchat" and geo.description.startswith("The reactchat agent")  # from its card
        parent = Agent(name="boss", model=Delegating(geo.name), tools=[geo], store=store)
        first = await turn(parent, "how far is Paris?", "trip")
        nested = [e for e in first if e.agent == "boss/reactchat"]
        assert any(isinstance(e, ThoughtEvent) and e.text.startswith("Action: ask_user") for e in nested)
        asked = first[-1]
        assert isinstance(asked, QuestionEvent) and asked.question == "Where are you?"
        assert asked.agent == "boss/reactchat"  # a question of the parent's turn, asked below it
        state = await parent.state("trip")
        assert state.last is not None and state.last.status == "waiting"

        await parent.store.close()

        # the answer reaches another process's agent: nothing but the store carries the wait over
        later = RemoteAgent(base, name="reactchat", token="remote-token")
        parent = Agent(name="boss", model=Delegating(later.name), tools=[later], store=store)
        second = await turn(parent, "Lyon", "trip")
        answer = second[-1]
        assert isinstance(answer, AnswerEvent) and answer.agent == "boss"
        assert answer.text == "From Lyon, Paris is 400 km away."
        assert state.last.index == (await parent.state("trip")).last.index  # one turn, as one remote task
        await parent.store.close()


async def test_an_unreachable_remote_agent_is_an_error_observation(store: str) -> None:
    with running(make_app()) as base:
        pass  # the server is gone: its port refuses
    remote = RemoteAgent(base, name="gone")
    parent = Agent(model=Delegating("gone"), tools=[remote], store=store)
    events = await turn(parent, "anything", "s")
    answer = events[-1]
    assert isinstance(answer, AnswerEvent) and answer.text.startswith("Error: gone at http://127.0.0.1:")


class UnitAgent(AgentExecutor):
    """An agent made with the SDK's server classes: it says it is working, asks for the unit,
    then answers with the distance in it."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            status = TaskStatus(state=TASK_STATE_WORKING)
            await event_queue.enqueue_event(Task(id=context.task_id, context_id=context.context_id, status=status))
            await updater.start_work(updater.new_agent_message([Part(text="Measuring the road.")]))
            await updater.requires_input(updater.new_agent_message([Part(text="In which unit?")]))
            return
        unit = context.get_user_input()
        await updater.add_artifact([Part(text=f"465 {unit}")], name="distance")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """These tests never cancel a task of this agent."""


@pytest.fixture
def sdk_agent() -> Iterator[str]:
    app: Any = Starlette()  # routes added once running: the card names the server's URL
    with running(app) as base:
        card = AgentCard(
            name="Distances",
            description="Road distances between cities.",
            version="1",
            supported_interfaces=[AgentInterface(url=f"{base}/", protocol_binding="JSONRPC", protocol_version="1.0")],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="distance", name="distance", description="km between cities", tags=["road"])],
        )
        handler = DefaultRequestHandler(agent_executor=UnitAgent(), task_store=InMemoryTaskStore(), agent_card=card)
        app.router.routes.extend([*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
        yield base


async def test_an_agent_built_with_the_sdk_asks_and_the_parents_next_message_answers(
    sdk_agent: str, store: str
) -> None:
    remote = await RemoteAgent.discover(sdk_agent)
    assert remote.name == "Distances" and remote.description == "Road distances between cities."
    parent = Agent(name="boss", model=Delegating("Distances"), tools=[remote], store=store)
    first = await turn(parent, "how far from Paris to Lyon?", "road")
    assert [e.text for e in first if isinstance(e, ThoughtEvent) and e.agent == "boss/Distances"] == [
        "Measuring the road."
    ]
    asked = first[-1]
    assert isinstance(asked, QuestionEvent) and asked.question == "In which unit?"
    second = await turn(parent, "km", "road")
    answer = second[-1]
    assert isinstance(answer, AnswerEvent) and answer.text == "465 km"


async def test_from_the_sdk_client_a_question_of_the_remote_agent_two_servers_away() -> None:
    """SDK client → a reactchat server whose agent delegates → a remote reactchat server that asks."""
    with running(make_app()) as remote_url:

        def boss(store: Any) -> Agent:
            return Agent(name="boss", model=Delegating("geo"), tools=[RemoteAgent(remote_url, name="geo")], store=store)

        with running(create_app(boss, config=ServerConfig(model="rules", store="memory:"))) as url:
            async with httpx.AsyncClient(timeout=30) as http:
                card = await A2ACardResolver(http, url).get_agent_card()
                assert [s.id for s in card.skills] == ["geo", "ask_user"]
                sdk = ClientFactory(ClientConfig(httpx_client=http)).create(card)
                first = [r async for r in sdk.send_message(ask("how far is Paris?"))]
                steps = [said(r.status_update.status.message) for r in first if r.HasField("status_update")]
                assert "[geo] Task: how far is Paris?" in steps  # the remote's steps, labelled
                assert "[geo] Thought: Action: ask_user" in "\n".join(steps)
                asked = first[-1].status_update
                assert asked.status.state == TASK_STATE_INPUT_REQUIRED
                assert said(asked.status.message) == "Where are you?"
                task = first[0].task
                second = [r async for r in sdk.send_message(ask("Lyon", task=task.id, context=task.context_id))]
    assert second[-1].status_update.status.state == TASK_STATE_COMPLETED
    assert said(second[-1].status_update.status.message) == "From Lyon, Paris is 400 km away."


async def test_stopping_the_parents_turn_cancels_the_remote_task(store: str) -> None:
    with running(make_app()) as base:
        parent = Agent(model=Delegating("geo"), tools=[RemoteAgent(base, name="geo")], store=store)
        await parent.store.create_session("s")
        started = asyncio.Event()

        async def run() -> None:
            async for event in parent.turn("slow: compute 3*3", "s"):
                if event.agent.endswith("/geo") and isinstance(event, ThoughtEvent):
                    started.set()  # the remote agent is at work

        running_turn = asyncio.create_task(run())
        await asyncio.wait_for(started.wait(), 10)
        running_turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running_turn
        async with httpx.AsyncClient() as http:
            [remote] = (await http.get(f"{base}/v1/sessions")).json()["sessions"]
    assert remote["status"] == "cancelled"


async def test_a_remote_task_that_fails_is_an_error_observation_with_its_reason(store: str) -> None:
    with running(make_app()) as base:
        parent = Agent(model=Delegating("geo"), tools=[RemoteAgent(base, name="geo")], store=store)
        events = await turn(parent, "fail at once", "s")
    [observation] = [e for e in events if isinstance(e, ObservationEvent) and e.tool == "geo"]
    assert observation.is_error
    assert observation.text == "Error: geo failed: ModelError: the rule model was told to fail"
