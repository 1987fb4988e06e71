"""``reactchat serve`` as an A2A agent: its agent card and A2A JSON-RPC.

GET  /.well-known/agent-card.json   → the agent card (also at the older ``agent.json``)
POST /a2a                           → A2A JSON-RPC: SendMessage, SendStreamingMessage,
                                      GetTask, CancelTask (and the 0.3 names message/send,
                                      message/stream, tasks/get, tasks/cancel)

The JSON-RPC layer is the SDK's own (``JsonRpcDispatcher``); what answers is
``TurnTasks``, which runs turns as every other route does (``Turns``): a context is a
session, a task one turn. A turn that asks the user (ask_user, an approval) leaves its task
``input-required``; the next message of that task is the answer. The server's guard
applies as on every route: the bearer token, and under per-user tokens the caller's own
sessions only (another user's task is "not found").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.types.a2a_pb2 import (
    TASK_STATE_CANCELED,
    TASK_STATE_FAILED,
    TASK_STATE_WORKING,
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    CancelTaskRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from reactchat import __version__
from reactchat.a2a._tasks import answer_artifact, parse_task_id, status, task_id, text_of, turn_status, turn_task
from reactchat.engine.loop import SHUTDOWN
from reactchat.engine.session import SessionState, Turn
from reactchat.messages import Event, QuestionEvent
from reactchat.server._cancel import cancel_elsewhere
from reactchat.server._guard import USER, owner
from reactchat.server._openai import reasoning
from reactchat.server._schema import SESSION_ID, SESSION_ID_RULE
from reactchat.server._turns import Delta, TurnFeed, failure_event
from reactchat.store import AlreadyAnswered, SessionBusy, SessionNotFound

if TYPE_CHECKING:
    from reactchat.server._server import Server

log = logging.getLogger("reactchat.server")

#: where the JSON-RPC endpoint is mounted
RPC_PATH = "/a2a"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
#: what a streamed task is made of
Update = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
#: a Starlette request in ``ServerCallContext.state``
REQUEST = "reactchat_request"


def a2a_routes(app: FastAPI, server: Server) -> None:
    """Add the agent card and the A2A JSON-RPC endpoint to the reactchat app."""

    async def card(request: Request) -> JSONResponse:
        return JSONResponse(agent_card_to_dict(agent_card(server, str(request.base_url).rstrip("/"))))

    for path in CARD_PATHS:
        app.add_api_route(path, card, methods=["GET"], include_in_schema=False)
    builder = _CallContext()
    app.router.routes.extend(create_jsonrpc_routes(TurnTasks(server), RPC_PATH, builder, enable_v0_3_compat=True))


def agent_card(server: Server, base: str) -> AgentCard:
    """The card of the server's agent: its name and description, a skill per tool, streaming,
    and the bearer token it needs when it has one."""
    agent = server.agent
    skills = [AgentSkill(id=t.name, name=t.name, description=t.description, tags=["tool"]) for t in agent.tools]
    url = base + RPC_PATH
    card = AgentCard(
        name=agent.name,
        description=agent.description or f"The reactchat agent {agent.name}: send it a task, it answers.",
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )
    if server.config.token or server.config.users:
        scheme = HTTPAuthSecurityScheme(scheme="Bearer", description="Authorization: Bearer <token>")
        card.security_schemes["bearer"].CopyFrom(SecurityScheme(http_auth_security_scheme=scheme))
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


class _CallContext(DefaultServerCallContextBuilder):
    """The SDK's call context, with the request (its caller, as the guard found it)."""

    def build(self, request: Any) -> ServerCallContext:
        context = super().build(request)
        context.state[REQUEST] = request
        return context


