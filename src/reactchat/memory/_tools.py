"""The ``remember`` and ``recall`` tools, and ``attach``, which plugs a ``Memory`` into an
agent's turns (its tools, and the matching facts in each run's instructions)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from reactchat.memory._memory import MAX_FACT, Memory
from reactchat.store import Store
from reactchat.tools import RunContext, Tool

if TYPE_CHECKING:
    from reactchat.engine.spec import AgentSpec


def memory_tools(memory: Memory) -> list[Tool]:
    """``remember(fact)`` and ``recall(query)`` over ``memory``, in the calling session's scope."""

    async def remember(fact: str, ctx: RunContext) -> str:
        """Remember a fact for later conversations with this user: a preference, a name,
        a decision, something they told you about themselves or their work.

        Args:
            fact: one short sentence that makes sense on its own, e.g. "The user lives in Lyon."
        """
        try:
            kept = await memory.remember(fact[:MAX_FACT], ctx.session)
        except ValueError as exc:
            return str(exc)
        return f"Remembered: {kept.text}"

    async def recall(query: str, ctx: RunContext) -> str:
        """Look up facts remembered from earlier conversations with this user.

        Args:
            query: words the fact would contain
        """
        found = await memory.search(query, ctx.session)
        if not found:
            return f"Nothing remembered matches {query!r}."
        day = "%Y-%m-%d"
        return "\n".join(f"- {f.text} (remembered {time.strftime(day, time.gmtime(f.at))})" for f in found)

    # remembering the same text again refreshes one fact: safe to run again after a crash
    return [Tool(remember, effect="idempotent"), Tool(recall, effect="read", volatile=True)]


def attach(agent: AgentSpec, memory: Memory) -> None:
    """Give ``agent`` the memory's tools, and put the facts that match each new message in
    the instructions of its runs."""
    tools = memory_tools(memory)

    async def session_tools(session: str, store: Store) -> list[Tool]:
        return tools

    async def instructions(session: str, store: Store, message: str) -> str:
        return await memory.notes(session, message, agent)

    agent.hooks.session_tools.append(session_tools)
    agent.hooks.instructions.append(instructions)


__all__ = ["attach", "memory_tools"]
