"""``Memory``: facts an agent keeps across the sessions of a scope (a user, a team).

The agent gets two tools, ``remember(fact)`` and ``recall(query)``; at the start of each
run the facts that best match the message are added to its instructions, within a share
of the model's window. Facts live in the session store's database (``facts`` table), carry
the session and time they were learned, expire after ``ttl_days``, and are listed and
forgotten by the user (``facts()``, ``forget(id)``, ``reactchat memory``, ``/v1/memory``).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

from reactchat.engine import tokens
from reactchat.errors import ConfigError
from reactchat.store import Store
from reactchat.store._facts import Fact, FactStore

if TYPE_CHECKING:
    from reactchat.engine.spec import AgentSpec

DAY = 86_400.0
#: the longest fact the ``remember`` tool keeps, in characters
MAX_FACT = 1000


def user_of(session: str) -> str:
    """The user a session belongs to on a server with per-user tokens (the id's part before
    the first ``:``), "" for a session of nobody in particular."""
    return session.split(":", 1)[0] if ":" in session else ""


@dataclass(frozen=True)
class Memory:
    """Facts kept across the sessions of ``scope``.

    ``scope=None`` gives each user their own: the scope of a session is its user (see
    ``user_of``), which is what a server with per-user tokens needs. ``ttl_days``: facts
    expire that long after they are remembered (None: never). ``share``: the part of the
    model's window the facts of a message may fill in the prompt; ``k``: at most that many.
    ``embeddings``: fuse dense retrieval with BM25 (None: when the ``embeddings`` extra is
    installed).
    """

    scope: str | None
    ttl_days: float | None = None
    share: float = 0.05
    k: int = 5
    embeddings: bool | None = False
    #: the store the facts are in (``Agent(memory=...)`` gives the agent's)
    store: Store | Callable[[], Store] | None = field(default=None, compare=False)
    #: the scope ``facts()`` and ``forget()`` use when ``scope`` is None
    user: str = ""

    def __post_init__(self) -> None:
        if self.scope is not None and not self.scope:
            raise ConfigError("Memory(scope=...) must be a non-empty name, or None for one scope per user")
        if self.ttl_days is not None and self.ttl_days <= 0:
            raise ConfigError(f"Memory(ttl_days=...) must be positive or None, not {self.ttl_days}")
        if not 0 < self.share < 1:
            raise ConfigError(f"Memory(share=...) is a fraction of the window, between 0 and 1: {self.share}")

    def on(self, store: Store | Callable[[], Store]) -> Memory:
        """This memory, keeping its facts in ``store`` (a store, or a function that opens it)."""
        return replace(self, store=store)

    def of(self, user: str) -> Memory:
        """This memory as ``user`` sees it (their scope when ``scope`` is None)."""
        return replace(self, user=user)

    def scope_of(self, session: str) -> str:
        """The scope of ``session``'s facts."""
        return self.scope if self.scope is not None else user_of(session)

    @property
    def dense(self) -> bool:
        """Whether search fuses embeddings with BM25."""
        if self.embeddings is None:
            return find_spec("sentence_transformers") is not None
        return self.embeddings

    def _facts_store(self) -> FactStore:
        store = self.store() if callable(self.store) else self.store
        if store is None:
            raise ConfigError("this Memory has no store: give it to an Agent(memory=...) or use Memory.on(store)")
        if not isinstance(store, FactStore):
            raise ConfigError(f"the store {type(store).__name__} cannot keep facts: use memory:, sqlite or postgresql")
        return store

    # ------------------------------------------------------------------ the user's side

    async def facts(self, scope: str | None = None) -> list[Fact]:
        """The facts of ``scope`` (default: this memory's) that have not expired, newest first."""
        return await self._facts_store().facts(scope or self._own_scope(), time.time())

    async def forget(self, fact_id: str, scope: str | None = None) -> bool:
        """Delete a fact; it is never found again. Whether the scope had it."""
        return await self._facts_store().forget_fact(scope or self._own_scope(), fact_id)

    def _own_scope(self) -> str:
        scope = self.scope if self.scope is not None else self.user
        if not scope:
            raise ConfigError("Memory(scope=None) lists one user's facts: name them with memory.of(user)")
        return scope

    # ------------------------------------------------------------------ the agent's side

    async def remember(self, text: str, session: str) -> Fact:
        """Keep ``text`` as a fact of ``session``'s scope (the same text again refreshes it)."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("a fact must say something")
        scope, now = self.scope_of(session), time.time()
        key = hashlib.sha256(f"{scope}\0{text.lower()}".encode()).hexdigest()[:16]
        expires = now + self.ttl_days * DAY if self.ttl_days is not None else None
        vector = await _encode(text) if self.dense else None
        fact = Fact(key, scope, text[:MAX_FACT], session, now, expires, vector)
        await self._facts_store().add_fact(fact)
        return fact

    async def search(self, query: str, session: str, k: int | None = None) -> list[Fact]:
        """The facts of ``session``'s scope that best match ``query``, best first."""
        # lazy: reactchat.knowledge adds 50-70 ms to an Agent's import (python -X importtime)
        from reactchat.memory._search import rank

        facts = await self._facts_store().facts(self.scope_of(session), time.time())
        if not facts:
            return []
        dense = await _nearest(query, facts) if self.dense else None
        return rank(query, facts, dense)[: k or self.k]

    async def notes(self, session: str, message: str, agent: AgentSpec) -> str:
        """What the prompt says of the facts that match ``message``, within ``share`` of the window."""
        found = await self.search(message, session)
        if not found:
            return ""
        model = agent.model
        room = int(min(agent.context_tokens, tokens.window(model) or agent.context_tokens) * self.share)
        lines: list[str] = []
        for fact in found:
            # no date here: measured, the embedded models copy it into their answers
            line = f"- {fact.text}"
            room -= tokens.count(model, line + "\n")
            if room < 0:
                break
            lines.append(line)
        if not lines:
            return ""
        return "What you remember from earlier conversations (answer from it when it fits):\n" + "\n".join(lines)


async def _encode(text: str) -> bytes:
    """The fact's embedding (the ``embeddings`` extra, imported when first used)."""
    # lazy: reactchat.knowledge adds 50-70 ms to an Agent's import (see ``Memory.search``)
    from reactchat.knowledge._embed import default_embedder, encode

    return (await asyncio.to_thread(encode, default_embedder(), [text]))[0]


async def _nearest(query: str, facts: list[Fact]) -> list[tuple[int, float]]:
    """``(index, cosine)`` of the facts nearest ``query``, best first (the ``embeddings`` extra)."""
    # lazy: reactchat.knowledge adds 50-70 ms to an Agent's import (see ``Memory.search``)
    from reactchat.knowledge._embed import default_embedder, nearest

    rows = [(i, f.vector) for i, f in enumerate(facts) if f.vector is not None]
    found: Any = await asyncio.to_thread(nearest, default_embedder(), query, rows, len(rows))
    return list(found)


__all__ = ["DAY", "MAX_FACT", "Memory", "user_of"]
