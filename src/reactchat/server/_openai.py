"""The OpenAI-compatible endpoint: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Any OpenAI client can talk to the agent. What it sees:

* ``choices[0].message.content`` is the final answer, or the agent's pending
  ask_user question; the next user message then answers that question and the run
  resumes with its reasoning intact;
* ``choices[0].message.reasoning_content`` holds the steps (Thought / Action /
  Observation) as text; when streaming, each step arrives as a delta with
  ``reasoning_content`` the moment it is durable, the answer as a ``content`` delta;
* ``reactchat`` (an extra top-level field; in the last chunk when streaming) holds
  ``session``, ``status`` (done, waiting, stopped) and ``reply_to``. The ``X-Session-Id``
  response header holds the session too.

Which session a request belongs to:

1. explicit: ``session_id`` in the body (``extra_body={"session_id": ...}``),
   ``metadata={"session_id": ...}`` or the ``X-Session-Id`` header. The store holds the
   history; only the last user message is used, and it answers a pending question.
2. otherwise, derived from the messages, so a stateless client resumes a pending question:
   a turn started by messages ``M`` runs in session ``oa-HMAC(key, caller, user, M)``; a request whose
   messages end ``…, user U, assistant Q, user A`` answers question ``Q`` of the session
   derived from the messages up to ``U`` (looking further back over earlier question/answer
   pairs of the same turn) if that session still waits on ``Q``. A new turn's session is
   seeded with the earlier user/assistant pairs as its history. ``user`` (or
   ``safety_identifier``) is part of the hash: set it to keep identical conversations of
   different people apart.

Who can use a derived session: its id is keyed (HMAC-SHA256) with a secret only the
server holds, so nobody can compute it from a conversation they know or guess. The key
is ``REACTCHAT_SECRET`` (``ServerConfig.secret``) if set, else the caller's bearer
token, else a random secret kept in ``secret`` beside the default database (created on
first use, mode 0600): workers of one deployment derive the same ids. Under per-user
tokens the caller's name is part of the derivation and of the id (``alice:oa-…``), so
another user's request can never land in it, and ``GET /v1/sessions/{id}`` of another
user's session is a 404. A client cannot name a session ``oa-…`` itself: derived ids
come only from the server.

System messages and client-side ``tools`` are not passed to the agent (the server's
agent has its own instructions and tools) and system messages are not part of the hash
(clients often rewrite them per request); the ``model`` field is echoed back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ConfigDict, Field, StrictBool, field_validator

from reactchat.engine.session import SessionState, Turn
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    ErrorEvent,
    Event,
    ObservationEvent,
    PlanEvent,
    QuestionEvent,
    ThoughtEvent,
    UserEvent,
)
from reactchat.orchestration.plan import checklist
from reactchat.server._guard import DERIVED_PREFIX, USER, callers
from reactchat.server._schema import (
    GUARDED,
    HAS_USER_TEXT,
    SESSION_ID,
    SESSION_ID_RULE,
    WRITES,
    Body,
    error,
    errors,
    streamed,
)
from reactchat.server._turns import KEEPALIVE, Delta, Last, TurnFeed, TurnStream, failure_event, summary

if TYPE_CHECKING:
    from reactchat.server._server import Server

#: how far back to look for the question a message answers (question/answer pairs)
MAX_QUESTIONS = 20
#: suffixes tried when two conversations hash alike (the same conversation sent twice)
MAX_TWINS = 20


class ChatMessage(Body):
    """One OpenAI chat message; ``content`` may be a string or a list of parts."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None

    @property
    def text(self) -> str:
        """The text of the message (text parts joined)."""
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") in ("text", "input_text"))
        return self.content or ""


