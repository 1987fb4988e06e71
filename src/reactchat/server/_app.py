"""The FastAPI app: sessions, messages as SSE, files, context, the page.

POST   /v1/sessions                    → {"session": id}
POST   /v1/sessions/{id}/messages      → SSE: one frame per event, then ``end``
POST   /v1/sessions/{id}/cancel        → stops the running turn, on any worker (see ``_cancel``)
POST   /v1/sessions/{id}/fork          → a new session from its events before a seq (see ``_fork``)
GET    /v1/sessions                    → the newest sessions, summarised (``?limit=``)
GET    /v1/sessions/{id}               → turns (with usage), status, pending question, files
GET    /v1/sessions/{id}/events        → SSE from ``Last-Event-ID`` on (see ``_takeover``)
POST   /v1/sessions/{id}/files         → the uploaded file's info (multipart ``file``)
DELETE /v1/sessions/{id}/context       → forgets the session's files
POST   /v1/chat/completions, GET /v1/models   (OpenAI-compatible, see ``_openai``)
GET    /                               → the web chat page
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from importlib import resources
from importlib.util import find_spec
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.exceptions import HTTPException
from starlette.routing import Match

from reactchat.agent import Agent
from reactchat.cli.report import SessionSummary, forked_from, summaries, turn_view
from reactchat.cli.retention import expire_sessions
from reactchat.cli.tool_refs import close_tools, offered_tools
from reactchat.engine.budget import Budget, check_priced
from reactchat.engine.session import SessionState
from reactchat.errors import ConfigError, DiskFull
from reactchat.server._artifacts import artifact_routes
from reactchat.server._cancel import cancel_routes, watch_cancels
from reactchat.server._config import AgentFactory, ServerConfig
from reactchat.server._files import Files, file_routes, session_images
from reactchat.server._fork import fork_routes
from reactchat.server._guard import USER, Guard, Rate, owner
from reactchat.server._health import health_routes
from reactchat.server._lean import shortcut
from reactchat.server._memory import memory_routes
from reactchat.server._openai import openai_routes
from reactchat.server._schema import GUARDED, READS, SESSION_ID, SESSION_ID_RULE, WRITES, Body, error, errors, streamed
from reactchat.server._server import Server
from reactchat.server._takeover import follow_routes, stop, watch_abandoned
from reactchat.server._turns import Turns, TurnStream, failure_event, pending_view, sse, summary
from reactchat.store import AlreadyAnswered, SessionBusy, SessionNotFound, Store, resolve_store
from reactchat.toolbox import calculator, read_links_in_messages

#: the page runs only its own script and style files (no inline code), talks only to this
#: server and is never framed by another site
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
}


class NewSession(Body):
    """Body of ``POST /v1/sessions`` (optional)."""

    model_config = ConfigDict(extra="forbid")
    #: a name for the session (not ``oa-…``: those ids are derived by the OpenAI endpoint)
    session: str | None = Field(default=None, pattern=SESSION_ID)


class SessionCreated(BaseModel):
    """Answer of ``POST /v1/sessions``: the id, and whether this request created it."""

    session: str
    created: bool


#: images one message may carry
MAX_MESSAGE_IMAGES = 8


class MessageIn(Body):
    """Body of ``POST /v1/sessions/{id}/messages``."""

    model_config = ConfigDict(extra="forbid")
    #: the user's message, or the answer to the pending question
    message: str = Field(min_length=1)
    #: the ``call_id`` of the question this message answers; a 409 if it is no longer pending
    reply_to: str | None = None
    #: ``false`` waits for the end of the turn and answers with JSON instead of SSE
    stream: StrictBool = True
    #: a JSON schema the final answer must match: the answer is then that JSON
    output_schema: dict[str, Any] | None = None
    #: limits of this turn, held within the server's ``max_budget``
    budget: BudgetIn | None = None
    #: images uploaded to the session (``POST /v1/sessions/{id}/files``), by name, sent with a
    #: message that starts a turn
    images: list[str] = Field(default_factory=list, max_length=MAX_MESSAGE_IMAGES)


class BudgetIn(Body):
    """What one turn may spend (``reactchat.Budget``): each limit more than 0."""

    model_config = ConfigDict(extra="forbid")
    tokens: int | None = Field(default=None, gt=0)
    cost: float | None = Field(default=None, gt=0)
    seconds: float | None = Field(default=None, gt=0)
    tool_calls: int | None = Field(default=None, gt=0)

    def limits(self, most: Budget | None) -> Budget:
        """These limits, held within the server's ``most``."""
        return Budget(self.tokens, self.cost, self.seconds, self.tool_calls).within(most)


