"""A remote A2A agent as a sub-agent: ``Agent(tools=[RemoteAgent("http://host:8000")])``.

The parent calls it like any sub-agent, with ``{"task": "..."}``; the task goes to the
remote agent as an A2A message (streamed when its card says it streams), and what comes
back is recorded in the parent's session as the events of a nested run (``agent`` = the
path, ``run`` = the call's nested run id), so that they stream out with the parent's:

* the task, as the nested run's ``UserEvent``;
* each ``working`` status update with a message, as a ``ThoughtEvent`` of that text;
* ``input-required``: an ``ActionEvent`` holding the remote task and context ids and a
  ``QuestionEvent`` — the parent's turn waits, and the user's next message (stored in the
  nested run, as for any sub-agent's question) goes to the remote task as its answer;
* ``completed``: an ``AnswerEvent``, whose text is the parent's observation.

A failed, rejected or cancelled remote task is an error observation: the parent decides
what to do. After a crash the call continues from what is stored: an answer is given
again, an unanswered question still waits; a task that was under way is sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    ROLE_USER,
    TASK_STATE_AUTH_REQUIRED,
    TASK_STATE_CANCELED,
    TASK_STATE_COMPLETED,
    TASK_STATE_FAILED,
    TASK_STATE_INPUT_REQUIRED,
    TASK_STATE_REJECTED,
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    SendMessageRequest,
    StreamResponse,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import A2AError

from reactchat.messages import ActionEvent, AnswerEvent, Event, ObservationEvent, QuestionEvent, ThoughtEvent, UserEvent
from reactchat.protocols.base import ToolResult
from reactchat.tools import Tool

if TYPE_CHECKING:
    from reactchat.engine.loop import Loop
    from reactchat.protocols.base import Call

#: the states that end an exchange with neither an answer nor a question, as the parent is told
_ENDED = {
    TASK_STATE_FAILED: "failed",
    TASK_STATE_CANCELED: "was cancelled",
    TASK_STATE_REJECTED: "refused the task",
    TASK_STATE_AUTH_REQUIRED: "needs authentication",
}
#: seconds to wait for the remote agent between two updates of a stream
READ_TIMEOUT = 120.0


class RemoteAgent(Tool):
    """A remote A2A agent at ``url`` (its base URL: the card is at
    ``<url>/.well-known/agent-card.json``) as a tool whose input is ``{"task": ...}``.

    ``name`` and ``description`` are what the model is told (by default from the URL; use
    ``await RemoteAgent.discover(url)`` to take them from the agent's card); ``token`` is
    sent as ``Authorization: Bearer <token>``, ``headers`` on every request.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        description: str | None = None,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        card: AgentCard | None = None,
    ) -> None:
        def delegate(task: str) -> str:
            """Args:
            task: everything the agent needs to know to do the task, in one message.
            """
            raise TypeError("a remote agent runs inside its parent's loop (RemoteAgent.stream), not as a function")

        name = name or _name_of(url)
        description = description or f"The remote agent at {url}: give it a task, it answers."
        super().__init__(delegate, name=name, description=description, timeout=None, idempotent=True)
        self.url = url.rstrip("/")
        self.headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        #: the agent's card, fetched on the first call unless given
        self.card = card
        #: the loop runs this tool through ``stream`` (its events are the parent's to yield)
        self.streams = True

    @classmethod
    async def discover(
        cls, url: str, *, token: str | None = None, headers: dict[str, str] | None = None
    ) -> RemoteAgent:
        """A ``RemoteAgent`` named and described by the card the agent at ``url`` publishes."""
        remote = cls(url, token=token, headers=headers)
        async with remote._http() as http:
            card = await A2ACardResolver(http, remote.url).get_agent_card()
        name = re.sub(r"[^A-Za-z0-9_]+", "_", card.name).strip("_") or remote.name
        return cls(url, name=name, description=card.description or None, token=token, headers=headers, card=card)

    def stream(self, call: Call, parent: Loop, arguments: dict[str, Any]) -> AsyncIterator[Event | ToolResult]:
        """Send the task (or the user's answer to the remote agent's question) and record
        what comes back: the events, then the parent's ``ToolResult`` (none while the
        remote agent waits for the user)."""
        return self._delegate(call, parent, str(arguments["task"]))

    async def _delegate(self, call: Call, parent: Loop, task: str) -> AsyncIterator[Event | ToolResult]:
        nested = f"{parent.run}/{call.call_id}" if parent.run else call.call_id
        # the nested run's place; its task is step 0 and the rest step 1 (a reply, not a task)
        where: dict[str, Any] = {"session": parent.session, "turn": parent.turn, "step": 1}
        where |= {"agent": f"{parent.agent}/{self.name}", "run": nested}
        mine = [e for e in parent.stored if e.run == nested]
        answer = next((e for e in mine if isinstance(e, AnswerEvent)), None)
        if answer is not None:  # answered before a crash: the same answer again
            yield ToolResult(answer.text)
            return
        message = Message(message_id=uuid.uuid4().hex, role=ROLE_USER, parts=[Part(text=task)])
        asked = _asked(mine)
        if asked is not None:
            action, question, reply = asked
            if reply is None:
                return  # the user has not answered yet: the parent still waits
            message.parts[0].text = reply
            ids = action.input if isinstance(action.input, dict) else {}
            message.task_id, message.context_id = str(ids.get("task_id", "")), str(ids.get("context_id", ""))
            if not any(isinstance(e, ObservationEvent) and e.call_id == question.call_id for e in mine):
                observed = ObservationEvent(call_id=question.call_id, tool=self.name, text=reply, **where)
                yield await _append(parent, observed)
        elif not mine:
            yield await _append(parent, UserEvent(text=task, **{**where, "step": 0}))
        async for item in self._exchange(message, where, parent, len(mine)):
            yield item

    async def _exchange(
        self, message: Message, where: dict[str, Any], parent: Loop, seen: int
    ) -> AsyncIterator[Event | ToolResult]:
        """Send ``message`` and turn the remote agent's answers into events and the result."""
        exchange = _Exchange()
        async with self._http() as http:
            try:
                if self.card is None:
                    self.card = await A2ACardResolver(http, self.url).get_agent_card()
                client = ClientFactory(ClientConfig(httpx_client=http)).create(self.card)
                async for response in client.send_message(SendMessageRequest(message=message)):
                    text = exchange.add(response)
                    if text:
                        yield await _append(parent, ThoughtEvent(text=text, **where))
            except asyncio.CancelledError:
                if exchange.task:  # the parent's turn was stopped: so is the remote task
                    with contextlib.suppress(Exception):
                        await asyncio.shield(client.cancel_task(CancelTaskRequest(id=exchange.task)))
                raise
            except (A2AError, httpx.HTTPError, ValueError) as error:  # unreachable, refused, or off the protocol
                yield ToolResult(f"Error: {self.name} at {self.url} failed: {type(error).__name__}: {error}", True)
                return
        if exchange.state == TASK_STATE_INPUT_REQUIRED:
            ids = {"task_id": exchange.task, "context_id": exchange.context}
            call_id = f"{where['run']}-q{seen}"
            action = ActionEvent(call_id=call_id, tool=self.name, input=ids, **where)
            question = QuestionEvent(call_id=call_id, question=exchange.said or "(the agent asks for input)", **where)
            await parent.store.append(action, question)
            yield action
            yield question
        elif exchange.state == TASK_STATE_COMPLETED or exchange.message is not None:
            text = exchange.answer()
            yield await _append(parent, AnswerEvent(text=text, **where))
            yield ToolResult(text)
        else:
            why = _ENDED.get(exchange.state, "stopped") if exchange.state is not None else "answered nothing"
            yield ToolResult(f"Error: {self.name} {why}: {exchange.said}".rstrip(": "), True)

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers=self.headers, timeout=httpx.Timeout(30.0, read=READ_TIMEOUT))


