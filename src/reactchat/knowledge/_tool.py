"""The ``search_files`` tool and ``attach``, which plugs a knowledge base into an ``Agent``.

The model only ever gives a query: which session's files to search comes from the
``RunContext`` (``ctx.session``, and the knowledge base from ``ctx.services``), so a
model cannot name a path or reach another session's files.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reactchat.knowledge._kb import FileInfo, Hit, KnowledgeBase
from reactchat.tools import RunContext, Tool
from reactchat.tools.cite import cited

if TYPE_CHECKING:
    from reactchat.engine.spec import AgentSpec
    from reactchat.store import Store

log = logging.getLogger("reactchat.knowledge")

#: the key under which the knowledge base sits in ``RunContext.services``
SERVICE = "knowledge"
DEFAULT_BUDGET = 3000
#: files named in the tool's description; past that, "and N more"
MAX_NAMED = 10


def render(query: str, hits: list[Hit], budget: int) -> str:
    """Passages with their citations, trimmed evenly so that every citation fits in ``budget``."""
    if not hits:
        return f"No passage of the uploaded files matches {query!r}. Try other words, or answer without the files."
    heads = [f"[{i}] {h.name} · {h.where}" if h.where else f"[{i}] {h.name}" for i, h in enumerate(hits, 1)]
    count = f"{len(hits)} passage" + ("s" if len(hits) > 1 else "")
    intro = f"{count} from the uploaded files for {query!r} (cite them as [file · position]):"
    return cited(intro, [(head, hit.text) for head, hit in zip(heads, hits, strict=True)], budget)


def search_files_tool(
    kb: KnowledgeBase | None = None,
    *,
    k: int = 5,
    budget: int = DEFAULT_BUDGET,
    files: Sequence[FileInfo] = (),
) -> Tool:
    """A ``search_files`` tool over the session's uploaded files.

    The knowledge base is ``ctx.services["knowledge"]``, else ``kb``, else the one of
    the run's store. Observations stay within ``budget`` characters. ``files`` are
    named in the description so that the model knows what it can search.
    """

    async def search_files(query: str, ctx: RunContext) -> str:
        """Search the files the user uploaded in this chat. Returns the best matching passages,
        each with its file name and position (page, section, lines) to cite.

        Args:
            query: the words to look for, as they would appear in the file
        """
        base: KnowledgeBase = ctx.services.get(SERVICE) or kb or KnowledgeBase.for_store(ctx.store)
        hits = await base.search(ctx.session, query, k)
        if not hits and not await base.has_files(ctx.session):
            return "No file is uploaded in this chat any more (files expire after some rounds or when cleared)."
        return render(query, hits, budget)

    description = None
    if files:
        names = ", ".join(f"{f.name} ({f.pages} pages)" if f.pages else f.name for f in files[:MAX_NAMED])
        more = f" and {len(files) - MAX_NAMED} more" if len(files) > MAX_NAMED else ""
        description = f"{' '.join((search_files.__doc__ or '').split('Args:')[0].split())} Files: {names}{more}."
    # volatile: the same query may find new passages after another upload in the same turn
    return Tool(search_files, description=description, effect="read", volatile=True, max_chars=budget + 200)


def attach(
    agent: AgentSpec,
    kb: KnowledgeBase | None = None,
    *,
    k: int = 5,
    **options: Any,
) -> KnowledgeBase:
    """Let ``agent`` chat with uploaded files; returns the knowledge base to upload into.

    Adds ``search_files`` to a session's tools while it has live files, and counts a
    round after each finished turn (``done`` or ``stopped``; a turn waiting on an
    ask_user question counts once, when it finishes); a fork of a session (``agent.fork``)
    gets copies of its files. ``options`` go to
    ``KnowledgeBase.for_store`` (``retention``, ``embeddings``...).
    """
    base = kb or KnowledgeBase.for_store(agent.store, **options)
    budget = max(300, min(DEFAULT_BUDGET, agent.max_observation_chars - 200))

    async def session_tools(session: str, store: Store) -> list[Tool]:
        files = await base.files(session)
        return [search_files_tool(base, k=k, budget=budget, files=files)] if files else []

    async def on_turn_end(session: str, store: Store, status: str) -> None:
        try:
            await base.end_round(session)
        except Exception:
            # the answer is already stored: a failed count must not take it from the user;
            # the files then live one round longer, and the operator sees why in the log
            log.exception("could not count the round of session %s for its uploaded files", session)

    async def on_fork(original: str, new: str, store: Store) -> None:
        await base.copy_files(original, new)

    agent.hooks.session_tools.append(session_tools)
    agent.hooks.turn_end.append(on_turn_end)
    agent.hooks.fork.append(on_fork)
    agent.services[SERVICE] = base
    return base
