"""The ``reactchat`` command: ``ask``, ``chat``, ``sessions``, ``show``, ``fork``, ``serve``, ``mcp``,
and ``export``, ``import`` and ``replay`` (cli/record.py).

Exit status of ``reactchat ask``: 0 answered, 3 waiting for the user's answer (the
question and the session id are printed; ``reactchat ask --session ID "reply"``
resumes), 4 stopped by a guard (step budget, repeated actions), 1 an error the
operator must fix, 2 bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, ClassVar, TextIO

from reactchat.cli import artifacts, record, worker
from reactchat.cli import eval as eval_verb
from reactchat.cli import memory as memory_cli
from reactchat.cli.report import raw_reply, skipped_link
from reactchat.cli.retention import days
from reactchat.cli.tool_refs import close_tools
from reactchat.engine.budget import Budget
from reactchat.errors import ReactchatError
from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    ErrorEvent,
    Event,
    LinkSkippedEvent,
    ObservationEvent,
    PlanEvent,
    QuestionEvent,
    ThoughtEvent,
    TrialEvent,
    UserEvent,
)
from reactchat.orchestration.plan import checklist
from reactchat.store import default_db, store_url

EXIT_WAITING = 3
#: the verbs of cli/record.py, by name, filled in when the parser is made
RECORDED: dict[str, record.Verb] = {}
EXIT_STOPPED = 4


class Trace:
    """Prints events as they arrive, with colour and a spinner on a terminal."""

    COLOURS: ClassVar[dict[str, str]] = {
        "thought": "36",
        "action": "33",
        "observation": "2",
        "question": "35",
        "answer": "32",
        "error": "31",
    }

    def __init__(self, out: TextIO, err: TextIO, quiet: bool = False) -> None:
        self.out, self.err, self.quiet = out, err, quiet
        self.colour = out.isatty() and "NO_COLOR" not in os.environ
        self.spin = err.isatty() and not quiet
        self._spinner: asyncio.Task[None] | None = None

    def paint(self, kind: str, text: str) -> str:
        """Colour ``text`` for a kind of event (plain when not on a terminal)."""
        if not self.colour:
            return text
        return f"\x1b[{self.COLOURS.get(kind, '0')}m{text}\x1b[0m"

    def show(self, event: Event) -> None:
        """Print one event."""
        self.stop_spinner()
        if self.quiet:
            return
        line = _describe(event)
        if line is not None:
            print(self.paint(event.type, _nested(event, line)), file=self.out, flush=True)
        self.start_spinner()

    def start_spinner(self) -> None:
        """Show that the model is working until the next event."""
        if self.spin and self._spinner is None:
            self._spinner = asyncio.get_running_loop().create_task(self._spin())

    def stop_spinner(self) -> None:
        """Remove the spinner."""
        if self._spinner is not None:
            self._spinner.cancel()
            self._spinner = None
            self.err.write("\r\x1b[K")
            self.err.flush()

    async def _spin(self) -> None:
        for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
            self.err.write(f"\r{frame} working…")
            self.err.flush()
            await asyncio.sleep(0.1)


def _nested(event: Event, line: str) -> str:
    """A sub-agent's line, indented by its depth and labelled with its path below the top."""
    if "/" not in event.agent:
        return line
    below = event.agent.split("/", 1)[1]
    indent = "  " * below.count("/") + "  "
    return "\n".join(f"{indent}[{below}] {part}" for part in line.split("\n"))


def _describe(event: Event) -> str | None:
    if isinstance(event, UserEvent):
        # a nested run's first message is its task; a later one (step > 0) answers its question
        return f"{'Reply' if event.step else 'Task'}: {event.text}" if event.run else None
    if isinstance(event, PlanEvent):
        if event.decision == "continue":
            return None
        head = "Plan" if event.decision == "plan" else f"Plan revised (version {event.version})"
        return f"{head}:\n" + "\n".join(f"  {line}" for line in checklist(event.steps).splitlines())
    if isinstance(event, TrialEvent):
        if event.accepted:
            return f"Trial {event.trial} accepted ({event.evaluator})"
        return f"Trial {event.trial} rejected ({event.evaluator}): {event.feedback}\nReflection: {event.reflection}"
    if isinstance(event, ThoughtEvent):
        return f"Thought: {event.text}" if event.text else None
    if isinstance(event, ActionEvent):
        value = event.input if isinstance(event.input, str) else json.dumps(event.input, ensure_ascii=False)
        return f"Action: {event.tool} {value}"
    if isinstance(event, ObservationEvent):
        text = event.text if len(event.text) <= 400 else event.text[:400] + " …"
        return f"Observation{' (error)' if event.is_error else ''}: {text}"
    if isinstance(event, QuestionEvent):
        return f"Question for you: {event.question}"
    if isinstance(event, AnswerEvent):
        prefix = f"Thought: {event.thought}\n" if event.thought else ""
        note = f" (stopped: {event.reason}; best effort)" if event.status == "stopped" else ""
        return f"{prefix}{'Answer' if event.run else 'Final Answer'}{note}: {event.text}"
    if isinstance(event, ErrorEvent):
        if event.correction:
            return f"Format error, correction sent: {event.message}{raw_reply(event)}"
        return f"Error: {event.message}"
    if isinstance(event, LinkSkippedEvent):
        return skipped_link(event)
    return None


