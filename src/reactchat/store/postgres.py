"""``PostgresStore``: sessions and their events in PostgreSQL, for several server workers.

URL: any libpq URL, ``postgresql://user@host:5432/db`` (``postgres://`` too). Needs the
``postgres`` extra (``pip install 'reactchat[postgres]'``, psycopg 3), imported on first
use only.

Schema: the SQLite store's ``sessions`` and ``events`` (created by the migrations of
``SCHEMA``, recorded in ``reactchat_migrations``; turn locks differ, see below); tables prefixed
``kb_`` belong to the knowledge base::

    sessions(id TEXT PRIMARY KEY, created_at DOUBLE PRECISION, active_at DOUBLE PRECISION,
             forked_from TEXT, forked_before INTEGER)   -- a fork's origin (``fork``)
    events(session TEXT → sessions.id ON DELETE CASCADE, seq INTEGER,   -- 1, 2, 3… per session
           turn INTEGER, step INTEGER, type TEXT, at DOUBLE PRECISION,
           body JSON,                       -- the event as written by ``EVENTS.dump_json``
           PRIMARY KEY (session, seq))
    reflections(id BIGSERIAL, key TEXT, at DOUBLE PRECISION, text TEXT)   -- see reactchat.orchestration.reflexion
    artifacts(session TEXT → sessions.id ON DELETE CASCADE, name TEXT, content_type TEXT,
              size INTEGER, at DOUBLE PRECISION, data BYTEA)   -- see store/_artifacts.py

``body`` is ``json``, not ``jsonb``: it keeps the text as written and accepts ``\\u0000``,
which a tool's output may contain. Each ``append`` is one transaction (autocommitted when it holds one event), durable
(per the server's ``synchronous_commit``) before the engine goes on.

Turn locks are session-level advisory locks, ``pg_try_advisory_lock(hashtextextended(session,
LOCK_SPACE))`` (a 64-bit key), held on a connection the store keeps for them: they need no table,
and they end with the connection, so a killed worker never blocks its session. ``ttl`` is
therefore unused. The store tracks which of its own callers holds each lock, since
advisory locks are re-entrant per connection. Each lock taken also marks its session in
``running_turns`` (an unlogged table) with the backend that holds it: a mark whose backend
has ended is a turn whose worker died (``abandoned``), and a mark is where
``request_cancel`` asks the holder, from any worker, to stop the turn (with a
``NOTIFY`` that ``cancel_requests`` listens for). A mark also carries a lease its holder
renews and a fencing epoch that every append of the turn checks, so a holder that is cut
off or frozen is taken over and cannot write after (``store/_lease.py``). Queries go through a small pool
(``pool_size``, default 4) so that concurrent turns do not wait for each other's commits.

Every commit waits for the server's WAL flush. ``?options=-csynchronous_commit%3Doff`` in
the URL trades that for the SQLite store's guarantee (a killed client loses nothing; a
crash of the *server* may lose the last commits) and is several times faster on slow
disks: see benchmarks/store.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from reactchat.errors import TurnTakenOver
from reactchat.messages import Event, stored_event, stored_json
from reactchat.store import SessionNotFound, _facts, _lease
from reactchat.store import _migrations as migrations
from reactchat.store._artifacts import MAX_ARTIFACTS, MAX_SESSION_BYTES, PRUNE, Artifact, content_type
from reactchat.store._batch import Batcher
from reactchat.store._facts import Fact
from reactchat.store._fork import Rebase, fork_point
from reactchat.store._migrations import Schema, mark_interrupted
from reactchat.store._views import TurnViews, View

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor

#: first key of every advisory lock this store takes ("rct" in ASCII), so that other
#: users of advisory locks in the same database do not collide with session locks
LOCK_SPACE = 0x726374
#: the store's tables, version by version (see ``reactchat.store._migrations``)
SCHEMA = Schema("events")
SCHEMA.add(
    1,
    "m001_sessions_events",
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at DOUBLE PRECISION NOT NULL)",
    """CREATE TABLE events (
        session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        step INTEGER NOT NULL,
        type TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        body JSON NOT NULL,
        PRIMARY KEY (session, seq)
    )""",
    "CREATE INDEX sessions_created ON sessions(created_at)",
)
SCHEMA.add(
    2,
    "m002_reflections",  # Reflexion's memory across sessions: reflections by task fingerprint (orchestration.reflexion)
    """CREATE TABLE reflections (
        id BIGSERIAL PRIMARY KEY,
        key TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        text TEXT NOT NULL
    )""",
    "CREATE INDEX reflections_key_at ON reflections(key, at)",
)
SCHEMA.add(3, "m003_interrupted_field", mark_interrupted)
SCHEMA.add(
    4,
    "m004_running_turns",  # the durable mark of a running turn: takeover and cancel from any worker
    # unlogged: no WAL, so marking costs no flush; a crash of the server empties it, and
    # the turns it marked then resume on their session's next message
    """CREATE UNLOGGED TABLE running_turns (
        session TEXT PRIMARY KEY,
        backend INTEGER NOT NULL,
        backend_start TIMESTAMPTZ,
        since DOUBLE PRECISION NOT NULL,
        cancel DOUBLE PRECISION
    )""",
)
SCHEMA.add(
    5,
    "m005_last_activity",  # when the session's last turn ended, for retention (reactchat.cli.retention)
    "ALTER TABLE sessions ADD COLUMN active_at DOUBLE PRECISION",
    """UPDATE sessions s
    SET active_at = coalesce((SELECT max(e.at) FROM events e WHERE e.session = s.id), s.created_at)""",
    "CREATE INDEX sessions_active ON sessions(active_at)",
)
SCHEMA.add(
    6,
    "m006_artifacts",  # files a session's tools made (reactchat.store._artifacts)
    """CREATE TABLE artifacts (
        session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        content_type TEXT NOT NULL,
        size INTEGER NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (session, name)
    )""",
)
SCHEMA.add(
    7,
    "m007_fork_origin",  # a forked session's original and the seq its copy stopped before (``fork``)
    "ALTER TABLE sessions ADD COLUMN forked_from TEXT",
    "ALTER TABLE sessions ADD COLUMN forked_before INTEGER",
)
SCHEMA.add(
    8,
    "m008_facts_token_calibrations",  # memory across sessions (reactchat.memory), tokens per model (engine.tokens)
    *_facts.tables("BYTEA", "DOUBLE PRECISION"),
)
SCHEMA.add(9, "m009_turn_leases", *_lease.MIGRATION)  # leases and fencing epochs of running turns (store/_lease.py)

#: one statement for a whole batch of events, from any number of sessions: each row's
#: ``seq`` is the session's last one plus its rank among the batch's rows of that session
#: (the subquery sees the table as it was before the statement). The rows come as one JSON
#: array (``_rows``): one text parameter costs psycopg less than seven arrays. Each event's
#: JSON is a string in it (a ``json`` field would be unescaped on the way: ``\\u0000`` fails).
#: A row whose ``epoch`` is set (its writer holds the session's turn lock) is fenced
#: (``_lease.FENCE``): it is not written, nor returned, if another worker took the turn over.
_APPEND = f"""INSERT INTO events (session, seq, turn, step, type, at, body)
SELECT r.session, COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.session = r.session), 0) + r.rank,
       r.turn, r.step, r.type, r.at, r.body::json
