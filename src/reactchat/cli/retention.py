"""Expiry of old sessions: ``reactchat sessions --prune``, ``prune_sessions`` and the server's
``--retention-days`` (``expire_sessions``).

A session idle for longer than the retention (its last turn started and ended before it,
or, with no turn, it was created before it) is deleted with its events and its uploaded
files. A session whose turn is running is never deleted, however long the turn runs. The
stores keep each session's last activity in a column (``sessions.active_at``), so finding
the idle sessions reads no events.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from reactchat.store import Store

log = logging.getLogger("reactchat.retention")

#: sessions looked up and deleted per round trip
BATCH = 500
#: seconds between two expiries in a server with a retention (the first runs at start-up)
EXPIRE_EVERY = 3600.0


def days(text: str) -> float:
    """A retention given as text (``--retention-days``): a positive number of days."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"expected a positive number of days, got {text!r}")
    return value


def retention_from_env() -> float | None:
    """``REACTCHAT_RETENTION_DAYS`` (a positive number of days), None when unset."""
    text = os.environ.get("REACTCHAT_RETENTION_DAYS", "").strip()
    try:
        return days(text) if text else None
    except ValueError as exc:
        raise ValueError(f"REACTCHAT_RETENTION_DAYS: {exc}") from None


async def prune_sessions(store: Store, older_than: float, files: Any = None, limit: int = 1_000_000) -> list[str]:
    """Delete up to ``limit`` sessions idle for more than ``older_than`` seconds; return their ids.

    ``files`` is the store's ``KnowledgeBase`` (their uploaded files go too), if any.
    """
    cutoff = time.time() - older_than
    pruned: list[str] = []
    while len(pruned) < limit:
        want = min(BATCH, limit - len(pruned))
        batch = await store.idle_sessions(cutoff, want)
        # checked again as it is deleted: a turn may have started since, or be running
        gone = [session for session in batch if await store.delete_session(session, idle_before=cutoff)]
        for session in gone if files is not None else ():
            await files.clear(session)
        pruned += gone
        if not gone or len(batch) < want:
            break  # the rest run a turn (they come first again), or there is no rest
    return pruned


async def expire_sessions(store: Store, days: float, files: Any = None, every: float = EXPIRE_EVERY) -> None:
    """Prune the sessions idle for more than ``days`` now and every ``every`` seconds (runs until cancelled)."""
    while True:
        try:
            pruned = await prune_sessions(store, days * 86400, files)
            if pruned:
                log.info("expired %d sessions idle for over %g days", len(pruned), days)
        except Exception:
            log.exception("could not expire old sessions")
        await asyncio.sleep(every)