def create_app(
    agent: Agent | AgentFactory | ServerConfig | None = None,
    *,
    config: ServerConfig | None = None,
    turns: Turns | None = None,
) -> FastAPI:
    """The reactchat HTTP app.

    ``agent`` is an ``Agent`` (its store is used), a factory ``store -> Agent`` (given the
    store of ``config.store``), or a ``ServerConfig`` from which the default agent is
    built: ``config.model``, the built-in tools and, when ``reactchat.knowledge`` is
    installed, the uploaded-files tools. ``turns`` runs the turns (``Turns()``, in this
    process, when None; ``reactchat.server._temporal.HandedTurns`` hands them to Temporal workers).
    """
    if isinstance(agent, ServerConfig):
        config, agent = agent, None
    config = config or ServerConfig()
    if not isinstance(agent, Agent):
        store = resolve_store(config.store)
        agent = agent(store) if agent is not None else default_agent(config, store)
    store = agent.store
    files = Files.attach(agent, config.max_upload, config.file_limits)
    server = Server(config, agent, store, turns or Turns(), files, Rate(config.max_new_sessions))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # turns another worker was asked to cancel; turns of workers that died, unless
        # the turns run elsewhere (Temporal retries them on another of its workers)
        watchers = [asyncio.create_task(watch_cancels(server))]
        if server.turns.runs_here:
            watchers.append(asyncio.create_task(watch_abandoned(server)))
        if config.retention_days is not None:  # sessions idle for longer go, with their files
            kb = server.files.kb if server.files is not None else None
            watchers.append(asyncio.create_task(expire_sessions(store, config.retention_days, kb)))
        yield
        for watcher in watchers:
            await stop(watcher)
        await server.turns.stop_all()
        await close_tools(agent.toolsets)
        if server.files is not None:
            await server.files.kb.close()  # its own connection to the same database
        await store.close()

    app = FastAPI(title="reactchat", version="0.1.0", lifespan=lifespan, docs_url="/docs", redoc_url=None)
    app.state.server = server
    _error_handlers(app)
    _session_routes(app, server)
    artifact_routes(app, server)
    memory_routes(app, server)
    openai_routes(app, server)
    if find_spec("a2a") is not None:  # the agent card and A2A JSON-RPC, with the a2a extra
        from reactchat.a2a._server import a2a_routes  # here: a2a-sdk is an optional dependency

        a2a_routes(app, server)
    _page_routes(app)
    health_routes(app, store)  # /healthz, /readyz and the drain of ``reactchat serve``
    # added last, so it runs first: before the turn's shortcut (``_session_routes``) too
    app.add_middleware(
        Guard,
        token=config.token,
        users=config.users,
        max_body=config.max_body,
        max_upload=config.max_upload,
        allowed_hosts=config.allowed_hosts,
        max_uploads=config.max_uploads,
        max_session_uploads=config.max_session_uploads,
    )
    return app


def default_agent(config: ServerConfig, store: Store) -> Agent:
    """The agent of ``reactchat serve``: the configured model, a calculator, ask_user and
    ``config.tools`` as ``offered_tools`` offers them to the model (``create_app`` adds the
    uploaded files' ``search_files``); links in messages are read when ``fetch_url`` is
    among ``config.tools``."""
    tools, fetching = offered_tools(config.model, [calculator, *config.tools])
    agent = Agent(
        model=config.model,
        tools=tools,
        protocol=config.protocol,
        max_steps=config.max_steps,
        store=store,
    )
    if fetching:
        read_links_in_messages(agent)
    return agent


def _error_handlers(app: FastAPI) -> None:
    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"{exc} (POST /v1/sessions)", "not_found")

    async def busy(request: Request, exc: Exception) -> Response:
        return error(409, str(exc), "session_busy")

    async def answered(request: Request, exc: Exception) -> Response:
        return error(409, f"{exc}; reload the session to see its current state", "already_answered")

    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems, status = [], 422
        for item in exc.errors():
            loc = [str(part) for part in item.get("loc", ()) if part != "body"]
            if item.get("type") == "json_invalid":
                status = 400  # not JSON at all: a syntax error, not a validation one
                reason = (item.get("ctx") or {}).get("error", "")
                where = f" at character {loc[-1]}" if loc else ""
                problems.append(f"the body is not valid JSON ({reason}{where})" if reason else "the body is not JSON")
            elif item.get("type") == "missing" and not loc:
                problems.append("the request needs a JSON body")
            else:
                where = ".".join(loc)
                message = str(item.get("msg"))
                if (item.get("ctx") or {}).get("pattern") == SESSION_ID:
                    message = SESSION_ID_RULE
                problems.append(f"{where}: {message}" if where else message)
        return error(status, "invalid request: " + "; ".join(problems), "invalid_request_error")

    async def http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = {405: "method_not_allowed", 429: "rate_limited"}.get(exc.status_code, "invalid_request_error")
        response = error(exc.status_code, str(exc.detail), kind if exc.status_code < 500 else "server")
        response.headers.update(exc.headers or {})  # Retry-After on a 429
        if exc.status_code == 405:
            response.headers["Allow"] = _allowed(request)
        return response

    async def unavailable(request: Request, exc: Exception) -> Response:
        return error(503, f"a database is unavailable: {exc}", "unavailable")

    async def full(request: Request, exc: Exception) -> Response:
        return error(507, str(exc), "insufficient_storage")

    async def internal(request: Request, exc: Exception) -> Response:
        # the traceback goes to the server log; the client gets the kind of failure
        # (its text may hold paths, SQL or host names: those stay in the log)
        response = error(500, f"internal error ({type(exc).__name__}); the details are in the server log", "server")
        # said, so that no client sends its next request on it: uvicorn closes the
        # connection of a request whose exception reached it, once this answer is sent
        response.headers["Connection"] = "close"
        return response

    app.add_exception_handler(ConnectionError, unavailable)
    app.add_exception_handler(DiskFull, full)
    app.add_exception_handler(Exception, internal)
    app.add_exception_handler(SessionNotFound, not_found)
    app.add_exception_handler(SessionBusy, busy)
    app.add_exception_handler(AlreadyAnswered, answered)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http)


