"""``reactchat chat``: the interactive loop, its slash commands and its prompts."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any, TextIO

from reactchat.knowledge._cli import HELP, chat_command
from reactchat.messages import AnswerEvent, Event, QuestionEvent, UserEvent

if TYPE_CHECKING:
    from reactchat.cli.main import Trace

COMMANDS = f"/new starts a new session, /history shows this one, {HELP}, /help lists these, /quit leaves"
#: the commands that upload, list and forget files (knowledge/_cli.py)
FILE_COMMANDS = ("/upload", "/files", "/clear")


async def chat_loop(agent: Any, session: str | None, trace: Trace, resume: str, out: TextIO, err: TextIO) -> int:
    """Read lines until ``/quit`` or Ctrl-D; ``resume`` is the command that continues a
    session, printed with its id at the start and at the end."""
    session = session or await agent.store.create_session()
    print(f"reactchat chat: {COMMANDS}.", file=out)
    print(f"session {session}", file=out)
    waiting = await _waits_for_answer(agent, session)
    while True:
        try:
            line = await asyncio.to_thread(input, "answer> " if waiting else "you> ")
        except EOFError:  # Ctrl-D: end the prompt's line so the shell's does not follow it
            print(file=out)
            line = "/quit"
        text = line.strip()
        command = text.split(" ", 1)[0] if text.startswith("/") else ""
        if not text:
            continue
        if command in ("/quit", "/exit"):
            print(f"session {session} · resume with: {resume} --session {session}", file=out)
            return 0
        if command == "/new":
            session = await agent.store.create_session()
            print(f"(new session) {session}", file=out)
        elif command in FILE_COMMANDS:
            session = await chat_command(agent, session, text, out, err) or session
        elif command == "/history":
            print(await history_text(agent, session), file=out)
        elif command:  # /help and any /word the chat does not know: never sent to the agent
            note = "" if command == "/help" else f"{command} is not a command. "
            print(f"{note}Commands: {COMMANDS}.", file=out)
        else:
            session = await chat_turn(agent, text, session, trace, err)
        waiting = await _waits_for_answer(agent, session)


async def _waits_for_answer(agent: Any, session: str) -> bool:
    last = (await agent.state(session)).last
    return last is not None and last.status == "waiting"


async def history_text(agent: Any, session: str) -> str:
    """The session as a person reads it: their messages, the agent's questions, their
    answers to them and the agent's answers."""
    lines: list[str] = []
    for turn in (await agent.state(session)).turns:
        lines.extend(line for event in turn.events if (line := _history_line(event)) is not None)
    return "\n".join(lines) or "(no messages yet)"


def _history_line(event: Event) -> str | None:
    if event.run:  # a sub-agent's exchange is its parent's business
        return None
    if isinstance(event, UserEvent):  # a reply to a question is stored in the turn, after it
        return f"{'you answered' if event.step else 'you'}: {event.text}"
    if isinstance(event, QuestionEvent):
        return f"agent asked: {event.question}"
    if isinstance(event, AnswerEvent):
        return f"agent: {event.text}"
    return None


async def chat_turn(agent: Any, text: str, session: str, trace: Trace, err: TextIO) -> str:
    """One turn of ``reactchat chat``; Ctrl-C stops this turn (recorded as cancelled), not the chat."""
    shown: list[str] = []

    async def turn() -> None:
        async for event in agent.stream(text, session):
            shown.append(event.session)
            trace.show(event)

    task = asyncio.ensure_future(turn())
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers off the main thread
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise  # the chat itself is being stopped
        trace.stop_spinner()
        print(trace.paint("error", "(stopped: the turn is recorded as cancelled)"), file=err)
    except Exception as exc:  # keep the chat alive; the turn is durable and resumable
        trace.stop_spinner()  # "working…" would otherwise sit in front of the message
        print(trace.paint("error", f"error: {exc}"), file=err)
    finally:
        trace.stop_spinner()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    return shown[-1] if shown else session