FROM json_to_recordset(%s::json)
    AS r(session text, rank int, turn int, step int, type text, at float8, body text, epoch bigint)
WHERE {_lease.FENCE}
RETURNING session, seq"""

#: a fork: the original's last seq (no row: no such session), its row locked against a delete
_FORK_LAST = """SELECT (SELECT coalesce(max(seq), 0) FROM events WHERE session = s.id) FROM sessions s
WHERE s.id = %s FOR SHARE"""
#: a fork's session row (an id already taken is a ``UniqueViolation``: a fork never merges)
_FORK_SESSION = """INSERT INTO sessions (id, created_at, active_at, forked_from, forked_before)
VALUES (%s, %s, %s, %s, %s)"""
#: a fork's copy of the events whose JSON starts with the original's head (``Rebase``): every
#: event reactchat writes; ``_FORK_OTHERS`` are the rest, rewritten in Python
_FORK_COPY = """INSERT INTO events (session, seq, turn, step, type, at, body)
SELECT %(new)s, seq, turn, step, type, at, (%(new_head)s || substr(body::text, length(%(head)s) + 1))::json
FROM events WHERE session = %(old)s AND seq < %(stop)s AND starts_with(body::text, %(head)s)"""
_FORK_OTHERS = """SELECT seq, turn, step, type, at, body::text FROM events
WHERE session = %(old)s AND seq < %(stop)s AND NOT starts_with(body::text, %(head)s) ORDER BY seq"""
_FORK_INSERT = "INSERT INTO events (session, seq, turn, step, type, at, body) VALUES (%s, %s, %s, %s, %s, %s, %s::json)"

#: a new session (an id given twice, or already taken, is left as it is)
_CREATE = "INSERT INTO sessions (id, created_at, active_at) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING"
_CREATE_MANY = """INSERT INTO sessions (id, created_at, active_at) SELECT s, %s, %s FROM unnest(%b::text[]) AS t(s)
ON CONFLICT (id) DO NOTHING"""

#: turn locks for a batch of sessions, each won one marked as running on this backend with a new
#: fencing epoch and a lease (``_lease``), both returned; the mark's ``since`` is when the session
#: became active (``sessions.active_at`` is written once per turn, at its end: a non-HOT update
#: of an indexed column, the costliest write of a turn's lock)
_LOCK = f"""WITH t AS MATERIALIZED (
    SELECT s, i, pg_try_advisory_lock(hashtextextended(s, %s)) AS won FROM unnest(%b::text[]) WITH ORDINALITY AS t(s, i)
), marked AS (
    INSERT INTO running_turns (session, backend, backend_start, since, epoch, lease_until)
    SELECT s, pg_backend_pid(), %s::timestamptz, %s, {_lease.NEW_EPOCH}, {_lease.NEW_LEASE}
    FROM t WHERE won
    ON CONFLICT (session) DO UPDATE
    SET backend = excluded.backend, backend_start = excluded.backend_start, since = excluded.since, cancel = NULL,
        epoch = excluded.epoch, lease_until = excluded.lease_until
    RETURNING session, epoch
)
SELECT t.won, m.epoch FROM t LEFT JOIN marked m ON m.session = t.s ORDER BY t.i"""
#: a batch of turn locks released in one statement: their marks go and their sessions were
#: active until now, before any lock is let go (the scalar subqueries run first: once a lock
#: is free, another worker may mark the session as its own)
_RELEASE = """WITH unmarked AS (
    DELETE FROM running_turns WHERE session = ANY(%(s)b::text[]) AND backend = pg_backend_pid() RETURNING 1
), active AS (
    UPDATE sessions SET active_at = %(now)s WHERE id = ANY(%(s)b::text[]) RETURNING 1
)
SELECT count(pg_advisory_unlock(hashtextextended(s, %(space)s))) FROM unnest(%(s)b::text[]) AS t(s)
WHERE (SELECT count(*) FROM unmarked) >= 0 AND (SELECT count(*) FROM active) >= 0"""

#: a batch of sessions let go once more each and their marks of this backend deleted; the
#: sessions that were still held (``pg_advisory_unlock`` is false, with a warning, for the others)
_RESET = """WITH unmarked AS (
    DELETE FROM running_turns WHERE session = ANY(%(s)b::text[]) AND backend = pg_backend_pid() RETURNING 1
)
SELECT s FROM unnest(%(s)b::text[]) AS t(s)
WHERE (SELECT count(*) FROM unmarked) >= 0 AND pg_advisory_unlock(hashtextextended(s, %(space)s))"""
#: the events of a batch of sessions, each after its own ``since``; no row for a session that
#: does not exist, one with a NULL seq for one without such events
_READ = """SELECT r.i, e.seq, e.body::text FROM unnest(%b::text[], %b::int[]) WITH ORDINALITY AS r(s, since, i)
JOIN sessions x ON x.id = r.s LEFT JOIN events e ON e.session = r.s AND e.seq > r.since ORDER BY r.i, e.seq"""
#: ``_READ`` for one session (scalar parameters: psycopg dumps a list at several times the cost)
_READ_ONE = """SELECT 1, e.seq, e.body::text FROM sessions s LEFT JOIN events e ON e.session = s.id AND e.seq > %s
WHERE s.id = %s ORDER BY e.seq"""

#: ``_READ`` of whole sessions with each event's turn and type, for ``turn_events`` (``_needed``):
#: a query that picks the events itself costs the database several times as much as this read
_TURN_READ = """SELECT r.i, e.seq, e.turn, e.type, e.body::text FROM unnest(%b::text[]) WITH ORDINALITY AS r(s, i)
JOIN sessions x ON x.id = r.s LEFT JOIN events e ON e.session = r.s ORDER BY r.i, e.seq"""
#: ``_TURN_READ`` for one session (scalar parameters, as ``_READ_ONE``)
_TURN_READ_ONE = """SELECT 1, e.seq, e.turn, e.type, e.body::text FROM sessions s LEFT JOIN events e ON e.session = s.id
WHERE s.id = %s ORDER BY e.seq"""

#: the backend of a mark ``r`` in ``running_turns`` still runs
_LIVE = _lease.LIVE
#: a session idle since before a time — no turn of it running, none started since (a mark left by
#: a dead holder tells when its turn started) — deleted, and the marks its dead holders left
_EXPIRE = f"""WITH gone AS (
    DELETE FROM sessions s WHERE id = %(id)s AND coalesce(active_at, created_at) < %(before)s
    AND NOT EXISTS (SELECT 1 FROM running_turns r WHERE r.session = s.id AND (r.since >= %(before)s OR {_LIVE}))
    RETURNING id
), unmarked AS (DELETE FROM running_turns WHERE session IN (SELECT id FROM gone))
SELECT count(*) FROM gone"""
#: sessions last active before a time (a turn's start counts: its mark's ``since``), by ``active_at``'s index
_IDLE = """SELECT id FROM sessions s WHERE active_at < %(before)s
AND NOT EXISTS (SELECT 1 FROM running_turns r WHERE r.session = s.id AND r.since >= %(before)s)
ORDER BY active_at, id LIMIT %(limit)s"""

#: a batch of events (``_rows``) taken from the JSON array of rows, each written only where
#: this backend's mark of the running turn is (the turn is this store's: ``m`` is the row a
#: fencing condition reads) and its session still is (the session's row locked against a
#: delete until the commit, so that the foreign key cannot fail after the locks are let go)
_MARKED_ROWS = """SELECT r.session, COALESCE((SELECT MAX(e.seq) FROM events e WHERE e.session = r.session), 0) + r.rank,
       r.turn, r.step, r.type, r.at, r.body::json