class _Exchange:
    """What the remote agent said so far in one exchange: its task, its state, its words."""

    def __init__(self) -> None:
        self.task = ""
        self.context = ""
        self.state: TaskState | None = None
        #: the text of the last status message (a question, a reason, an answer)
        self.said = ""
        self.artifacts: dict[str, str] = {}
        self.message: str | None = None

    def add(self, response: StreamResponse) -> str:
        """Fold one response in; the text of a ``working`` update, to record as a step."""
        kind = response.WhichOneof("payload")
        if kind == "task":
            self.task, self.context = response.task.id, response.task.context_id
            for artifact in response.task.artifacts:
                self.artifacts[artifact.artifact_id] = _text(artifact.parts)
            return self._status(response.task.status)
        if kind == "status_update":
            self.task, self.context = response.status_update.task_id, response.status_update.context_id
            return self._status(response.status_update.status)
        if kind == "artifact_update":
            update = response.artifact_update
            before = self.artifacts.get(update.artifact.artifact_id, "") if update.append else ""
            self.artifacts[update.artifact.artifact_id] = before + _text(update.artifact.parts)
        elif kind == "message":
            self.message = _text(response.message.parts)
        return ""

    def _status(self, status: TaskStatus) -> str:
        self.state = status.state
        text = _text(status.message.parts) if status.HasField("message") else ""
        if text:
            self.said = text
        return "" if status.state in (TASK_STATE_COMPLETED, TASK_STATE_INPUT_REQUIRED, *_ENDED) else text

    def answer(self) -> str:
        """The final answer: the artifacts' text, else the last message."""
        if self.message is not None:
            return self.message
        return "\n\n".join(t for t in self.artifacts.values() if t) or self.said


def _text(parts: Any) -> str:
    return "\n\n".join(part.text for part in parts if part.WhichOneof("content") == "text")


def _asked(mine: list[Event]) -> tuple[ActionEvent, QuestionEvent, str | None] | None:
    """The remote agent's last question in this nested run, with its action and the user's
    reply (None while unanswered); None when it asked nothing."""
    question = next((e for e in reversed(mine) if isinstance(e, QuestionEvent)), None)
    if question is None:
        return None
    action = next(e for e in mine if isinstance(e, ActionEvent) and e.call_id == question.call_id)
    # the reply is stored after the question (an answer sent before a crash is sent again)
    reply = next((e.text for e in mine[mine.index(question) + 1 :] if isinstance(e, UserEvent)), None)
    return action, question, reply


async def _append(parent: Loop, event: Event) -> Event:
    """Make an event of the nested run durable (stamped already)."""
    await parent.store.append(event)
    return event


def _name_of(url: str) -> str:
    """A tool name for the agent at ``url``: ``remote_<host>_<port>``."""
    host = httpx.URL(url).netloc.decode()
    return "remote_" + re.sub(r"[^A-Za-z0-9]+", "_", host).strip("_")
