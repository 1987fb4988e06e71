"""``PostgresStore``: sessions and their events in PostgreSQL, for several server workers.

URL: any libpq URL, ``postgresql://user@host:5432/db`` (``postgres://`` too). Needs the
``postgres`` extra (``pip install 'reactchat[postgres]'``, psycopg 3), imported on first
use only.

Schema: the same as the SQLite store (created by ``MIGRATIONS``, recorded in
``reactchat_migrations``); tables prefixed ``kb_`` belong to the knowledge base::

    sessions(id TEXT PRIMARY KEY, created_at DOUBLE PRECISION)
    events(session TEXT → sessions.id ON DELETE CASCADE, seq INTEGER,   -- 1, 2, 3… per session
           turn INTEGER, step INTEGER, type TEXT, at DOUBLE PRECISION,
           body JSON,                       -- the event as written by ``EVENTS.dump_json``
           PRIMARY KEY (session, seq))

``body`` is ``json``, not ``jsonb``: it keeps the text as written and accepts ``\\u0000``,
which a tool's output may contain. Each ``append`` is one autocommitted statement, durable
(per the server's ``synchronous_commit``) before the engine goes on.

Turn locks are session-level advisory locks, ``pg_try_advisory_lock(LOCK_SPACE,
hashtext(session))``, held on the store's connection: they need no table, and they end
with the connection, so a killed worker never blocks its session. ``ttl`` is therefore
unused. A store uses one connection (psycopg serializes the queries of concurrent tasks
on it) and tracks which of its own callers holds each lock, since advisory locks are
re-entrant per connection.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

from reactchat.messages import EVENTS, Event
from reactchat.store import SessionNotFound

if TYPE_CHECKING:
    from psycopg import AsyncConnection

#: first key of every advisory lock this store takes ("rct" in ASCII), so that other
#: users of advisory locks in the same database do not collide with session locks
LOCK_SPACE = 0x726374
#: serializes migrations between processes that start at the same time
MIGRATION_LOCK = 0x72637400

#: Schema changes, applied in order, each once: append, never edit.
MIGRATIONS: list[tuple[str, list[str]]] = [
    (
        "m001_sessions_events",
        [
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
        ],
    ),
]

_APPEND = """INSERT INTO events (session, seq, turn, step, type, at, body)
SELECT %(session)s, COALESCE(MAX(seq), 0) + 1, %(turn)s, %(step)s, %(type)s, %(at)s, %(body)s
FROM events WHERE session = %(session)s"""


class PostgresStore:
    """Sessions and events in PostgreSQL. Connects on first use; ``close()`` disconnects."""

    def __init__(self, url: str) -> None:
        #: the URL of this database, for components that open their own connection to it
        self.url = url
        self._conn: AsyncConnection[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting: asyncio.Lock | None = None
        #: session → owner, for the advisory locks held on this connection
        self._held: dict[str, str] = {}

    # ------------------------------------------------------------------ connection

    async def _db(self) -> AsyncConnection[Any]:
        """The connection, made (and the schema migrated) on first use in this event loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # a connection belongs to the loop that made it; Agent.run() makes a loop per call
            self._drop()
            self._loop, self._connecting = loop, asyncio.Lock()
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        assert self._connecting is not None
        async with self._connecting:
            if self._conn is None or self._conn.closed:
                self._held.clear()  # the locks ended with the old connection
                self._conn = await _connect(self.url)
            return self._conn

    def _drop(self) -> None:
        """Forget the connection without awaiting (its loop may be gone); its locks end with it."""
        if self._conn is not None:
            self._conn.pgconn.finish()
            self._conn = None
        self._held.clear()

    async def close(self) -> None:
        """Disconnect (the store reconnects on next use)."""
        if self._conn is not None and self._loop is asyncio.get_running_loop():
            conn, self._conn = self._conn, None
            self._held.clear()
            await conn.close()
        else:
            self._drop()

    # ------------------------------------------------------------------ sessions

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session (a random id unless given) and return its id."""
        session_id = session_id or uuid.uuid4().hex
        db = await self._db()
        await db.execute(
            "INSERT INTO sessions (id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
            (session_id, time.time()),
        )
        return session_id

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        db = await self._db()
        cursor = await db.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,))
        return await cursor.fetchone() is not None

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, newest first."""
        db = await self._db()
        cursor = await db.execute("SELECT id FROM sessions ORDER BY created_at DESC, id LIMIT %s", (limit,))
        return [row[0] for row in await cursor.fetchall()]

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session and all its events; False if there was none."""
        db = await self._db()
        cursor = await db.execute("DELETE FROM sessions WHERE id = %s", (session_id,))
        return cursor.rowcount > 0

    # ------------------------------------------------------------------ events

    async def events(self, session_id: str) -> list[Event]:
        """Every event of the session, in order. Raises ``SessionNotFound``."""
        db = await self._db()
        cursor = await db.execute("SELECT body::text FROM events WHERE session = %s ORDER BY seq", (session_id,))
        rows = await cursor.fetchall()
        if not rows and not await self.exists(session_id):
            raise SessionNotFound(session_id)
        return [EVENTS.validate_json(body) for (body,) in rows]

    async def append(self, event: Event) -> None:
        """Commit one event; it is durable when this returns."""
        from psycopg import errors

        db = await self._db()
        params = {
            "session": event.session,
            "turn": event.turn,
            "step": event.step,
            "type": event.type,
            "at": event.at,
            "body": EVENTS.dump_json(event).decode(),
        }
        for attempt in range(5):
            try:
                await db.execute(_APPEND, params)
                return
            except errors.ForeignKeyViolation:
                raise SessionNotFound(event.session) from None
            except errors.UniqueViolation:
                # another writer took this seq (only without the turn lock): take the next one
                if attempt == 4:
                    raise
                await asyncio.sleep(0.001 * (attempt + 1))

    # ------------------------------------------------------------------ turn locks

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's turn lock unless someone else holds it (``ttl`` unused: see the module doc)."""
        holder = self._held.get(session_id)
        if holder is not None:
            return holder == owner
        db = await self._db()
        cursor = await db.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_SPACE, session_id))
        row = await cursor.fetchone()
        if row is None or not row[0] or session_id in self._held:
            if row is not None and row[0]:
                # another task of this process won meanwhile; undo our re-entrant hold
                await db.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_SPACE, session_id))
            return False
        self._held[session_id] = owner
        return True

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the turn lock if ``owner`` holds it."""
        if self._held.get(session_id) != owner:
            return
        del self._held[session_id]
        db = await self._db()
        await db.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_SPACE, session_id))


async def _connect(url: str) -> AsyncConnection[Any]:
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(f"the PostgreSQL store needs psycopg: pip install 'reactchat[postgres]' ({exc})") from None
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise ConnectionError(f"cannot connect to PostgreSQL at {_redact(url)}: {exc}".strip()) from None
    await migrate(conn)
    return conn


async def migrate(conn: AsyncConnection[Any]) -> None:
    """Apply the migrations this database has not seen; concurrent starters wait for each other."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS reactchat_migrations (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION)"
        )
        cursor = await conn.execute("SELECT name FROM reactchat_migrations")
        done = {row[0] for row in await cursor.fetchall()}
        for name, statements in MIGRATIONS:
            if name in done:
                continue
            for statement in statements:
                await conn.execute(statement)
            await conn.execute("INSERT INTO reactchat_migrations VALUES (%s, %s)", (name, time.time()))


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
