"""Leases and fencing epochs of running turns, on PostgreSQL.

A turn lock (a session advisory lock, ``store/postgres.py``) ends with its connection, so a
killed worker never blocks its session. A worker whose host is cut off or frozen does not
lose its connections, though: the database keeps an idle one for the TCP keepalive time
(two hours by default), and a stopped process's kernel keeps answering for it. So each
mark of a running turn (``running_turns``) also carries

* a **lease** (``lease_until``, on the database's clock, so the hosts' clocks do not
  matter): the holder renews it every ``renew_every(lease)`` seconds while the turn runs;
  once it has run out, any worker ends the holder's lock connection
  (``pg_terminate_backend``, allowed for the same role) and takes the turn over;
* a **fencing epoch** (``epoch``), a number from one sequence, new for every lock taken:
  every append of a turn's events checks, in its own statement, that the mark still has
  the epoch its writer's lock got. A holder that wakes up after a takeover finds another
  epoch there (or no mark at all) and its append is refused (``TurnTakenOver``): it cannot
  write into a turn another worker runs, nor start another tool call, since a call's start
  is appended before the call runs.

The check takes a share lock on the mark's row until the append commits, so an append in
flight and a takeover (which gives the mark a new epoch) are ordered: the takeover waits
for the append and then reads it, or the append waits for the takeover and then fails.

The statements are here, and the store's statements use them as fragments (``LIVE``,
``FENCE``) so that a store that groups its writes differently keeps the same checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger("reactchat.store")

#: seconds a turn's lease lasts unless renewed: how long a worker that stopped renewing it
#: (cut off, frozen) keeps its turn before another may take it over
LEASE = 5.0
#: the variable that sets another lease, in seconds (the same on every worker)
LEASE_ENV = "REACTCHAT_LEASE_SECONDS"
#: the sequence the fencing epochs come from
EPOCHS = "running_turn_epochs"
#: the database's clock, in seconds since 1970 (the lease is on it, not on the hosts' clocks)
NOW = "extract(epoch from clock_timestamp())"

#: migration m009 of the events schema (``store/postgres.py``)
MIGRATION = (
    f"CREATE SEQUENCE {EPOCHS}",
    "ALTER TABLE running_turns ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE running_turns ADD COLUMN lease_until DOUBLE PRECISION",
)

#: the values of a new mark's ``epoch`` and ``lease_until`` (parameter: the lease in seconds)
NEW_EPOCH = f"nextval('{EPOCHS}')"
NEW_LEASE = f"{NOW} + %s"

#: the backend of a mark ``r`` in ``running_turns`` still runs (a pid may come back: its start time tells)
LIVE = """EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.backend
    AND (a.backend_start IS NULL OR r.backend_start IS NULL OR a.backend_start = r.backend_start))"""
#: the fence of an appended row ``r`` (``r.session``, ``r.epoch``: the epoch of its writer's lock,
#: NULL for a writer that holds none): the row goes in only while its session's mark has that epoch
FENCE = """(r.epoch IS NULL OR EXISTS (
    SELECT 1 FROM running_turns f WHERE f.session = r.session AND f.epoch = r.epoch FOR SHARE))"""
#: the leases of this store's marks, renewed; the sessions whose mark has another epoch now
#: (no mark at all is not a loss yet: the holder may have just let go, or a claimer may be
#: about to mark it, which the next renewal sees)
RENEW = f"""WITH h AS (SELECT * FROM unnest(%(s)s::text[], %(e)s::bigint[]) AS h(session, epoch)),
renewed AS (
    UPDATE running_turns r SET lease_until = {NOW} + %(lease)s FROM h
    WHERE r.session = h.session AND r.epoch = h.epoch RETURNING 1
)
SELECT h.session FROM h JOIN running_turns r ON r.session = h.session AND r.epoch <> h.epoch"""
#: the backends that hold turns whose lease ran out, ended, waiting up to 2 s for each to go
#: (a cut-off or frozen worker's lock connection: its advisory locks end with it)
END_EXPIRED = f"""SELECT r.session, pg_terminate_backend(r.backend, 2000) FROM running_turns r
WHERE r.lease_until < {NOW} AND {LIVE}"""
#: running turns whose backend has ended, with the epoch of their mark
ORPHANED = f"SELECT session, epoch FROM running_turns r WHERE NOT {LIVE}"
#: the mark of a turn whose holder died, claimed (its epoch: a mark taken again since is
#: another turn's): its start becomes the session's last activity
CLAIM = """WITH gone AS (DELETE FROM running_turns WHERE session = %s AND epoch = %s RETURNING session, since),
active AS (UPDATE sessions s SET active_at = greatest(s.active_at, gone.since) FROM gone WHERE s.id = gone.session)
SELECT count(*) FROM gone"""

#: libpq settings every connection of the store gets unless its URL sets them: a dead link is
#: noticed within seconds (keepalives on an idle connection; ``tcp_user_timeout`` on data
#: sent and never acknowledged, in ms), and a connection attempt to a host that cannot be
#: reached gives up instead of waiting for the kernel's SYN retries (two minutes)
LINK = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "connect_timeout": "5",
}


def lease_from_env() -> float:
    """``REACTCHAT_LEASE_SECONDS``, else ``LEASE``; a ``ValueError`` that says what is wrong."""
    text = os.environ.get(LEASE_ENV, "").strip()
    if not text:
        return LEASE
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(f"{LEASE_ENV}={text!r}: expected seconds, such as 5") from None
    check_lease(seconds)
    return seconds


def check_lease(seconds: float) -> None:
    """``ValueError`` unless ``seconds`` is a usable lease (renewed several times before it ends)."""
    if not 0.5 <= seconds <= 3600:
        raise ValueError(f"a turn's lease of {seconds} s is out of range: give 0.5 to 3600 seconds (default {LEASE})")


def renew_every(lease: float) -> float:
    """Seconds between two renewals: a lease survives two renewals that did not make it."""
    return min(1.0, lease / 3)


def with_link(url: str) -> str:
    """The URL as a libpq connection string, with the ``LINK`` settings it does not set itself."""
    # optional: the [postgres] extra; the rest of this module is read without it
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(url)
    return make_conninfo(url, **{name: value for name, value in LINK.items() if name not in given})


class Fences:
    """The epochs of the turn locks a store holds, by session, and the renewal of their leases.

    Kept apart from the store's record of its advisory locks: when the lock connection
    breaks, the locks are gone but the turns they guarded may still be running here, and
    their appends must still carry their epoch (the database then refuses them if another
    worker took the turns over).
    """

    def __init__(self, lease: float) -> None:
        check_lease(lease)
        self.lease = lease
        #: session → (owner, epoch) of each turn lock held
        self.held: dict[str, tuple[str, int]] = {}
        self._renewal: asyncio.Task[None] | None = None

    def take(self, session: str, owner: str, epoch: int) -> None:
        """``owner``'s lock on ``session`` got ``epoch``."""
        self.held[session] = (owner, epoch)

    def drop(self, session: str, owner: str) -> None:
        """``owner`` gave the session's lock back (another owner's fence stays)."""
        if self.held.get(session, ("", 0))[0] == owner:
            del self.held[session]

    def epoch(self, session: str) -> int | None:
        """The epoch an append of the session's events must find on its mark; None: no lock held here."""
        fence = self.held.get(session)
        return fence[1] if fence is not None else None

    def keep_renewed(self, db: Callable[[], contextlib.AbstractAsyncContextManager[Any]]) -> None:
        """Make sure a task of this event loop renews the leases while any is held."""
        task = self._renewal
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            return
        self._renewal = asyncio.create_task(self._renew(db), name="reactchat-lease-renewal")

    def stop(self) -> None:
        """Stop renewing and forget the fences: the store dropped its connections, and the
        locks ended with them (a turn still going on there would be refused anyway)."""
        if self._renewal is not None and not self._renewal.done():
            with contextlib.suppress(RuntimeError):  # its loop may be gone
                self._renewal.cancel()
        self._renewal = None
        self.held.clear()

    async def _renew(self, db: Callable[[], contextlib.AbstractAsyncContextManager[Any]]) -> None:
        while self.held:
            await asyncio.sleep(renew_every(self.lease))
            if not self.held:
                return
            fences = dict(self.held)
            try:
                lost = await renew(db, self.lease, fences)
            except Exception as exc:  # the database is away: the next renewal tries again
                log.warning("could not renew the leases of %d running turns: %s", len(fences), exc)
                continue
            for session in lost:
                if self.held.get(session) == fences[session]:  # not let go, nor taken again here, since
                    log.warning("the lease on the turn of session %s was lost: another worker has it", session)