def _allowed(request: Request) -> str:
    """Every method the request's path has a route for (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def _session_routes(app: FastAPI, server: Server) -> None:
    store = server.store

    @app.post("/v1/sessions", status_code=201, responses=errors(400, *GUARDED, 413, 422, 429, *WRITES))
    async def create_session(request: Request, body: NewSession | None = None) -> SessionCreated:
        """Create a session; the body may name it (``{"session": "my-id"}``)."""
        wanted = server.scoped(request, body.session if body is not None else None)
        if wanted is not None and await store.exists(wanted):
            return SessionCreated(session=wanted, created=False)
        return SessionCreated(session=await server.create_session(request, wanted), created=True)

    @app.get("/v1/sessions", responses=errors(*GUARDED, 422, *READS))
    async def list_sessions(request: Request, limit: int = Query(default=20, ge=1, le=200)) -> dict[str, Any]:
        """The newest sessions: first question, status, turns and usage of each (under per-user
        tokens, the caller's own)."""
        user: str = getattr(request.state, USER, "")
        if not user:
            found = await summaries(store, limit)
        else:
            found = []
            for session in [s for s in await store.list_sessions(1_000_000) if owner(s) == user][:limit]:
                with contextlib.suppress(SessionNotFound):  # deleted between the listing and now
                    found.append(SessionSummary.of(session, await store.events(session)))
        return {"sessions": [s.to_dict() for s in found]}

    # a read, but the first look at the files opens the knowledge base, which writes its schema if new
    @app.get("/v1/sessions/{session}", responses=errors(*GUARDED, 404, *WRITES))
    async def get_session(session: str) -> dict[str, Any]:
        """The session's turns with their events, its status, the pending question and files."""
        if not await store.exists(session):
            raise SessionNotFound(session)
        return await session_view(server, session)

    @app.post(
        "/v1/sessions/{session}/messages",
        response_model=None,
        responses={
            **streamed("The turn's events as SSE, or with stream=false its summary as JSON"),
            **errors(400, *GUARDED, 404, 409, 413, 422, *WRITES),
        },
    )
    async def post_message(session: str, body: MessageIn) -> Response:
        """Run a turn (or answer the pending question) and stream its events as SSE."""
        most = server.config.max_budget
        budget = body.budget.limits(most) if body.budget is not None else most
        try:
            check_priced(budget, server.agent.model.name)
        except ConfigError as exc:  # a cost limit this server's model cannot keep (it has no prices)
            return error(409, str(exc), "unpriced_model")
        images = await session_images(server.store, session, body.images)
        if isinstance(images, tuple):
            status, why = images
            return error(status, why, "no_such_image" if status == 409 else "invalid_request_error")
        feed = await server.turns.start(
            server.agent, session, body.message, body.reply_to, body.output_schema, budget, images
        )
        left = server.files.left_after(session) if server.files is not None else None
        if body.stream:
            return TurnStream(sse(feed, left))
        events, failure = await feed.events()
        result = summary(session, events, failure, feed.result)
        result["events"] = [json.loads(e.model_dump_json()) for e in events]
        if failure is not None and not isinstance(failure, asyncio.CancelledError):
            result["error"] = failure_event(session, failure).message
        if left is not None:
            result["files"] = await left()
        return JSONResponse(result)

    shortcut(app, "/v1/sessions/{session}/messages", "POST", post_message, MessageIn)
    file_routes(app, server)
    follow_routes(app, server)
    cancel_routes(app, server)
    fork_routes(app, server)


async def session_view(server: Server, session: str) -> dict[str, Any]:
    """What ``GET /v1/sessions/{id}`` returns."""
    state = SessionState.from_events(session, await server.store.events(session))
    last = state.last
    pending = last.pending if last else None
    status = "running" if server.turns.is_running(session) else last.status if last else "new"
    return {
        "session": session,
        "status": status,
        "pending": pending_view(pending),
        "turns": [turn_view(turn) for turn in state.turns],
        "history": state.history(),
        "files": await server.files.list(session) if server.files is not None else [],
        "files_enabled": server.files is not None,
        # the page's first view says what the agent can do
        "tools": [{"name": t.name, "description": t.description} for t in server.agent.tools],
        "forked_from": forked_from(await server.store.origin(session)),
    }


def _page_routes(app: FastAPI) -> None:
    static = resources.files("reactchat.server") / "static"

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(static.joinpath("index.html").read_text(encoding="utf-8"), headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=str(static)), name="static")
