"""``PostgresStore``: sessions and their events in PostgreSQL, for several server workers.

URL: any libpq URL, ``postgresql://user@host:5432/db`` (``postgres://`` too). Needs the
``postgres`` extra (``pip install 'reactchat[postgres]'``, psycopg 3), imported on first
use only.

Schema: the SQLite store's ``sessions`` and ``events`` (created by the migrations of
``SCHEMA``, recorded in ``reactchat_migrations``; turn locks differ, see below); tables prefixed
``kb_`` belong to the knowledge base::

    sessions(id TEXT PRIMARY KEY, created_at DOUBLE PRECISION)
    events(session TEXT → sessions.id ON DELETE CASCADE, seq INTEGER,   -- 1, 2, 3… per session
           turn INTEGER, step INTEGER, type TEXT, at DOUBLE PRECISION,
           body JSON,                       -- the event as written by ``EVENTS.dump_json``
           PRIMARY KEY (session, seq))
    reflections(id BIGSERIAL, key TEXT, at DOUBLE PRECISION, text TEXT)   -- see reactchat.reflect

``body`` is ``json``, not ``jsonb``: it keeps the text as written and accepts ``\\u0000``,
which a tool's output may contain. Each ``append`` is one transaction (autocommitted when it holds one event), durable
(per the server's ``synchronous_commit``) before the engine goes on.

Turn locks are session-level advisory locks, ``pg_try_advisory_lock(hashtextextended(session,
LOCK_SPACE))`` (a 64-bit key), held on a connection the store keeps for them: they need no table,
and they end with the connection, so a killed worker never blocks its session. ``ttl`` is
therefore unused. The store tracks which of its own callers holds each lock, since
advisory locks are re-entrant per connection. Queries go through a small pool
(``pool_size``, default 4) so that concurrent turns do not wait for each other's commits.

Every commit waits for the server's WAL flush. ``?options=-csynchronous_commit%3Doff`` in
the URL trades that for the SQLite store's guarantee (a killed client loses nothing; a
crash of the *server* may lose the last commits) and is several times faster on slow
disks: see benchmarks/store.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from reactchat.messages import Event, stored_event, stored_json
from reactchat.store import SessionNotFound
from reactchat.store import _migrations as migrations
from reactchat.store._migrations import Schema, mark_interrupted

if TYPE_CHECKING:
    from psycopg import AsyncConnection

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
    "m002_reflections",  # Reflexion's memory across sessions: reflections by task fingerprint (reactchat.reflect)
    """CREATE TABLE reflections (
        id BIGSERIAL PRIMARY KEY,
        key TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        text TEXT NOT NULL
    )""",
    "CREATE INDEX reflections_key_at ON reflections(key, at)",
)
SCHEMA.add(3, "m003_interrupted_field", mark_interrupted)

_APPEND = """INSERT INTO events (session, seq, turn, step, type, at, body)
SELECT %(session)s, COALESCE(MAX(seq), 0) + 1, %(turn)s, %(step)s, %(type)s, %(at)s, %(body)s
FROM events WHERE session = %(session)s RETURNING seq"""


class PostgresStore:
    """Sessions and events in PostgreSQL. Connects on first use; ``close()`` disconnects.

    Queries use up to ``pool_size`` connections, so concurrent turns share the WAL flushes
    of their commits; turn locks live on one more connection of their own.
    """

    def __init__(self, url: str, pool_size: int = 4) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        #: the URL of this database, for components that open their own connection to it
        self.url = url
        self.pool_size = pool_size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: list[AsyncConnection[Any]] = []
        self._slots = asyncio.Semaphore(pool_size)
        self._lock_conn: AsyncConnection[Any] | None = None
        self._lock_guard = asyncio.Lock()
        self._migrated = False
        #: session → owner, for the advisory locks held on the lock connection
        self._held: dict[str, str] = {}

    # ------------------------------------------------------------------ connections

    def _same_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # connections belong to the loop that made them; Agent.run() makes a loop per call
            self._drop()
            self._loop = loop
            self._slots, self._lock_guard = asyncio.Semaphore(self.pool_size), asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _db(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection from the pool, made (and the schema migrated) when none is idle."""
        self._same_loop()
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            try:
                yield conn
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
        self._same_loop()
        async with self._lock_guard:
            if self._lock_conn is None or self._lock_conn.closed or self._lock_conn.broken:
                self._held.clear()  # they ended with the old connection
                self._lock_conn = await self._connect()
            return self._lock_conn

    def _drop(self) -> None:
        """Forget every connection without awaiting (their loop may be gone); the locks end with them."""
        for conn in [*self._idle, *([self._lock_conn] if self._lock_conn else [])]:
            conn.pgconn.finish()
        self._idle, self._lock_conn = [], None
        self._held.clear()

    async def close(self) -> None:
        """Disconnect (the store reconnects on next use)."""
        if self._loop is not asyncio.get_running_loop():
            self._drop()
            return
        if self._held and self._lock_conn is not None and not self._lock_conn.closed:
            # now, not when the server gets round to ending the backend
            await self._lock_conn.execute("SELECT pg_advisory_unlock_all()")
        conns = [*self._idle, *([self._lock_conn] if self._lock_conn else [])]
        self._idle, self._lock_conn = [], None
        self._held.clear()
        for conn in conns:
            await conn.close()

    # ------------------------------------------------------------------ sessions

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session (a random id unless given) and return its id."""
        session_id = session_id or uuid.uuid4().hex
        async with self._db() as db:
            await db.execute(
                "INSERT INTO sessions (id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                (session_id, time.time()),
            )
        return session_id

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

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session and all its events; False if there was none."""
        async with self._db() as db:
            cursor = await db.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
            return cursor.rowcount > 0

    # ------------------------------------------------------------------ events

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events in order, after the first ``since``. Raises ``SessionNotFound``."""
        async with self._db() as db:
            cursor = await db.execute(
                "SELECT seq, body::text FROM events WHERE session = %s AND seq > %s ORDER BY seq", (session_id, since)
            )
            rows = await cursor.fetchall()
        if not rows and not since and not await self.exists(session_id):
            raise SessionNotFound(session_id)
        return [stored_event(seq, body) for seq, body in rows]

    async def append(self, *events: Event) -> None:
        """Commit events in one transaction; they are durable when this returns."""
        from psycopg import errors

        rows = [
            {
                "session": e.session,
                "turn": e.turn,
                "step": e.step,
                "type": e.type,
                "at": e.at,
                "body": stored_json(e).decode(),
            }
            for e in events
        ]
        for attempt in range(5):
            try:
                async with self._db() as db:
                    if len(rows) == 1:
                        seqs = [await _append(db, rows[0])]
                    else:
                        async with db.transaction():
                            seqs = [await _append(db, row) for row in rows]
                for event, seq in zip(events, seqs, strict=True):
                    event.__dict__["seq"] = seq
                return
            except errors.ForeignKeyViolation:
                raise SessionNotFound(events[0].session) from None
            except errors.UniqueViolation:
                # another writer took this seq (only without the turn lock): take the next one
                if attempt == 4:
                    raise
                await asyncio.sleep(0.001 * (attempt + 1))

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

    # ------------------------------------------------------------------ turn locks

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's turn lock unless someone else holds it (``ttl`` unused: see the module doc)."""
        holder = self._held.get(session_id)
        if holder is not None:
            return holder == owner
        db = await self._lock_db()
        cursor = await db.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, %s))", (session_id, LOCK_SPACE))
        row = await cursor.fetchone()
        if row is None or not row[0] or session_id in self._held:
            if row is not None and row[0]:
                # another task of this process won meanwhile; undo our re-entrant hold
                await db.execute("SELECT pg_advisory_unlock(hashtextextended(%s, %s))", (session_id, LOCK_SPACE))
            return False
        self._held[session_id] = owner
        return True

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the turn lock if ``owner`` holds it."""
        if self._held.get(session_id) != owner:
            return
        del self._held[session_id]
        db = await self._lock_db()
        await db.execute("SELECT pg_advisory_unlock(hashtextextended(%s, %s))", (session_id, LOCK_SPACE))


async def _append(db: AsyncConnection[Any], row: dict[str, Any]) -> int:
    """Insert one event row; its ``seq``."""
    cursor = await db.execute(_APPEND, row)
    found = await cursor.fetchone()
    assert found is not None  # INSERT ... RETURNING returns the row it inserted
    return int(found[0])


async def _connect(url: str) -> AsyncConnection[Any]:
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(f"the PostgreSQL store needs psycopg: pip install 'reactchat[postgres]' ({exc})") from None
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise ConnectionError(f"cannot connect to PostgreSQL at {_redact(url)}: {exc}".strip()) from None
    return conn


async def migrate(url: str) -> None:
    """Apply the migrations this database has not seen; concurrent starters wait for each other.

    The runner is synchronous (one for every database), so it runs on a connection of
    its own in a worker thread, once per store.
    """

    def run() -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
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