async def renew(
    db: Callable[[], contextlib.AbstractAsyncContextManager[Any]], lease: float, fences: dict[str, tuple[str, int]]
) -> list[str]:
    """Renew the leases of ``fences`` for ``lease`` seconds; the sessions whose mark has another epoch."""
    sessions = list(fences)
    async with db() as conn:
        cursor = await conn.execute(RENEW, {"lease": lease, "s": sessions, "e": [fences[s][1] for s in sessions]})
        return [row[0] for row in await cursor.fetchall()]


async def abandoned(conn: Any) -> list[str]:
    """Sessions whose running turn's holder is gone, each claimed for the caller alone.

    First the holders whose lease ran out are ended (a cut-off or frozen worker: its lock
    connection, and with it its advisory locks); then every mark whose backend has ended is
    claimed by its epoch, one statement each, so of several workers looking at once exactly
    one gets each session (and a mark taken again since, with a new epoch, stays).
    """
    try:
        cursor = await conn.execute(END_EXPIRED)
        for session, ended in await cursor.fetchall():
            if ended:
                log.warning("the lease on the turn of session %s ran out: its holder's connection was ended", session)
    except Exception as exc:  # e.g. a holder connected as another role, which this one may not end
        log.warning("could not end the holders of turns whose lease ran out: %s", exc)
    cursor = await conn.execute(ORPHANED)
    claimed = []
    for session, epoch in await cursor.fetchall():
        # one row per statement: a claim never holds one mark while it waits for another
        gone = await conn.execute(CLAIM, (session, epoch))
        row = await gone.fetchone()
        if row is not None and row[0]:
            claimed.append(session)
    return claimed