class TurnTasks(RequestHandler):
    """A2A requests answered from reactchat's sessions (see the module docstring)."""

    def __init__(self, server: Server) -> None:
        self.server = server

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        """Run a turn (or answer the task's question) and answer with the task once it waits or
        ends; with ``returnImmediately``, once it started (the client then polls with tasks/get)."""
        with _errors():
            session, feed = await self._start(params, context)
            if params.configuration.return_immediately:  # the turn goes on in its own task
                events = await self.server.store.events(session)
                return turn_task((await self._turn(session, events[-1].turn))[0], session, running=True)
            events, failure = await feed.events()
            found, _ = await self._turn(session, events[-1].turn if events else 0)
            task = turn_task(found, session, running=False)
            if failure is not None and not isinstance(failure, asyncio.CancelledError):
                why = failure_event(session, failure).message
                task.status.CopyFrom(status(TASK_STATE_FAILED, why, session, task.id))
            return task

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Update]:
        """The task first, then a ``working`` update per step (its Thought, Action or
        Observation as the message), the answer as an artifact, and the last status."""
        with _errors():
            session, feed = await self._start(params, context)
            async for update in _updates(session, feed):
                yield update

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """The task as the store has it (any worker can answer)."""
        with _errors():
            session, turn = self._task(params.id, context)
            found, _ = await self._turn(session, turn)
            history = params.history_length if params.HasField("history_length") else None
            return turn_task(found, session, self.server.turns.is_running(session), history)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """Stop the task's turn, on whichever worker runs it; a task that is not running is not cancelable."""
        with _errors():
            session, turn = self._task(params.id, context)
            found, last = await self._turn(session, turn)
            if not last or found.status != "interrupted":
                raise TaskNotCancelableError(f"task {params.id} is not running (it is {found.status})")
            if not await self.server.turns.cancel(session) and await cancel_elsewhere(self.server, session) is None:
                raise TaskNotCancelableError(f"task {params.id} is not running: no worker runs it")
            return turn_task((await self._turn(session, turn))[0], session, running=False)

    async def _start(self, params: SendMessageRequest, context: ServerCallContext) -> tuple[str, TurnFeed]:
        """The session of the message and its running turn (an answer when the message names a waiting task)."""
        request: Request = context.state[REQUEST]
        sent = params.message
        text = text_of(sent)
        if not text.strip():
            raise InvalidParamsError("the message holds no text part: send the task as text")
        reply_to = None
        if sent.task_id:
            session, turn = self._task(sent.task_id, context)
            if sent.context_id and self.server.scoped(request, sent.context_id) != session:
                raise InvalidParamsError(f"task {sent.task_id} is not a task of context {sent.context_id}")
            found, last = await self._turn(session, turn)
            if found.pending is None or not last:
                raise InvalidParamsError(f"task {sent.task_id} is {found.status}: it waits for no answer")
            reply_to = found.pending.call_id
        else:
            session = await self._session(request, sent)
        feed = await self.server.turns.start(self.server.agent, session, text, reply_to)
        return session, feed

    async def _session(self, request: Request, sent: Message) -> str:
        """The session of the message's context, created when new; a new one without a context."""
        if not sent.context_id:
            return await self.server.create_session(request)
        if not re.fullmatch(SESSION_ID, sent.context_id):
            raise InvalidParamsError(f"contextId: {SESSION_ID_RULE}")
        session = self.server.scoped(request, sent.context_id)
        assert session is not None
        if not await self.server.store.exists(session):
            await self.server.create_session(request, session)
        return session

    def _task(self, task: str, context: ServerCallContext) -> tuple[str, int]:
        """The session and turn of a task id the caller may see (else "not found")."""
        parsed = parse_task_id(task)
        user: str = getattr(context.state[REQUEST].state, USER, "")
        if parsed is None or (user and owner(parsed[0]) != user):
            raise TaskNotFoundError(f"no task {task!r}")
        return parsed

    async def _turn(self, session: str, turn: int) -> tuple[Turn, bool]:
        """Turn ``turn`` of ``session`` from the store, and whether it is the session's last."""
        try:
            turns = SessionState.from_events(session, await self.server.store.events(session)).turns
        except SessionNotFound:
            raise TaskNotFoundError(f"no task {task_id(session, turn)!r}") from None
        found = next((t for t in turns if t.index == turn), None)
        if found is None:
            raise TaskNotFoundError(f"no task {task_id(session, turn)!r}")
        return found, found is turns[-1]

    # what reactchat does not offer over A2A
    async def on_list_tasks(self, params: Any, context: ServerCallContext) -> Any:
        """Not offered: list a context's turns with ``GET /v1/sessions/{id}``."""
        raise UnsupportedOperationError("tasks/list is not offered: GET /v1/sessions/{context} lists its turns")

    async def on_subscribe_to_task(self, params: Any, context: ServerCallContext) -> AsyncGenerator[Any]:
        """Not offered: follow a session with ``GET /v1/sessions/{id}/events``."""
        raise UnsupportedOperationError("resubscribing is not offered: GET /v1/sessions/{context}/events follows it")
        yield  # an async generator, as the interface declares

    async def on_create_task_push_notification_config(self, params: Any, context: ServerCallContext) -> Any:
        """Not offered: no push notifications."""
        raise UnsupportedOperationError("push notifications are not offered")

    on_get_task_push_notification_config = on_create_task_push_notification_config
    on_list_task_push_notification_configs = on_create_task_push_notification_config
    on_delete_task_push_notification_config = on_create_task_push_notification_config

    async def on_get_extended_agent_card(self, params: Any, context: ServerCallContext) -> AgentCard:
        """Not offered: the public card is the whole card."""
        raise UnsupportedOperationError("there is no extended agent card: the public one says everything")