FROM json_to_recordset(%(rows)s::json)
    AS r(session text, rank int, turn int, step int, type text, at float8, body text, after int)
JOIN running_turns m ON m.session = r.session AND m.backend = pg_backend_pid()
JOIN sessions x ON x.id = r.session"""
#: the commit of a lock batch that writes events waits for them to be durable as any append's
#: does (the lock connection's own writes do not: see ``_lock_db``); until the batch's commit
_DURABLE = "SELECT set_config('synchronous_commit', %s, true)"
#: the first events of turns whose lock this batch took (after the lock's statement and the
#: reads, so it sees every event committed before the lock), for each session only if nothing
#: came after the event its caller last saw (``after``; NULL: no condition)
_OPEN = f"""INSERT INTO events (session, seq, turn, step, type, at, body)
{_MARKED_ROWS}
WHERE r.after IS NULL OR NOT EXISTS (SELECT 1 FROM events e WHERE e.session = r.session AND e.seq > r.after)
FOR KEY SHARE OF x
RETURNING session, seq"""
#: the last events of turns and their release in one statement: each session whose events were
#: all written (``%(n)s`` of them) loses its mark, was active until now, and its lock is let go,
#: in that order (the scalar subqueries first); one whose events were not written stays held
_END = f"""WITH written AS (
    INSERT INTO events (session, seq, turn, step, type, at, body)
    {_MARKED_ROWS}
    FOR KEY SHARE OF x
    RETURNING session, seq
), ended AS (
    SELECT t.s FROM unnest(%(s)b::text[], %(n)b::int[]) AS t(s, n)
    WHERE (SELECT count(*) FROM written w WHERE w.session = t.s) = t.n
), unmarked AS (
    DELETE FROM running_turns WHERE session IN (SELECT s FROM ended) AND backend = pg_backend_pid() RETURNING 1
), active AS (
    UPDATE sessions SET active_at = %(now)s WHERE id IN (SELECT s FROM ended) RETURNING 1
)
SELECT w.session, w.seq, (SELECT count(pg_advisory_unlock(hashtextextended(s, %(space)s))) FROM ended
    WHERE (SELECT count(*) FROM unmarked) >= 0 AND (SELECT count(*) FROM active) >= 0)
FROM written w"""


class _LockCall(NamedTuple):
    """A call of the lock batch. An attempt (``take``) reads the session's events after
    ``since`` once the lock is taken (None: no read) and appends ``events`` if that read finds
    nothing; a release appends ``events`` first and lets go only once they are written."""

    session: str
    take: bool
    since: int | None = None
    events: tuple[Event, ...] = ()


class _Done(NamedTuple):
    """What a call of the lock batch did (an attempt lost gets None instead): the events an
    attempt read, whether the call's ``events`` were written (a release's: and it let go), and
    an attempt's fencing epoch (``_lease``: 0 for a release)."""

    read: list[Event]
    wrote: bool
    epoch: int = 0


#: what a call of the lock batch gets
_Outcome = _Done | BaseException | None

#: whether a batch of kept views is still whole: each session's events from the view's last one
#: on (its seq given), and whether that one's stored JSON is still the view's (a session deleted
#: and made again may have another event in that place)
_CHECK = """SELECT r.i, e.seq, e.body::text = r.body FROM unnest(%b::text[], %b::int[], %b::text[])
    WITH ORDINALITY AS r(s, last, body, i)
JOIN events e ON e.session = r.s AND e.seq >= r.last ORDER BY r.i, e.seq"""
#: ``_CHECK`` for one session (scalar parameters, as ``_READ_ONE``)
_CHECK_ONE = "SELECT 1, seq, body::text = %s FROM events WHERE session = %s AND seq >= %s ORDER BY seq"

#: the channel on which ``request_cancel`` tells the workers which session's turn to stop
CANCEL_CHANNEL = "reactchat_cancel"
#: seconds a worker waits for a notification before it looks at the marks itself
CANCEL_POLL = 1.0
#: mark a live turn as to be cancelled, and tell the workers
_CANCEL = f"""WITH asked AS (
    UPDATE running_turns r SET cancel = %s WHERE session = %s AND {_LIVE} RETURNING session
)
SELECT pg_notify(%s, session) FROM asked"""