class ChatRequest(Body):
    """The part of an OpenAI chat completion request the agent uses; other fields are accepted."""

    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[ChatMessage] = Field(min_length=1, json_schema_extra=HAS_USER_TEXT)
    stream: StrictBool = False
    user: str | None = None
    safety_identifier: str | None = None
    metadata: dict[str, str] | None = Field(
        default=None, json_schema_extra={"properties": {"session_id": {"type": "string", "pattern": SESSION_ID}}}
    )
    session_id: str | None = Field(default=None, pattern=SESSION_ID)

    @field_validator("metadata")
    @classmethod
    def _metadata_session(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value and "session_id" in value and not re.fullmatch(SESSION_ID, value["session_id"]):
            raise ValueError(f"metadata.session_id: {SESSION_ID_RULE}")
        return value

    stream_options: dict[str, Any] | None = None
    #: ``{"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}}`` types the answer
    response_format: dict[str, Any] | None = None


def _answer_schema(body: ChatRequest) -> dict[str, Any] | None:
    """The JSON schema of ``response_format`` (``json_schema``; ``json_object`` is any object)."""
    wanted = body.response_format or {}
    if wanted.get("type") == "json_schema":
        schema = (wanted.get("json_schema") or {}).get("schema")
        return dict(schema) if isinstance(schema, dict) else {"type": "object"}
    if wanted.get("type") == "json_object":
        return {"type": "object"}
    return None


def openai_routes(app: FastAPI, server: Server) -> None:
    """Register ``/v1/models`` and ``/v1/chat/completions``."""

    @app.get("/v1/models", responses=errors(*GUARDED))
    async def models() -> dict[str, Any]:
        """The one model this server serves (the agent)."""
        return {
            "object": "list",
            "data": [{"id": server.config.served_model, "object": "model", "created": 0, "owned_by": "reactchat"}],
        }

    @app.post(
        "/v1/chat/completions",
        response_model=None,
        responses={
            **streamed("A chat.completion, or chat.completion.chunk events when stream is true"),
            **errors(400, *GUARDED, 409, 413, 422, 429, 502, *WRITES),
        },
    )
    async def chat_completions(
        request: Request, body: ChatRequest, x_session_id: str | None = Header(default=None, pattern=SESSION_ID)
    ) -> Response:
        """Run the agent on the conversation's last user message."""
        talk = [m for m in body.messages if m.role in ("user", "assistant")]
        asking = [n for n, m in enumerate(talk) if m.role == "user" and m.text.strip()]
        if not asking:
            return error(422, "invalid request: the messages hold no user message with text", "invalid_request_error")
        talk = talk[: asking[-1] + 1]  # the agent answers the last user message; what follows it is ignored
        explicit = body.session_id or (body.metadata or {}).get("session_id") or x_session_id
        if explicit and not re.fullmatch(SESSION_ID, explicit):
            return error(422, f"invalid request: {SESSION_ID_RULE} (the server derives those)", "invalid_request_error")
        scoped = server.scoped(request, explicit)
        if scoped:
            if not await server.store.exists(scoped):
                await server.create_session(request, scoped)
            session, reply_to = scoped, None
        else:
            caller = Caller(request, server)
            session, reply_to = await _derive_session(caller, body, talk)
        feed = await server.turns.start(server.agent, session, talk[-1].text, reply_to, _answer_schema(body))
        model = body.model or server.config.served_model
        completion = f"chatcmpl-{uuid.uuid4().hex}"
        headers = {"X-Session-Id": session}
        if body.stream:
            usage = bool((body.stream_options or {}).get("include_usage"))
            chunks = _chunks(feed, completion, model, usage)
            return TurnStream(chunks, headers)
        events, failure = await feed.events()
        if failure is not None:
            return error(502, failure_event(session, failure).message, "agent_error")
        return JSONResponse(_completion(session, events, completion, model), headers=headers)


# --------------------------------------------------------------- session mapping


class Caller:
    """Who a request comes from, for deriving its sessions: the key, the user and the store."""

    def __init__(self, request: Request, server: Server) -> None:
        self.request = request
        self.server = server
        self.store = server.store
        self.user: str = getattr(request.state, USER, "")
        self.key = derivation_key(server, self.user)

    def derive(self, body: ChatRequest, messages: list[ChatMessage]) -> str:
        """The session id of a conversation for this caller."""
        # system messages stay out: clients often rewrite them per request (a date, a locale)
        who = body.user or body.safety_identifier or ""
        data = json.dumps([self.user, who, [(m.role, m.text) for m in messages]], ensure_ascii=False)
        digest = hmac.new(self.key, data.encode(), hashlib.sha256).hexdigest()[:32]
        return f"{self.user}:{DERIVED_PREFIX}{digest}" if self.user else f"{DERIVED_PREFIX}{digest}"


def derivation_key(server: Server, user: str) -> bytes:
    """The key of derived session ids (see the module docstring)."""
    config = server.config
    secret = config.secret or os.environ.get("REACTCHAT_SECRET")
    if not secret:
        token = callers(config.token, config.users).get(user)
        secret = token or machine_secret()
    return secret.encode()


def machine_secret() -> str:
    """A random secret kept in ``secret`` beside the default database, made on first use."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "reactchat"
    path = base / "secret"
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    base.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another worker made it first
        return path.read_text(encoding="ascii").strip()
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(secrets.token_hex(32))
    return path.read_text(encoding="ascii").strip()


def _twins(key: str) -> list[str]:
    return [key] + [f"{key}-{n}" for n in range(2, MAX_TWINS + 1)]


async def _derive_session(caller: Caller, body: ChatRequest, talk: list[ChatMessage]) -> tuple[str, str | None]:
    """The session waiting on the question this message answers, else a new one for this turn."""
    store = caller.store
    asked = talk[-2].text if len(talk) >= 2 and talk[-2].role == "assistant" else None
    if asked is not None:
        end = len(talk) - 2  # talk[end - 1] is the user message before the question
        for _ in range(MAX_QUESTIONS):
            if end < 1 or talk[end - 1].role != "user":
                break
            for candidate in _twins(caller.derive(body, talk[:end])):
                if not await store.exists(candidate):
                    break
                last = SessionState.from_events(candidate, await store.events(candidate)).last
                pending = last.pending if last else None
                if pending is not None and pending.question.strip() == asked.strip():
                    return candidate, pending.call_id
            end -= 2  # an earlier question of the same turn: …, user U, assistant Q1, user A1, assistant Q2
            if end < 1 or talk[end].role != "assistant":
                break
    return await _new_session(caller, body, talk), None


async def _new_session(caller: Caller, body: ChatRequest, talk: list[ChatMessage]) -> str:
    store = caller.store
    owner = uuid.uuid4().hex
    for candidate in _twins(caller.derive(body, talk)):
        if await store.exists(candidate):
            continue  # the same conversation again (a retry, a regenerate): a fresh twin
        await caller.server.create_session(caller.request, candidate)  # a no-op if another worker just did
        if not await store.try_lock(candidate, owner, 60.0):
            continue
        try:
            if await store.events(candidate):
                continue
            seed: list[UserEvent | AnswerEvent] = []
            for turn, (question, answer) in enumerate(_pairs(talk[:-1]), start=1):
                seed += [UserEvent(session=candidate, turn=turn, text=question)]
                seed += [AnswerEvent(session=candidate, turn=turn, text=answer)]
            if seed:
                await store.append(*seed)  # the earlier exchanges as history, in one transaction
            return candidate
        finally:
            await store.unlock(candidate, owner)
    return await caller.server.create_session(caller.request)


def _pairs(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    """Earlier (user, assistant) exchanges, consecutive messages of one role joined."""
    pairs: list[tuple[str, str]] = []
    question: list[str] = []
    for message in messages:
        if message.role == "user":
            question.append(message.text)
        elif question:
            pairs.append(("\n".join(question), message.text))
            question = []
    return pairs


# --------------------------------------------------------------------- responses


def reasoning(event: Event) -> str:
    """One event as a line of the visible reasoning (empty for events that are not steps).

    A sub-agent's lines (a plan step's, a trial's) are labelled with its path below the top.
    """
    text = _step_text(event)
    if not text or "/" not in event.agent:
        return text
    label = event.agent.split("/", 1)[1]
    return "".join(f"[{label}] {line}\n" for line in text.splitlines())


def _step_text(event: Event) -> str:
    if isinstance(event, UserEvent) and event.run:  # its task, or (step > 0) the reply to its question
        return f"{'Reply' if event.step else 'Task'}: {event.text}\n"
    if isinstance(event, PlanEvent) and event.decision != "continue":
        return f"Plan (version {event.version}):\n{checklist(event.steps)}\n"
    if isinstance(event, AnswerEvent) and event.run:
        return f"{'Thought: ' + event.thought + chr(10) if event.thought else ''}Answer: {event.text}\n"
    if isinstance(event, ThoughtEvent) and event.text:
        return f"Thought: {event.text}\n"
    if isinstance(event, ActionEvent):
        value = event.input if isinstance(event.input, str) else json.dumps(event.input, ensure_ascii=False)
        return f"Action: {event.tool}\nAction Input: {value}\n"
    if isinstance(event, ObservationEvent):
        return f"Observation: {event.text}\n"
    if isinstance(event, ErrorEvent) and event.correction:
        return f"Observation: {event.message}\n"
    if isinstance(event, AnswerEvent) and event.thought:
        return f"Thought: {event.thought}\n"
    return ""


def _content(end: dict[str, Any]) -> str:
    return str(end["answer"] if end["answer"] is not None else end["question"] or "")


def _extra(end: dict[str, Any]) -> dict[str, Any]:
    return {key: end[key] for key in ("session", "status", "turn", "reply_to", "reason")}


def _usage(events: list[Event]) -> dict[str, int]:
    usage = Turn(0, "", events).usage
    total = usage.input_tokens + usage.output_tokens
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens, "total_tokens": total}


def _completion(session: str, events: list[Event], completion: str, model: str) -> dict[str, Any]:
    end = summary(session, events)
    last = [e for e in events if e.turn == end["turn"]]
    return {
        "id": completion,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": _content(end),
                    "reasoning_content": "".join(reasoning(e) for e in last),
                },
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(last),
        "reactchat": _extra(end),
    }


async def _chunks(feed: TurnFeed, completion: str, model: str, include_usage: bool) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        body = {"id": completion, "object": "chat.completion.chunk", "created": created, "model": model}
        return f"data: {json.dumps({**body, 'choices': [choice], **extra}, ensure_ascii=False)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    events: list[Event] = []
    async for item in feed.items(KEEPALIVE):
        if item is None:
            yield ": keepalive\n\n"
        elif isinstance(item, Delta):
            continue  # raw ReAct text: the steps follow as reasoning_content
        elif isinstance(item, BaseException):
            message = failure_event(feed.session, item).message
            yield f"data: {json.dumps({'error': {'message': message, 'type': 'agent_error', 'code': 502}})}\n\n"
            return
        else:
            events.append(item)
            text = reasoning(item) if not isinstance(item, QuestionEvent) else ""
            if text:
                yield chunk({"reasoning_content": text})
    end = summary(feed.session, events)
    tail = [chunk({"content": _content(end)}), chunk({}, "stop", reactchat=_extra(end))]
    if include_usage:  # as OpenAI does: one more chunk, with no choices
        body = {"id": completion, "object": "chat.completion.chunk", "created": created, "model": model}
        usage = _usage([e for e in events if e.turn == end["turn"]])
        tail.append(f"data: {json.dumps({**body, 'choices': [], 'usage': usage})}\n\n")
    yield Last("".join([*tail, "data: [DONE]\n\n"]))  # one write
