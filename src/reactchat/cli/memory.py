"""``reactchat memory list|forget --scope S``: the facts an agent keeps across sessions."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import TextIO

from reactchat.memory import Memory
from reactchat.store import resolve_store, store_url


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser], database: Callable[..., None]) -> None:
    """Register ``memory list`` and ``memory forget`` under ``commands``."""
    memory = commands.add_parser("memory", help="list or forget the facts kept across sessions of a scope")
    verbs = memory.add_subparsers(dest="verb", required=True)
    listed = verbs.add_parser("list", help="the scope's facts, newest first")
    listed.add_argument("--json", action="store_true", help="print the facts as JSON")
    forget = verbs.add_parser("forget", help="delete facts: they are never found again")
    forget.add_argument("fact", nargs="+", help="the id of a fact (see: reactchat memory list)")
    for p in (listed, forget):
        p.add_argument("--scope", required=True, help="whose facts: the scope given to Memory(scope=...), or a user")
        database(p)


async def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``reactchat memory``; 1 when a fact to forget was not there."""
    store = resolve_store(store_url(args.db))
    memory = Memory(scope=args.scope).on(store)
    try:
        if args.verb == "list":
            facts = await memory.facts()
            if args.json:
                rows = [
                    {"id": f.id, "text": f.text, "session": f.session, "at": f.at, "expires": f.expires} for f in facts
                ]
                print(json.dumps(rows, ensure_ascii=False, indent=2), file=out)
            for f in facts if not args.json else []:
                print(f"{f.id}  {time.strftime('%Y-%m-%d %H:%M', time.gmtime(f.at))}  {f.text}", file=out)
            if not facts and not args.json:
                print(f"no fact is kept for scope {args.scope!r}", file=err)
            return 0
        missing = [fact for fact in args.fact if not await memory.forget(fact)]
        for fact in missing:
            print(f"reactchat: no fact {fact!r} in scope {args.scope!r}", file=err)
        return 1 if missing else 0
    finally:
        await store.close()


__all__ = ["add_parser", "run"]
