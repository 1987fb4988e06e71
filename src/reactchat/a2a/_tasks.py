"""Sessions and turns as A2A contexts and tasks: the ids, the messages, the task's state.

A context is a session (its id is the session id); a task is one turn of it, with the id
``<session>/<turn>`` (a session id never holds a ``/``), so that any worker can answer
for any task from the store alone.
"""

from __future__ import annotations

import uuid

from a2a.types.a2a_pb2 import (
    ROLE_AGENT,
    ROLE_USER,
    TASK_STATE_CANCELED,
    TASK_STATE_COMPLETED,
    TASK_STATE_FAILED,
    TASK_STATE_INPUT_REQUIRED,
    TASK_STATE_WORKING,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

from reactchat.engine.session import Turn
from reactchat.messages import AnswerEvent, ErrorEvent, QuestionEvent, UserEvent

#: the name of the artifact that holds a task's final answer
ANSWER = "answer"


def task_id(session: str, turn: int) -> str:
    """The A2A task id of turn ``turn`` of ``session``."""
    return f"{session}/{turn}"


def parse_task_id(task: str) -> tuple[str, int] | None:
    """The session and turn of a task id, or None when it is not one of ours."""
    session, _, turn = task.rpartition("/")
    if not session or not turn.isdigit():
        return None
    return session, int(turn)


def text_of(message: Message) -> str:
    """The text of a message: its text parts, joined by blank lines."""
    return "\n\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")


def message(text: str, role: Role, context: str, task: str) -> Message:
    """A one-part text message of ``role`` in task ``task`` of context ``context``."""
    return Message(message_id=uuid.uuid4().hex, role=role, parts=[Part(text=text)], context_id=context, task_id=task)


def status(state: TaskState, text: str | None, context: str, task: str) -> TaskStatus:
    """A task status, with the agent's message ``text`` when there is one."""
    if text is None:
        return TaskStatus(state=state)
    return TaskStatus(state=state, message=message(text, ROLE_AGENT, context, task))


def answer_artifact(text: str) -> Artifact:
    """The artifact that carries a final answer."""
    return Artifact(artifact_id=ANSWER, name=ANSWER, parts=[Part(text=text)])


def turn_status(turn: Turn, context: str, running: bool) -> TaskStatus:
    """Where a turn stands, as an A2A status: ``input-required`` with the question while it
    waits, ``completed`` with the answer, ``failed`` with why (a guard stopped it, or its
    model failed and nothing runs it), ``canceled``, else ``working``."""
    task = task_id(context, turn.index)
    outcome = turn.outcome
    if outcome.pending is not None:
        return status(TASK_STATE_INPUT_REQUIRED, outcome.pending.question, context, task)
    answer = outcome.answer
    if answer is not None and answer.status == "done":
        return status(TASK_STATE_COMPLETED, answer.text, context, task)
    if answer is not None and answer.status == "cancelled":
        return status(TASK_STATE_CANCELED, answer.text or None, context, task)
    if answer is not None:
        reason = answer.reason or answer.status
        return status(TASK_STATE_FAILED, f"stopped before finishing ({reason}): {answer.text}", context, task)
    failed = next((e for e in reversed(turn.events) if isinstance(e, ErrorEvent) and not e.correction), None)
    if failed is not None and not running:
        return status(TASK_STATE_FAILED, f"{failed.message} (the context's next message resumes it)", context, task)
    return status(TASK_STATE_WORKING, None, context, task)


def turn_task(turn: Turn, context: str, running: bool, history: int | None = None) -> Task:
    """A turn as an A2A task: its status, its answer as an artifact, and its history (the
    user's message and replies, the agent's questions; the last ``history`` of them)."""
    task = task_id(context, turn.index)
    said: list[Message] = []
    for event in turn.events:
        if isinstance(event, UserEvent) and not event.run:
            said.append(message(event.text, ROLE_USER, context, task))
        elif isinstance(event, QuestionEvent) and not event.run:
            said.append(message(event.question, ROLE_AGENT, context, task))
    if history is not None:
        said = said[-history:] if history else []
    answer = turn.outcome.answer
    done = isinstance(answer, AnswerEvent) and answer.status == "done"
    return Task(
        id=task,
        context_id=context,
        status=turn_status(turn, context, running),
        history=said,
        artifacts=[answer_artifact(answer.text)] if done and answer is not None else [],
    )