async def _updates(session: str, feed: TurnFeed) -> AsyncIterator[Update]:
    """A running turn as A2A stream events (see ``TurnTasks.on_message_send_stream``)."""
    events: list[Event] = []
    failure: BaseException | None = None
    announced = False
    async for item in feed.items():
        if isinstance(item, BaseException):
            failure = item
            continue
        if item is None or isinstance(item, Delta):
            continue  # a keepalive, streamed model text: the SSE layer pings by itself
        events.append(item)
        task = task_id(session, item.turn)
        if not announced:
            announced = True
            yield turn_task(Turn(item.turn, "", [item]), session, running=True)
        text = reasoning(item) if not isinstance(item, QuestionEvent) else ""
        if text:
            yield TaskStatusUpdateEvent(
                task_id=task, context_id=session, status=status(TASK_STATE_WORKING, text.strip(), session, task)
            )
    if not events:
        return
    turn = Turn(events[-1].turn, "", [e for e in events if e.turn == events[-1].turn])
    task = task_id(session, turn.index)
    final = turn_status(turn, session, running=False)
    if isinstance(failure, asyncio.CancelledError) and failure.args[:1] != (SHUTDOWN,):
        final = status(TASK_STATE_CANCELED, None, session, task)  # the run recorded it so, then stopped
    elif failure is not None and not isinstance(failure, asyncio.CancelledError):
        final = status(TASK_STATE_FAILED, failure_event(session, failure).message, session, task)
    answer = turn.outcome.answer
    if answer is not None and answer.status == "done":
        artifact = answer_artifact(answer.text)
        yield TaskArtifactUpdateEvent(task_id=task, context_id=session, artifact=artifact, last_chunk=True)
    yield TaskStatusUpdateEvent(task_id=task, context_id=session, status=final)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """reactchat's refusals as A2A errors; anything else is logged and named, not described
    (its text may hold paths or SQL)."""
    try:
        yield
    except A2AError:
        raise
    except SessionBusy as exc:
        raise InvalidRequestError(str(exc)) from None
    except AlreadyAnswered as exc:
        raise InvalidParamsError(f"{exc}; get the task to see its current state") from None
    except SessionNotFound as exc:
        raise TaskNotFoundError(str(exc)) from None
    except HTTPException as exc:  # the rate of new sessions (429)
        raise InvalidRequestError(str(exc.detail)) from None
    except Exception as exc:
        log.exception("A2A request failed")
        raise InternalError(f"internal error ({type(exc).__name__}); the details are in the server log") from None