class PostgresStore:
    """Sessions and events in PostgreSQL. Connects on first use; ``close()`` disconnects.

    Queries use up to ``pool_size`` connections. Appends are group-committed: those that
    arrive while a batch is being written go out together in the next one statement and
    one commit (``_batch.Batcher``), whichever sessions they belong to. Turn locks live
    on one more connection of their own, taken and released in batches the same way.
    """

    def __init__(self, url: str, pool_size: int = 4, lease: float | None = None) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        #: the fencing epochs of the turn locks held here, and their leases (``lease`` seconds,
        #: default ``REACTCHAT_LEASE_SECONDS`` or 5): see ``store/_lease.py``
        self._fences = _lease.Fences(lease if lease is not None else _lease.lease_from_env())
        #: the URL of this database, for components that open their own connection to it
        self.url = url
        self.pool_size = pool_size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[AsyncConnection[Any]] = []
        self._slots = asyncio.Semaphore(pool_size)
        self._lock_conn: AsyncConnection[Any] | None = None
        self._lock_guard = asyncio.Lock()
        self._backend_start: Any = None  # of the lock connection's backend
        #: ``synchronous_commit`` as the URL, role and database set it, for commits that write events
        self._commit = "on"
        self._migrated = False
        #: session → owner, for the advisory locks held on the lock connection
        self._held: dict[str, str] = {}
        #: session → owner, for the locks being asked for
        self._claims: dict[str, str] = {}
        #: the connection that listens for cancel requests
        self._listener: AsyncConnection[Any] | None = None
        #: session → its turn view (``turn_events``)
        self._views = TurnViews()
        self._batchers()
        self._chores: set[asyncio.Task[Any]] = set()

    def _batchers(self) -> None:
        # two batches in flight: one is written while the next one fills
        self._appends: Batcher[list[Event], None] = Batcher(self._write, concurrency=2)
        self._reads: Batcher[tuple[str, int], list[Event]] = Batcher(self._read_batch, concurrency=2)
        self._turn_reads: Batcher[str, tuple[list[Event], str]] = Batcher(self._turn_read_batch, concurrency=2)
        self._checks: Batcher[tuple[str, int, str], bool] = Batcher(self._check_batch, concurrency=2)
        self._creations: Batcher[str, None] = Batcher(self._create_batch)
        self._lock_calls: Batcher[_LockCall, _Done | None] = Batcher(self._lock_batch)

    # ------------------------------------------------------------------ connections

    def _same_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # connections belong to the loop that made them
            self._drop()
            self._loop = loop
            self._slots, self._lock_guard = asyncio.Semaphore(self.pool_size), asyncio.Lock()
            self._batchers()

    @contextlib.asynccontextmanager
    async def _db(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection from the pool, made (and the schema migrated) when none is idle."""
        self._same_loop()
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            try:
                yield conn
            except Exception as exc:
                if not conn.broken:
                    raise
                # the server went away (a restart, a stop): the connection is dropped and the
                # next call makes a new one; until then the database is unavailable (503)
                raise ConnectionError(f"lost the connection to PostgreSQL at {_redact(self.url)}: {exc}") from exc
            finally:
                if not conn.closed and not conn.broken:
                    self._idle.append(conn)

    async def _connect(self) -> AsyncConnection[Any]:
        conn = await _connect(self.url)
        if not self._migrated:
            await migrate(self.url)
            self._migrated = True
        return conn

    async def _lock_db(self) -> AsyncConnection[Any]:
        """The connection that holds this store's advisory locks."""
        async with self._lock_guard:
            if self._lock_conn is None or self._lock_conn.closed or self._lock_conn.broken:
                self._held.clear()  # they ended with the old connection
                self._lock_conn = await self._connect()
                # its writes are the marks of running turns and the sessions' last activity:
                # losing the last ones in a crash of the server costs nothing that matters
                # (the commits that write events wait as the URL's setting says: ``_DURABLE``);
                # when its backend started, for the marks: read once (pg_stat_activity reads
                # the status of every backend)
                cursor = await self._lock_conn.execute(
                    "SELECT (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()),"
                    " current_setting('synchronous_commit')"
                )
                row = await cursor.fetchone()
                assert row is not None  # a SELECT without FROM has its row
                self._backend_start, self._commit = row
                await self._lock_conn.execute("SET synchronous_commit TO off")
            return self._lock_conn

    def _own(self) -> list[AsyncConnection[Any]]:
        return [*self._idle, *(c for c in (self._lock_conn, self._listener) if c is not None)]

    def _drop(self) -> None:
        """Forget every connection without awaiting (their loop may be gone); the locks end with them."""
        for conn in self._own():
            conn.pgconn.finish()
        self._idle, self._lock_conn, self._listener = [], None, None
        self._held.clear()
        self._fences.stop()

    async def close(self) -> None:
        """Disconnect (the store reconnects on next use)."""
        if self._loop is not asyncio.get_running_loop():
            self._drop()
            return
        await self._appends.wait_idle()
        await self._lock_calls.wait_idle()
        self._fences.stop()
        if self._held and self._lock_conn is not None and not self._lock_conn.closed:
            # now, not when the server gets round to ending the backend (which may have ended
            # already: another worker ends a holder whose lease ran out)
            with contextlib.suppress(Exception):
                await self._lock_conn.execute("SELECT pg_advisory_unlock_all()")
        conns = self._own()
        self._idle, self._lock_conn, self._listener = [], None, None
        self._held.clear()
        for conn in conns:
            await conn.close()

    # ------------------------------------------------------------------ sessions

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session (a random id unless given) and return its id.

        Sessions created while others are being created go in one statement and commit."""
        session_id = session_id or uuid.uuid4().hex
        self._same_loop()
        await self._creations.submit(session_id)
        return session_id

    async def _create_batch(self, sessions: list[str]) -> list[BaseException | None]:
        now = time.time()
        async with self._db() as db:
            if len(sessions) == 1:  # scalar parameters: psycopg dumps a list at several times the cost
                await db.execute(_CREATE, (sessions[0], now, now))
            else:
                await db.execute(_CREATE_MANY, (now, now, sessions))
        return [None] * len(sessions)

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        async with self._db() as db:
            cursor = await db.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,))
            return await cursor.fetchone() is not None

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, newest first."""
        async with self._db() as db:
            cursor = await db.execute("SELECT id FROM sessions ORDER BY created_at DESC, id LIMIT %s", (limit,))
            return [row[0] for row in await cursor.fetchall()]

    async def idle_sessions(self, before: float, limit: int = 1000) -> list[str]:
        """Sessions last active before ``before`` (a Unix time), longest idle first."""
        async with self._db() as db:
            cursor = await db.execute(_IDLE, {"before": before, "limit": limit})
            return [row[0] for row in await cursor.fetchall()]

    async def delete_session(self, session_id: str, idle_before: float | None = None) -> bool:
        """Delete a session and all its events; False if there was none. With ``idle_before``,
        only if it was last active before that time and no turn of it is running."""
        self._views.take(session_id)
        async with self._db() as db:
            if idle_before is not None:
                cursor = await db.execute(_EXPIRE, {"id": session_id, "before": idle_before})
                row = await cursor.fetchone()
                return row is not None and row[0] > 0
            cursor = await db.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
            return cursor.rowcount > 0

    async def fork(self, session_id: str, before: int | None, new_id: str | None = None) -> str:
        """A new session holding copies of the events before ``before`` (all when None), same
        seqs, with its origin, in one transaction (see ``Store.fork``). The original's row is
        locked for the copy (``FOR SHARE``): it cannot be deleted halfway."""
        new_id = new_id or uuid.uuid4().hex
        rebase = Rebase(session_id, new_id)
        async with self._db() as db, db.transaction():
            cursor = await db.execute(_FORK_LAST, (session_id,))
            found = await cursor.fetchone()
            if found is None:
                raise SessionNotFound(session_id)
            stop = fork_point(session_id, before, found[0])
            now = time.time()
            heads = {"new": new_id, "old": session_id, "stop": stop, "head": rebase.head, "new_head": rebase.new_head}
            async with db.pipeline():  # one round trip for the three
                await db.execute(_FORK_SESSION, (new_id, now, now, session_id, stop))
                # copied by the server, each body's head rewritten (one statement, not a row each)
                await db.execute(_FORK_COPY, heads)
                cursor = await db.execute(_FORK_OTHERS, heads)  # a body written otherwise: rewritten here
            rows = [
                (new_id, seq, turn, step, kind, at, rebase(seq, body))
                for seq, turn, step, kind, at, body in await cursor.fetchall()
            ]
            if rows:
                await db.cursor().executemany(_FORK_INSERT, rows)
        return new_id

    async def origin(self, session_id: str) -> tuple[str, int] | None:
        """The original and the fork point of a forked session; None for any other. Asked once
        for a session whose turn view this store keeps: a run that calls a tool asks it every
        turn (``engine/forks.py``), and the view is checked at the start of every turn."""
        view = self._views.peek(session_id)
        if view is not None and view.origin is not None:
            return view.origin or None
        async with self._db() as db:
            cursor = await db.execute("SELECT forked_from, forked_before FROM sessions WHERE id = %s", (session_id,))
            row = await cursor.fetchone()
        found = (row[0], row[1]) if row is not None and row[0] is not None else None
        if view is not None and self._views.peek(session_id) is view:
            view.origin = found or ()
        return found

    # ------------------------------------------------------------------ events

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events in order, after the first ``since``. Raises ``SessionNotFound``.

        Reads that arrive while others are in flight go out together in the next statement."""
        self._same_loop()
        return await self._reads.submit((session_id, since))

    async def _read_batch(self, asks: list[tuple[str, int]]) -> list[list[Event] | BaseException]:
        async with self._db() as db:
            return await _read(db, asks)

    async def turn_events(self, session_id: str) -> list[Event]:
        """What a new turn of the session reads before it starts: every event of its last
        turn (and the session's last event), and of the earlier turns only their first event,
        user messages and answers (their questions and answers, for the history), as
        ``SqliteStore.turn_events``: a long session's earlier steps are not read, nor parsed.
        A session this store read or wrote lately is not read again: its view is kept
        (``VIEW_EVENTS``) and used if the session's last stored event is still the view's own
        (nobody else appended since); only that is checked. Raises ``SessionNotFound``.
        Batched as ``events``."""
        self._same_loop()
        view = self._views.take(session_id)
        if view is not None and await self._checks.submit((session_id, view.events[-1].seq, view.body)):
            return self._views.renew(session_id, view)
        events, body = await self._turn_reads.submit(session_id)
        if events:
            self._views.keep(session_id, View(events, body))
        return list(events)

    async def _check_batch(self, asks: list[tuple[str, int, str]]) -> list[bool | BaseException]:
        async with self._db() as db:
            if len(asks) == 1:
                session, last, body = asks[0]
                cursor = await db.execute(_CHECK_ONE, (body, session, last))
            else:
                cursor = await db.execute(_CHECK, ([a[0] for a in asks], [a[1] for a in asks], [a[2] for a in asks]))
            rows = await cursor.fetchall()
        found: dict[int, list[tuple[int, bool]]] = {}
        for position, seq, same in rows:
            found.setdefault(position - 1, []).append((seq, same))
        # whole: its last event is still the last one, as it was
        return [found.get(i) == [(last, True)] for i, (_, last, _) in enumerate(asks)]

    async def _turn_read_batch(self, sessions: list[str]) -> list[tuple[list[Event], str] | BaseException]:
        async with self._db() as db:
            if len(sessions) == 1:
                cursor = await db.execute(_TURN_READ_ONE, (sessions[0],))
            else:
                cursor = await db.execute(_TURN_READ, (sessions,))
            rows = await cursor.fetchall()
        kept = _needed(rows)
        # each session's last stored JSON, for its view
        lasts = {position: body for position, seq, body in kept if seq is not None}
        found = _found(kept, [(session, 0) for session in sessions])
        return [got if isinstance(got, BaseException) else (got, lasts.get(i + 1, "")) for i, got in enumerate(found)]

    async def append(self, *events: Event) -> None:
        """Commit events in one transaction; they are durable when this returns."""
        if events:
            self._same_loop()
            await self._appends.submit(list(events))

    async def _write(self, groups: list[list[Event]]) -> list[BaseException | None]:
        """Write a batch of appends in one statement; if it fails, each on its own."""
        # optional: the [postgres] extra, imported on first use (``_connect`` names it when missing)
        from psycopg import errors

        if len(groups) > 1:
            try:
                refused = await self._insert([event for group in groups for event in group])
                return [TurnTakenOver(group[0].session) if group[0].session in refused else None for group in groups]
            except (errors.ForeignKeyViolation, errors.UniqueViolation):
                pass  # one group's fault (a deleted session, a writer without the lock): find which
        outcomes: list[BaseException | None] = []
        for group in groups:
            try:
                await self._insert_retrying(group)
                outcomes.append(None)
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    async def _insert_retrying(self, events: list[Event]) -> None:
        # optional: the [postgres] extra, imported on first use (``_connect`` names it when missing)
        from psycopg import errors

        for attempt in range(5):
            try:
                if await self._insert(events):
                    raise TurnTakenOver(events[0].session)
                return
            except errors.ForeignKeyViolation:
                raise SessionNotFound(events[0].session) from None
            except errors.UniqueViolation:
                # another writer took this seq (only without the turn lock): take the next one
                if attempt == 4:
                    raise
                await asyncio.sleep(0.001 * (attempt + 1))

    async def _insert(self, events: list[Event]) -> set[str]:
        """Write events in one statement; the sessions whose rows the fence refused (none of
        their events is written: each session's rows carry the same epoch)."""
        rows, bodies = _rows(events, self._fences.epoch)
        async with self._db() as db:
            cursor = await db.execute(_APPEND, (rows,))
            written = await cursor.fetchall()
        return {e.session for e in events} - self._placed(events, bodies, written)

    def _placed(self, events: list[Event], bodies: list[str], written: list[Any]) -> set[str]:
        """After a statement wrote ``events`` (``bodies``: their stored JSON) and returned the
        ``(session, seq)`` of its rows: each written event gets its seq and joins its session's
        view; the sessions written (a statement that writes only where a condition holds may
        leave some out, all their events or none)."""
        # each session's new seqs, in ascending order, belong to its events in batch order
        seqs: dict[str, list[int]] = {}
        for session, seq, *_ in sorted(written, key=lambda row: (row[0], row[1]), reverse=True):
            seqs.setdefault(session, []).append(seq)
        kept = [(e, body) for e, body in zip(events, bodies, strict=True) if e.session in seqs]
        for e, _ in kept:
            e.seq = seqs[e.session].pop()
        # each session's events of the batch, in order, join its view
        start = 0
        for i in range(1, len(kept) + 1):
            if i == len(kept) or kept[i][0].session != kept[start][0].session:
                self._views.extend([e for e, _ in kept[start:i]], kept[i - 1][1])
                start = i
        return set(seqs)

    # ------------------------------------------------------------------ reflections

    async def reflections(self, key: str, limit: int, since: float) -> list[str]:
        """The newest ``limit`` reflections under ``key`` made after ``since``, oldest first."""
        async with self._db() as db:
            cursor = await db.execute(
                "SELECT text FROM reflections WHERE key = %s AND at > %s ORDER BY at DESC, id DESC LIMIT %s",
                (key, since, limit),
            )
            rows = await cursor.fetchall()
        return [text for (text,) in reversed(rows)]

    async def add_reflection(self, key: str, text: str, at: float, keep: int, expire_before: float) -> None:
        """Keep a reflection; only the newest ``keep`` under ``key`` stay, none from before ``expire_before``."""
        async with self._db() as db, db.transaction():
            await db.execute("INSERT INTO reflections (key, at, text) VALUES (%s, %s, %s)", (key, at, text))
            await db.execute("DELETE FROM reflections WHERE at < %s", (expire_before,))
            await db.execute(
                """DELETE FROM reflections WHERE key = %(key)s AND id NOT IN
                   (SELECT id FROM reflections WHERE key = %(key)s ORDER BY at DESC, id DESC LIMIT %(keep)s)""",
                {"key": key, "keep": keep},
            )

    # ------------------------------------------------------------------ facts, token counts

    async def add_fact(self, fact: Fact) -> None:
        """Keep ``fact`` (and drop the scope's expired ones)."""
        async with self._db() as db, db.transaction():
            await db.execute(_facts.postgres(_facts.EXPIRE), (fact.scope, fact.at))
            await db.execute(_facts.postgres(_facts.ADD), _facts.values(fact))

    async def facts(self, scope: str, now: float, limit: int = 1000) -> list[Fact]:
        """The scope's facts that have not expired at ``now``, newest first."""
        async with self._db() as db:
            cursor = await db.execute(_facts.postgres(_facts.LIST), (scope, now, limit))
            rows = await cursor.fetchall()
        return [_facts.from_row(row) for row in rows]

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete a fact of ``scope``; whether there was one."""
        async with self._db() as db:
            cursor = await db.execute(_facts.postgres(_facts.FORGET), (scope, fact_id))
            return cursor.rowcount > 0

    async def token_calibration(self, model: str) -> tuple[int, int] | None:
        """The ``(characters, tokens)`` recorded for ``model``, or None."""
        async with self._db() as db:
            cursor = await db.execute(_facts.postgres(_facts.CALIBRATION), (model,))
            row = await cursor.fetchone()
        return (int(row[0]), int(row[1])) if row else None

    async def add_token_calibration(self, model: str, chars: int, tokens: int) -> None:
        """Add to ``model``'s totals of characters sent and input tokens reported."""
        async with self._db() as db:
            await db.execute(_facts.postgres(_facts.CALIBRATE), (model, chars, tokens))

    # ------------------------------------------------------------------ artifacts

    async def put_artifact(self, session_id: str, name: str, data: bytes, at: float) -> Artifact:
        """Keep an artifact (replacing one of that name); the oldest beyond the bounds go."""
        # optional: the [postgres] extra, imported on first use (``_connect`` names it when missing)
        from psycopg import errors

        kept = Artifact(name, content_type(name, data), len(data), at)
        async with self._db() as db, db.transaction():
            try:
                await db.execute(
                    """INSERT INTO artifacts (session, name, content_type, size, at, data)
                       VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session, name) DO UPDATE
                       SET content_type = excluded.content_type, size = excluded.size,
                           at = excluded.at, data = excluded.data""",
                    (session_id, name, kept.content_type, kept.size, at, data),
                )
            except errors.ForeignKeyViolation:
                raise SessionNotFound(session_id) from None
            await db.execute(PRUNE.replace("?", "%s"), (session_id, session_id, MAX_ARTIFACTS, MAX_SESSION_BYTES))
        return kept

    async def artifact(self, session_id: str, name: str) -> Artifact | None:
        """The artifact with its bytes, or None."""
        async with self._db() as db:
            cursor = await db.execute(
                "SELECT name, content_type, size, at, data FROM artifacts WHERE session = %s AND name = %s",
                (session_id, name),
            )
            row = await cursor.fetchone()
        return Artifact(row[0], row[1], row[2], row[3], bytes(row[4])) if row else None

    async def artifacts(self, session_id: str) -> list[Artifact]:
        """The session's artifacts without their bytes, oldest first."""
        async with self._db() as db:
            cursor = await db.execute(
                "SELECT name, content_type, size, at FROM artifacts WHERE session = %s ORDER BY at, name",
                (session_id,),
            )
            rows = await cursor.fetchall()
        return [Artifact(*row) for row in rows]

    # ------------------------------------------------------------------ turn locks

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's turn lock unless someone else holds it (``ttl`` unused: see the module doc)."""
        return await self._take(_LockCall(session_id, True), owner) is not None

    async def try_lock_read(
        self, session_id: str, owner: str, ttl: float, since: int | None, then: tuple[Event, ...] = ()
    ) -> list[Event] | None:
        """``try_lock``, then the session's events after the first ``since`` (none when None), read
        once the lock is taken; None when someone else holds the lock. If the read finds nothing,
        ``then`` is appended, durable, in the lock's transaction: the lock, the read and the append
        are one round trip (``_lock_batch``). ``SessionNotFound`` (``since`` 0 only, as ``events``)
        gives the lock back first. Should ``then`` not have gone in with the lock (its session went,
        or another writer came between the read and the append) it is appended on its own after
        it; if that fails the lock is given back and the error raised."""
        done = await self._take(_LockCall(session_id, True, since, then), owner)
        if done is None or done.read or not then or done.wrote:
            return None if done is None else done.read
        try:
            await self.append(*then)
        except BaseException:
            await self.unlock(session_id, owner)
            raise
        return done.read

    async def append_unlock(self, owner: str, *events: Event) -> None:
        """``append``, then ``unlock`` of their session for ``owner``: one statement on the lock
        connection, one round trip, one transaction (``_END``). If the append fails, the lock is
        kept. Events of a session ``owner`` does not hold are only appended."""
        session = events[0].session
        self._same_loop()
        if self._held.get(session) != owner:
            await self.append(*events)
            return
        request = asyncio.ensure_future(self._lock_calls.submit(_LockCall(session, False, None, events)))
        try:
            done = await asyncio.shield(request)
        except BaseException:
            # the statement may still end the turn: its lock is then no longer held
            request.add_done_callback(lambda ended: self._ended(session, owner, ended))
            raise
        if done is not None and done.wrote:
            self._forget(session, owner)
            return
        # not written, the lock still held: no mark of this store's (or no such session); as
        # before the statement that does both, the append alone (``SessionNotFound``), then the release
        await self.append(*events)
        await self.unlock(session, owner)

    async def _take(self, call: _LockCall, owner: str) -> _Done | None:
        self._same_loop()
        session_id = call.session
        holder = self._held.get(session_id) or self._claims.get(session_id)
        if holder is not None:  # re-entrant for its holder (the lock is not this call's to give back)
            if holder != owner:
                return None
            return _Done([] if call.since is None else await self.events(session_id, call.since), False)
        self._claims[session_id] = owner  # claimed in this process before the database is asked
        request = asyncio.ensure_future(self._lock_calls.submit(call))
        try:
            got = await asyncio.shield(request)
        except BaseException:
            # the request may still take the lock: give it back then
            request.add_done_callback(lambda done: self._give_back(session_id, done))
            raise
        finally:
            del self._claims[session_id]
        if got is not None:
            self._held[session_id] = owner
            self._fences.take(session_id, owner, got.epoch)  # this turn's appends carry its epoch
            self._fences.keep_renewed(self._db)
        return got

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the turn lock if ``owner`` holds it."""
        self._fences.drop(session_id, owner)  # even if the lock ended with a lost connection
        if self._held.get(session_id) != owner:
            return
        del self._held[session_id]
        await self._lock_calls.submit(_LockCall(session_id, False))

    def _forget(self, session: str, owner: str) -> None:
        """The lock of ``session`` was let go in the database: no longer ``owner``'s here."""
        self._fences.drop(session, owner)
        if self._held.get(session) == owner:
            del self._held[session]

    def _ended(self, session: str, owner: str, request: asyncio.Future[_Done | None]) -> None:
        """An ``append_unlock`` whose caller stopped waiting: if it let go, so be it here too."""
        if not request.cancelled() and request.exception() is None and (done := request.result()) and done.wrote:
            self._forget(session, owner)

    async def abandoned(self) -> list[str]:
        """Sessions whose running turn's worker died or stopped renewing its lease.

        A worker that dies mid-turn leaves its turn interrupted; its advisory locks end
        with its connections, and its marks in ``running_turns`` stay behind, however
        briefly the turn ran. A worker cut off or frozen keeps its connections, but its
        lease runs out: its lock connection is ended here (``_lease.abandoned``). Each such
        mark is removed by exactly one caller, which gets its session: of several workers
        looking at once, one takes the turn over.
        """
        async with self._db() as db:
            return await _lease.abandoned(db)

    async def request_cancel(self, session_id: str) -> bool:
        """Ask whichever worker runs the session's turn to cancel it; False if none runs it."""
        async with self._db() as db:
            cursor = await db.execute(_CANCEL, (time.time(), session_id, CANCEL_CHANNEL))
            return await cursor.fetchone() is not None

    async def cancel_requests(self) -> list[str]:
        """The sessions whose turn lock this store holds and whose turn someone asked to cancel
        (``request_cancel``), once a notification comes or ``CANCEL_POLL`` seconds pass."""
        # optional: the [postgres] extra, imported on first use (``_connect`` names it when missing)
        from psycopg import OperationalError

        self._same_loop()
        try:
            if self._listener is None or self._listener.closed or self._listener.broken:
                self._listener = await self._connect()
                await self._listener.execute(f"LISTEN {CANCEL_CHANNEL}")
            async for _ in self._listener.notifies(timeout=CANCEL_POLL, stop_after=1):
                pass
        except (OperationalError, ConnectionError):
            self._listener = None  # the database went away: try again after a pause
            await asyncio.sleep(CANCEL_POLL)
            return []
        held = list(self._held)
        if not held:
            return []
        async with self._db() as db:
            cursor = await db.execute(
                "SELECT session FROM running_turns WHERE cancel IS NOT NULL AND session = ANY(%s)", (held,)
            )
            return [session for (session,) in await cursor.fetchall() if session in self._held]

    def _give_back(self, session_id: str, request: asyncio.Future[_Done | None]) -> None:
        if not request.cancelled() and request.exception() is None and request.result() is not None:
            chore = asyncio.ensure_future(self._lock_calls.submit(_LockCall(session_id, False)))
            self._chores.add(chore)
            chore.add_done_callback(self._chores.discard)

    async def _lock_batch(self, calls: list[_LockCall], again: bool = False) -> list[_Outcome]:
        """Every call of a batch on the lock connection in one round trip: a pipeline, one
        transaction, each statement seeing what the ones before it did, in this order: the
        releases without events (their marks, then their locks, in one statement); the
        attempts; the reads of the attempts that asked for one; the events of the attempts
        that won and whose read found nothing (``_OPEN``); the releases with events (``_END``,
        last: should a statement fail before it or in it, their events are not written and
        their locks are still held). A batch that writes events commits durably (``_DURABLE``).

        Advisory locks are re-entrant per connection, so a release and a new attempt on
        the same session in one batch leave it held once. An attempt gets None when lost.
        The reads and the attempts' events go with the attempts, before it is known which won:
        a lost one's read is dropped, and its events are not written (they need this backend's
        mark of the turn). If a statement fails, the sessions of the releases and attempts are
        left unlocked and unmarked (the releases are done) and the attempts get the error
        (``_reset``); the releases with events are tried once more in a batch of their own.
        An attempt that wins gets its lock's fencing epoch (``_lease``). If the lock connection
        had ended, its locks ended with it: the batch runs once more on a new one.
        """
        db = await self._lock_db()
        batch = _LockBatch(calls)
        try:
            cursors = await self._send(db, batch)
            won, read, opened, ended = [await c.fetchall() if c is not None else [] for c in cursors]
        except Exception as exc:
            if (db.closed or db.broken) and not again:
                # its locks ended with it (another worker ended it when this one's lease ran
                # out, the server restarted): the batch runs once more on a new connection
                return await self._lock_batch(calls, again=True)
            ending = [c for c in calls if c.events and not c.take]
            if not (db.closed or db.broken):
                await self._reset(db, [c.session for c in calls if c.take or not c.events])
            retried = await self._lock_batch(ending) if ending and len(ending) < len(calls) else [exc] * len(ending)
            retries = iter(retried)
            return [exc if c.take else next(retries) if c.events else _Done([], False) for c in calls]
        wins = iter(won)
        outcomes: list[_Outcome] = []
        for call in calls:
            won_, epoch = next(wins) if call.take else (True, 0)
            outcomes.append(_Done([], False, epoch) if won_ else None)
        gone = self._read_under_lock(batch, outcomes, read)
        wrote = self._placed(*batch.opening, opened) | self._placed(*batch.ending, ended)
        for i, call in enumerate(calls):
            done = outcomes[i]
            if call.events and isinstance(done, _Done) and call.session in wrote:
                outcomes[i] = done._replace(wrote=True)
        if gone:  # locked, but no such session (or the read failed): the lock goes back at once
            await db.execute(_RELEASE, {"s": gone, "now": time.time(), "space": LOCK_SPACE})
        return outcomes

    async def _send(self, db: AsyncConnection[Any], batch: _LockBatch) -> list[AsyncCursor[Any] | None]:
        """A lock batch's statements, in one pipeline (``_lock_batch``); the cursors of the
        attempts, the reads, the attempts' events and the releases' events (None: not sent)."""
        cursors: list[AsyncCursor[Any] | None] = [None] * 4
        async with db.pipeline():
            if batch.opening[0] or batch.ending[0]:
                await db.execute(_DURABLE, (self._commit,))
            if batch.releases:
                await db.execute(_RELEASE, {"s": batch.releases, "now": time.time(), "space": LOCK_SPACE})
            if batch.attempts:
                marks = (LOCK_SPACE, batch.attempts, self._backend_start, time.time(), self._fences.lease)
                cursors[0] = await db.execute(_LOCK, marks)
            if batch.asks:
                # a statement of its own, after the lock's: it sees every append committed
                # before the lock was taken
                cursors[1] = await db.execute(*_read_query(batch.asks))
            if batch.opening[0]:
                cursors[2] = await db.execute(_OPEN, {"rows": batch.opening_rows})
            if batch.ending[0]:
                ending = {"rows": batch.ending_rows, "s": list(batch.counts), "n": list(batch.counts.values())}
                cursors[3] = await db.execute(_END, {**ending, "now": time.time(), "space": LOCK_SPACE})
        return cursors

    def _read_under_lock(self, batch: _LockBatch, outcomes: list[_Outcome], rows: list[Any]) -> list[str]:
        """The reads of a lock batch given to the attempts that won (in ``outcomes``); the
        sessions locked whose read failed (``SessionNotFound``, or rows that cannot be read)."""
        if not batch.asks:
            return []
        try:
            found: list[list[Event] | BaseException] = _found(rows, batch.asks)
        except Exception as exc:  # the locks were taken: they go back, and those attempts fail
            found = [exc] * len(batch.asks)
        gone = []
        for i, got in zip(batch.reads, found, strict=True):
            if isinstance(taken := outcomes[i], _Done):
                outcomes[i] = got if isinstance(got, BaseException) else taken._replace(read=got)
                if isinstance(got, BaseException):
                    gone.append(batch.calls[i].session)
        return gone

    async def _reset(self, db: AsyncConnection[Any], sessions: list[str]) -> None:
        """After a lock batch failed: none of its sessions locked on ``db`` any more, nor marked
        as this backend's. Its statements were one transaction, rolled back, but locks taken or
        released in it stay so: each is let go as often as it is held (none of these sessions
        is held by another caller in this process: ``_take`` submits only sessions nobody holds)."""
        left = list(dict.fromkeys(sessions))
        for _ in range(3):  # held at most twice (a release and an attempt in one batch)
            cursor = await db.execute(_RESET, {"s": left, "space": LOCK_SPACE})
            left = [session for (session,) in await cursor.fetchall()]
            if not left:
                return


class _LockBatch:
    """The parts of a lock batch (``PostgresStore._lock_batch``), each in the order of its calls."""

    def __init__(self, calls: list[_LockCall]) -> None:
        self.calls = calls
        #: the sessions released without events, and those asked for
        self.releases = [c.session for c in calls if not c.take and not c.events]
        self.attempts = [c.session for c in calls if c.take]
        #: the places of the attempts that read, and what each reads: ``(session, since)``
        self.reads = [i for i, c in enumerate(calls) if c.take and c.since is not None]
        self.asks = [(calls[i].session, calls[i].since or 0) for i in self.reads]
        #: the attempts' events, then the releases': each the events and their stored JSON
        opening = [e for c in calls if c.take for e in c.events]
        ending = [e for c in calls if not c.take for e in c.events]
        self.opening_rows, opening_bodies = _rows(opening, after={c.session: c.since for c in calls if c.take})
        self.ending_rows, ending_bodies = _rows(ending)
        self.opening = (opening, opening_bodies)
        self.ending = (ending, ending_bodies)
        #: each released session's count of events, which ``_END`` writes all or none of
        self.counts: dict[str, int] = {}
        for e in ending:
            self.counts[e.session] = self.counts.get(e.session, 0) + 1


def _rows(
    events: list[Event], epoch: Callable[[str], int | None] | None = None, after: dict[str, int | None] | None = None
) -> tuple[str, list[str]]:
    """A batch of events as ``_APPEND``'s JSON array (each with its rank among its session's,
    with the fencing ``epoch`` of its session's turn lock if held here, for ``_APPEND``'s
    fence, and with ``after``, the event its session's read started after, for ``_OPEN``),
    and each event's stored JSON."""
    ranks: dict[str, int] = {}
    rows = []
    bodies = []
    for e in events:
        ranks[e.session] = rank = ranks.get(e.session, 0) + 1
        bodies.append(body := stored_json(e))
        since = "" if after is None else f',"after":{json.dumps(after[e.session])}'
        fence = None if epoch is None else epoch(e.session)
        fenced = "" if fence is None else f',"epoch":{fence}'
        rows.append(
            f'{{"session":{json.dumps(e.session)},"rank":{rank},"turn":{e.turn},"step":{e.step},'
            f'"type":{json.dumps(e.type)},"at":{e.at!r},"body":{json.dumps(body)}{since}{fenced}}}'
        )
    return f"[{','.join(rows)}]", bodies


async def _read(db: AsyncConnection[Any], asks: list[tuple[str, int]]) -> list[list[Event] | BaseException]:
    """Each ``(session, since)``'s events after ``since``, in one statement; ``SessionNotFound``
    for a session that does not exist when asked from the start (``since`` 0), as ``events``."""
    cursor = await db.execute(*_read_query(asks))
    return _found(await cursor.fetchall(), asks)


def _read_query(asks: list[tuple[str, int]]) -> tuple[str, tuple[Any, ...]]:
    """``_read``'s statement and its parameters."""
    if len(asks) == 1:
        return _READ_ONE, (asks[0][1], asks[0][0])
    return _READ, ([session for session, _ in asks], [since for _, since in asks])


def _needed(rows: list[Any]) -> list[Any]:
    """Of ``_TURN_READ``'s rows (position, seq, turn, type, body), as ``_READ``'s, those of each
    session's last turn, its last event, the first event of each of its turns, its user messages
    and answers: what ``SqliteStore.turn_events`` selects. The others' bodies are never parsed."""
    kept = []
    for _, group in itertools.groupby(rows, key=lambda row: row[0]):
        session = list(group)
        if session[0][1] is None:  # no events
            kept.append(session[0][:2] + session[0][4:])
            continue
        last_turn, last_seq = max(row[2] for row in session), session[-1][1]
        firsts: dict[int, int] = {}
        for _, seq, turn, _, _ in session:
            firsts.setdefault(turn, seq)
        kept += [
            (position, seq, body)
            for position, seq, turn, kind, body in session
            if kind in ("user", "answer", "compaction") or turn >= last_turn or seq == last_seq or firsts[turn] == seq
        ]
    return kept


def _found(rows: list[Any], asks: list[tuple[str, int]]) -> list[list[Event] | BaseException]:
    """``_READ``'s rows (position, seq, body) as each ask's events, or ``SessionNotFound``."""
    found: dict[int, list[Event]] = {}
    for position, seq, body in rows:
        events = found.setdefault(position - 1, [])
        if seq is not None:
            events.append(stored_event(seq, body))
    return [
        found.get(i, []) if i in found or since else SessionNotFound(session) for i, (session, since) in enumerate(asks)
    ]


async def _connect(url: str) -> AsyncConnection[Any]:
    try:
        # optional: the [postgres] extra, imported on first use
        import psycopg
    except ImportError as exc:
        raise ImportError(f"the PostgreSQL store needs psycopg: pip install 'reactchat[postgres]' ({exc})") from None
    try:
        conn = await psycopg.AsyncConnection.connect(_lease.with_link(url), autocommit=True)
    except psycopg.OperationalError as exc:
        raise ConnectionError(f"cannot connect to PostgreSQL at {_redact(url)}: {exc}".strip()) from None
    return conn


async def migrate(url: str) -> None:
    """Apply the migrations this database has not seen; concurrent starters wait for each other.

    The runner is synchronous (one for every database), so it runs on a connection of
    its own in a worker thread, once per store.
    """

    def run() -> None:
        # optional: the [postgres] extra (``_connect`` names it when missing)
        import psycopg

        with psycopg.connect(_lease.with_link(url), autocommit=True) as conn, conn.transaction():
            migrations.migrate(migrations.Database(conn, "postgres"), SCHEMA, lock=migrations.POSTGRES_LOCK)

    await asyncio.to_thread(run)


def _redact(url: str) -> str:
    """The URL without its password, for error messages."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"


def from_url(url: str) -> PostgresStore:
    """``postgresql://…`` → a ``PostgresStore`` (nothing is connected yet)."""
    return PostgresStore(url)
