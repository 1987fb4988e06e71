"""``reactchat worker --temporal HOST:PORT [--task-queue reactchat]``: run turns for Temporal.

The agent is the one ``reactchat ask`` builds from ``--model``, ``--db``, ``--tools`` and
``--mcp``, or the one ``--agent MODULE:FUNCTION`` returns (``FUNCTION(store_url) ->
Agent``). Every worker of a task queue must build the same agent on the same store.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
from collections.abc import Callable
from typing import Any

from reactchat.store import store_url


def add_parser(commands: Any, common: Any) -> None:
    """Register ``worker`` on the command's subparsers."""
    worker = commands.add_parser("worker", help="run turns handed out by a Temporal server")
    common(worker)
    worker.add_argument(
        "--temporal",
        default=os.environ.get("REACTCHAT_TEMPORAL"),
        metavar="HOST:PORT",
        help="the Temporal frontend (env REACTCHAT_TEMPORAL)",
    )
    worker.add_argument("--task-queue", default="reactchat", help="the task queue (default reactchat)")
    worker.add_argument("--agent", metavar="MODULE:FUNCTION", help="FUNCTION(store_url) returns the Agent to run")
    worker.add_argument(
        "--stretches",
        action="store_true",
        help="run a turn's stretch (a message to its next pause) as one activity, not each model and tool "
        "call: less overhead a turn, retries by the engine's recovery (the same on every worker of a queue)",
    )


def agent_from(reference: str, store: str) -> Any:
    """The agent of ``--agent MODULE:FUNCTION``."""
    module, _, name = reference.partition(":")
    if not module or not name:
        raise ValueError(f"--agent wants MODULE:FUNCTION, got {reference!r}")
    return getattr(importlib.import_module(module), name)(store)


def run(args: argparse.Namespace, build_agent: Callable[[argparse.Namespace], Any]) -> int:
    """Run the worker until interrupted; ``build_agent`` is ``reactchat ask``'s."""
    if not args.temporal:
        raise ValueError("reactchat worker needs --temporal HOST:PORT (or REACTCHAT_TEMPORAL)")
    try:
        # the temporal extra is optional: imported only by the verb that needs it
        from reactchat.temporal import run_worker
    except ImportError as exc:
        raise SystemExit(
            f"reactchat worker needs the temporal extra: pip install 'reactchat[temporal]' ({exc})"
        ) from None
    if args.agent:
        agent = agent_from(args.agent, store_url(args.db))
    else:
        args.protocol, args.max_steps, args.lang, args.retention = "react", 10, "en", 5
        agent = build_agent(args)
    asyncio.run(run_worker(args.temporal, agent, args.task_queue, calls=not args.stretches))
    return 0
