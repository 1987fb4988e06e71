"""``reactchat export``, ``import`` and ``replay``: a session as JSON lines, and run again.

``export ID`` prints the session in the ``reactchat.session`` format (docs/testing.md);
``import FILE`` stores one as a new session and prints its id; ``replay ID|FILE`` runs it
again with today's code and exits 0 when it repeats the record, 1 with the first
difference. (``reactchat show ID --json|--markdown`` prints a session for people.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TextIO

from reactchat.errors import Diverged
from reactchat.store import store_url

Verb = Callable[[argparse.Namespace, TextIO, TextIO], Coroutine[Any, Any, int]]


def add_parsers(commands: Any, database: Callable[[argparse.ArgumentParser], None]) -> dict[str, Verb]:
    """Add the three verbs to ``commands`` (the top parser's sub-parsers); their runners by name."""
    export = commands.add_parser("export", help="print a session as JSON lines (events, files, artifacts)")
    export.add_argument("session", help="the session id (see: reactchat sessions)")
    imported = commands.add_parser("import", help="store an exported session as a new one; prints its id")
    imported.add_argument("file", help="a file written by reactchat export ('-': standard input)")
    replay = commands.add_parser("replay", help="run a recorded session again, no model or tool called")
    replay.add_argument("source", help="a session id or a file written by reactchat export")
    replay.add_argument("--tools", metavar="MODULE:NAME[,...]", help="the agent's tools, as for reactchat ask")
    replay.add_argument(
        "--model", default="local", help="the model the session was recorded with (never loaded: its prompts' settings)"
    )
    replay.add_argument("--protocol", choices=["react", "native"], default="react")
    replay.add_argument("--plan", action="store_true", help="the session was recorded with --plan")
    replay.add_argument("--lang", choices=["en", "fr", "ja"], default="en", help="prompt language")
    replay.add_argument("--max-steps", type=int, default=10)
    replay.add_argument(
        "--strict", action="store_true", help="thoughts, observations, plans and the recorded requests must match too"
    )
    for p in (export, imported, replay):
        database(p)
    return {"export": _export, "import": _import, "replay": _replay}


async def _export(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.knowledge import KnowledgeBase
    from reactchat.store import resolve_store
    from reactchat.testing import export_lines

    store = resolve_store(store_url(args.db))
    files = KnowledgeBase.for_store(store)
    try:
        lines = await export_lines(store, args.session, files)
    finally:
        await files.close()
        await store.close()
    out.write("".join(line + "\n" for line in lines))
    return 0


async def _import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.knowledge import KnowledgeBase
    from reactchat.store import resolve_store
    from reactchat.testing import import_record, read_record

    if args.file == "-":
        record = read_record(sys.stdin)
    else:
        with Path(args.file).open(encoding="utf-8") as file:
            record = read_record(file)
    store = resolve_store(store_url(args.db))
    files = KnowledgeBase.for_store(store)
    try:
        print(await import_record(store, record, files), file=out)
    finally:
        await files.close()
        await store.close()
    return 0


async def _replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # imported by the verb that needs it: the command starts without the rest (0.2-1 s)
    from reactchat.agent import Agent
    from reactchat.cli.tool_refs import close_tools, configured_tools
    from reactchat.testing import replay
    from reactchat.testing._replay import is_file
    from reactchat.toolbox import calculator

    tools = [calculator, *configured_tools(args.tools, None)]
    agent = Agent(
        model=args.model,  # never loaded: the replay serves the recorded replies
        tools=tools,
        protocol=args.protocol,
        max_steps=args.max_steps,
        store=store_url(args.db),
        language=args.lang,
        plan=args.plan,
    )
    try:
        done = await replay(agent, args.source, strict=args.strict)
    except Diverged as diverged:
        print(diverged, file=out)
        return 1
    finally:
        await close_tools(agent.toolsets)
        if not is_file(args.source):  # a file's replay never opened the store
            await agent.store.close()
    print(f"replayed {done.messages} messages, {done.model_calls} model calls: as recorded", file=out)
    if args.strict:
        said = f"{done.requests_compared} requests" if done.requests_compared else "none: the record holds no requests"
        print(f"requests compared: {said}", file=out)
    return 0
