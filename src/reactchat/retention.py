"""Expiry of old sessions: ``reactchat sessions --prune`` and ``prune_sessions``.

A session whose last event is older than the retention is deleted with its events and
its uploaded files. Sessions with no event yet are kept (their age is not known and a
client may be about to use one). Run it from cron, or after a deployment's own policy.
"""

from __future__ import annotations

import time
from typing import Any

from reactchat.store import Store

#: the default retention of ``reactchat sessions --prune``, in days
DEFAULT_DAYS = 30.0


async def prune_sessions(store: Store, older_than: float, files: Any = None, limit: int = 1_000_000) -> list[str]:
    """Delete the sessions idle for more than ``older_than`` seconds; return their ids.

    ``files`` is the store's ``KnowledgeBase`` (their uploaded files go too), if any.
    """
    cutoff = time.time() - older_than
    pruned = []
    for session in await store.list_sessions(limit):
        events = await store.events(session)
        if not events or events[-1].at >= cutoff:
            continue
        if files is not None:
            await files.clear(session)
        if await store.delete_session(session):
            pruned.append(session)
    return pruned