def command_tools(model: str, tools: str | None = None, mcp: str | None = None) -> tuple[list[Any], bool]:
    """The tools ``reactchat ask`` and ``chat`` give the agent (the calculator and the
    configured tools, as ``offered_tools`` offers them to ``model``), and whether links in
    the user's messages are read (the ``web`` extra is installed)."""
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.cli.tool_refs import configured_tools, offered_tools
    from reactchat.toolbox import calculator

    return offered_tools(model, [calculator, *configured_tools(tools, mcp)])


def build_agent(args: argparse.Namespace) -> object:
    """The agent the command runs: the built-in tools, those of ``--tools`` and ``--mcp``,
    on the chosen model and store."""
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.agent import Agent
    from reactchat.toolbox import read_links_in_messages

    tools, fetching = command_tools(args.model, args.tools, args.mcp)
    agent = Agent(
        model=args.model,
        tools=tools,
        protocol=args.protocol,
        max_steps=args.max_steps,
        store=store_url(args.db),
        language=args.lang,
        plan=getattr(args, "plan", False),
    )
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.knowledge import attach

    attach(agent, retention=args.retention)  # uploaded files: search_files while they live
    if fetching:
        read_links_in_messages(agent)  # and the pages of links in messages
    return agent


async def close_agent(agent: Any) -> None:
    """Stop the agent's MCP servers and close its knowledge base and store."""
    await close_tools(agent.toolsets)
    await agent.services["knowledge"].close()
    await agent.store.close()


async def _ask(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.agent import Agent

    folder = artifacts.writable_dir(args.out) if args.out else None  # before any model call
    agent = build_agent(args)
    assert isinstance(agent, Agent)
    trace = Trace(out, err, quiet=args.json)
    session = args.session
    began = time.time()
    pictures = {path for path in args.file or [] if artifacts.is_image_file(path)}
    images = [artifacts.image_file(path) for path in args.file or [] if path in pictures]
    try:
        documents = [path for path in args.file or [] if path not in pictures]
        if documents:
            # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
            from reactchat.knowledge._cli import upload

            session = session or await agent.store.create_session()
            for path in documents:
                await upload(agent.services["knowledge"], session, path, err if args.json else out, err)
        trace.start_spinner()
        budget = Budget.parse(args.budget) if args.budget else None
        result = await agent.arun(args.question, session, on_event=trace.show, budget=budget, images=images)
        trace.stop_spinner()
        made = await artifacts.made_since(agent.store, result.session, began)
        paths = await artifacts.save(agent.store, result.session, made, folder) if folder and made else None
    finally:
        trace.stop_spinner()
        await close_agent(agent)
    if args.json:
        files = [{"name": a.name, "size": a.size, "content_type": a.content_type} for a in made]
        for file, path in zip(files, paths or [], strict=False):
            file["path"] = str(path)
        print(json.dumps({**result.to_dict(), "files": files}, ensure_ascii=False, default=str), file=out)
    else:
        for line in artifacts.listing(result.session, made, paths):
            print(line, file=out)
    if result.status == "waiting":
        if not args.json:
            print(f"\nThe agent asks: {result.question}", file=out)
            # a planning turn must be resumed by a planning agent, or its open step is lost
            again = f"reactchat ask{' --plan' if getattr(args, 'plan', False) else ''} --session {result.session}"
            kind = result.pending.kind if result.pending is not None else "question"
            if kind == "approval":
                print(f'Approve with: {again} yes  (or "no, and why")', file=out)
            elif kind == "in_doubt":
                print(f'Decide with: {again} retry  (or skip, or "what it did")', file=out)
            elif kind == "budget":
                print(f"Grant as much again with: {again} yes  (or no for the best answer so far)", file=out)
            else:
                print(f'Answer with: {again} "your answer"', file=out)
        return EXIT_WAITING
    return EXIT_STOPPED if result.status == "stopped" else 0


async def _chat(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.cli.chat import chat_loop

    agent = build_agent(args)
    resume = "reactchat chat" if args.db == default_db() else f"reactchat chat --db {args.db}"
    try:
        return await chat_loop(agent, args.session, Trace(out, err), resume, out, err)
    finally:
        await close_agent(agent)


async def _mcp(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Serve the agent over stdio: stdout carries the MCP messages, so nothing else is printed."""
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.agent import Agent
    from reactchat.mcp._serve import serve_stdio

    agent = build_agent(args)
    assert isinstance(agent, Agent)
    try:
        await serve_stdio(agent, name=args.name)
    finally:
        await close_agent(agent)
    return 0


def _serve(args: argparse.Namespace) -> int:
    try:
        # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
        from reactchat.server import serve
    except ImportError as exc:
        raise SystemExit(f"reactchat serve needs the server extra: pip install 'reactchat[server]' ({exc})") from None
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.cli.tool_refs import configured_tools

    serve(
        turns=_handed_turns(args) if args.temporal else None,
        host=args.host,
        port=args.port,
        db=store_url(args.db),
        model=args.model,
        token=os.environ.get("REACTCHAT_TOKEN"),
        tools=configured_tools(args.tools, args.mcp),
        token_file=args.token_file,
        allowed_hosts=tuple(args.allow_host or ()),
        retention_days=args.retention_days,
    )
    return 0


def _handed_turns(args: argparse.Namespace) -> Any:
    """The turns of ``serve --temporal``: handed to ``reactchat worker`` processes."""
    try:
        # the temporal extra is optional: imported only by the verb that needs it
        from reactchat.server._temporal import HandedTurns
    except ImportError as exc:
        raise SystemExit(
            f"reactchat serve --temporal needs the temporal extra: pip install 'reactchat[temporal]' ({exc})"
        ) from None
    return HandedTurns(args.temporal, args.task_queue)


async def _sessions(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.prune:
        return await _prune(args, out)
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.cli.report import sessions_table, summaries
    from reactchat.store import resolve_store

    store = resolve_store(store_url(args.db))
    try:
        found = await summaries(store, args.limit)
    finally:
        await store.close()
    if args.json:
        print(json.dumps([s.to_dict() for s in found], ensure_ascii=False), file=out)
    else:
        print(sessions_table(found), file=out)
    return 0


async def _show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.cli.report import session_json, session_markdown, session_tree
    from reactchat.engine.session import SessionState
    from reactchat.store import SessionNotFound, resolve_store

    store = resolve_store(store_url(args.db))
    try:
        events = await store.events(args.session)
        origin = await store.origin(args.session)
    except SessionNotFound:
        print(f"reactchat: error: no session {args.session!r} in {args.db} (see: reactchat sessions)", file=err)
        return 1
    finally:
        await store.close()
    state = SessionState.from_events(args.session, events)
    if args.json:
        print(json.dumps(session_json(state, origin), ensure_ascii=False, indent=2), file=out)
    elif args.markdown:
        print(session_markdown(state), file=out, end="")
    else:
        print(session_tree(state, origin), file=out)
    return 0


async def _fork(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``reactchat fork ID [--before SEQ]``: print the id of a new session holding the events
    before SEQ (all of them without it) and copies of the session's uploaded files."""
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.agent import Agent
    from reactchat.knowledge import attach

    agent = Agent(store=store_url(args.db))  # no model is loaded: forking runs no turn
    attach(agent)  # the fork hook that copies the files
    try:
        new = await agent.fork(args.session, before=args.before)
    finally:
        await close_agent(agent)
    print(new, file=out)
    return 0


async def _prune(args: argparse.Namespace, out: TextIO) -> int:
    """``reactchat sessions --prune``: delete sessions idle for more than ``--older-than`` days."""
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.cli.retention import prune_sessions
    from reactchat.knowledge import KnowledgeBase
    from reactchat.store import resolve_store

    store = resolve_store(store_url(args.db))
    files = KnowledgeBase.for_store(store)
    try:
        pruned = await prune_sessions(store, args.older_than * 86400, files)
    finally:
        await files.close()
        await store.close()
    plural = "s" if len(pruned) != 1 else ""
    print(f"pruned {len(pruned)} session{plural} idle for over {args.older_than:g} days", file=out)
    return 0


def parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    top = argparse.ArgumentParser(prog="reactchat", description="Chat with a ReAct agent that uses tools.")
    commands = top.add_subparsers(dest="command", required=True)

    def database(p: argparse.ArgumentParser) -> None:
        p.add_argument("--db", default=default_db(), help="SQLite file or postgresql:// URL (env REACTCHAT_DB)")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--model",
            default=os.environ.get("REACTCHAT_MODEL", "local"),
            help="local, local:/path.gguf, openai:MODEL, anthropic:MODEL or scripted:FILE",
        )
        database(p)
        p.add_argument(
            "--tools",
            metavar="MODULE:NAME[,...]",
            help="more tools by reference, e.g. mypkg.tools:search (env REACTCHAT_TOOLS)",
        )
        p.add_argument("--mcp", metavar="FILE", help='an {"mcpServers": {...}} file of MCP servers (env REACTCHAT_MCP)')

    ask = commands.add_parser("ask", help="ask one question (or answer the agent's question)")
    ask.add_argument("question")
    ask.add_argument("--session", help="continue this session (answers its pending question)")
    ask.add_argument("--json", action="store_true", help="print the result as JSON")
    ask.add_argument(
        "--file",
        action="append",
        metavar="PATH",
        help="a file to ask about; an image goes with the question (repeatable)",
    )
    ask.add_argument("--out", metavar="DIR", help="save the files the turn made (run_python's /out) in DIR")
    ask.add_argument("--plan", action="store_true", help="plan the steps first, then run each as a ReAct sub-run")
    ask.add_argument("--budget", metavar="LIMITS", help="limits of the turn: tokens=N,cost=USD,seconds=S,tool_calls=N")
    chat = commands.add_parser("chat", help="interactive chat")
    chat.add_argument("--session", help="continue this session")
    mcp = commands.add_parser("mcp", help="serve the agent as one MCP tool over stdio (for other MCP clients)")
    mcp.add_argument("--name", default="reactchat", help="the MCP server's name")
    for p in (ask, chat, mcp):
        common(p)
        p.add_argument("--protocol", choices=["react", "native"], default="react")
        p.add_argument("--max-steps", type=_positive, default=10)
        p.add_argument("--lang", choices=["en", "fr", "ja"], default="en", help="prompt language")
        p.add_argument("--retention", type=_positive, default=5, help="rounds an uploaded file stays for")
    sessions = commands.add_parser("sessions", help="list stored sessions, newest first")
    sessions.add_argument("--limit", type=_positive, default=20, help="how many sessions to list")
    sessions.add_argument("--json", action="store_true", help="print the list as JSON")
    sessions.add_argument("--prune", action="store_true", help="delete sessions idle for more than --older-than days")
    sessions.add_argument("--older-than", type=float, default=30.0, metavar="DAYS", help="retention (default 30)")
    show = commands.add_parser("show", help="print a stored session: its turns, steps, timings and tokens")
    show.add_argument("session", help="the session id (see: reactchat sessions)")
    export = show.add_mutually_exclusive_group()
    export.add_argument("--json", action="store_true", help="export the session as JSON")
    export.add_argument("--markdown", action="store_true", help="export the session as Markdown")
    fork = commands.add_parser("fork", help="copy a session up to an event into a new one; prints its id")
    fork.add_argument("session", help="the session id (see: reactchat sessions)")
    fork.add_argument(
        "--before", type=_positive, metavar="SEQ", help="the event to stop before (its seq: reactchat show ID --json)"
    )
    for p in (sessions, show, fork):
        database(p)
    RECORDED.update(record.add_parsers(commands, database))  # export, import, replay
    eval_verb.add_parser(commands, common)
    memory_cli.add_parser(commands, database)
    serve = commands.add_parser("serve", help="HTTP API and web chat page")
    common(serve)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_positive, default=8000)
    serve.add_argument(
        "--token-file", help="one 'NAME TOKEN' line per user: each sees only their sessions (env REACTCHAT_TOKEN_FILE)"
    )
    serve.add_argument("--allow-host", action="append", metavar="NAME", help="a host name clients may use (repeatable)")
    serve.add_argument(
        "--retention-days",
        type=days,
        metavar="DAYS",
        help="delete sessions idle for more than DAYS, at start-up and hourly (env REACTCHAT_RETENTION_DAYS)",
    )
    serve.add_argument(
        "--temporal",
        default=os.environ.get("REACTCHAT_TEMPORAL") or None,
        metavar="HOST:PORT",
        help="hand each turn to the reactchat worker processes of this Temporal frontend (env REACTCHAT_TEMPORAL)",
    )
    serve.add_argument("--task-queue", default="reactchat", help="the workers' Temporal task queue (default reactchat)")
    worker.add_parser(commands, common)
    return top


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reactchat`` command."""
    args = parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "worker":
            return worker.run(args, build_agent)
        verbs = {
            "ask": _ask,
            "chat": _chat,
            "mcp": _mcp,
            "sessions": _sessions,
            "show": _show,
            "fork": _fork,
            "eval": eval_verb.run,
            "memory": memory_cli.run,
            **RECORDED,
        }
        runner = verbs[args.command]
        return asyncio.run(runner(args, sys.stdout, sys.stderr))
    except KeyboardInterrupt:  # Ctrl-C: asyncio.run cancelled the turn, which recorded it as cancelled
        print("reactchat: stopped; the turn is recorded as cancelled", file=sys.stderr)
        return 130
    except (ReactchatError, ValueError, LookupError, ImportError, RuntimeError, OSError) as exc:
        print(f"reactchat: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
