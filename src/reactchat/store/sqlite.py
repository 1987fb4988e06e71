"""``SqliteStore``: sessions and their events in one SQLite file (the default store).

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's
convention, so ``f"sqlite:///{path}"`` works for both), ``sqlite:///:memory:`` for a
private in-memory database. Several processes may share one file.

Schema (created by the migrations of ``SCHEMA``; other components may add tables to the same file,
prefixed ``kb_`` for the knowledge base, and must leave these alone)::

    reactchat_migrations(name TEXT PRIMARY KEY, applied_at REAL)   -- see store/_migrations.py
    sessions(id TEXT PRIMARY KEY, created_at REAL)
    events(session TEXT → sessions.id ON DELETE CASCADE, seq INTEGER,   -- 1, 2, 3… per session
           turn INTEGER, step INTEGER, type TEXT, at REAL,
           body TEXT,                       -- the event as JSON (``EVENTS.dump_json``)
           PRIMARY KEY (session, seq))
    session_locks(session TEXT PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER, expires REAL)
    reflections(key TEXT, at REAL, text TEXT)   -- Reflexion's memory across sessions (reactchat.reflect)

Events are append-only; the state of a session is derived from them. Durability: WAL
with ``synchronous=NORMAL``, so every committed event survives a killed process (a
power cut may lose the last few). Each ``append`` is one committed transaction, made
before the engine goes on. The calls are synchronous inside the async methods: they
take well under a millisecond, less than handing them to a thread would cost.

Turn locks live in ``session_locks`` with an owner, its host and pid, and an expiry,
taken inside ``BEGIN IMMEDIATE`` so two processes cannot both win. On this host the
holder's pid decides: a lock whose process is gone is taken over at once (a killed
process does not block its session), and a live process keeps its lock however long
its turn runs (a slow local model must not see a second turn start beside it). The
expiry (``ttl``) only frees locks held from another host, whose pid cannot be checked.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path

from reactchat.messages import Event, stored_event, stored_json
from reactchat.store import SessionNotFound
from reactchat.store import _migrations as migrations
from reactchat.store._migrations import Schema, mark_interrupted

BUSY_TIMEOUT_MS = 10_000

#: the store's tables, version by version (see ``reactchat.store._migrations``)
SCHEMA = Schema("events")
SCHEMA.add(
    1,
    "m001_sessions_events_locks",
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at REAL NOT NULL)",
    """CREATE TABLE events (
        session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        step INTEGER NOT NULL,
        type TEXT NOT NULL,
        at REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE session_locks (
        session TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        expires REAL NOT NULL
    )""",
    "CREATE INDEX sessions_created ON sessions(created_at)",
)
SCHEMA.add(
    2,
    "m002_reflections",  # Reflexion's memory across sessions: reflections by task fingerprint (reactchat.reflect)
    "CREATE TABLE reflections (key TEXT NOT NULL, at REAL NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX reflections_key_at ON reflections(key, at)",
)
SCHEMA.add(3, "m003_interrupted_field", mark_interrupted)


class SqliteStore:
    """Sessions and events in a SQLite file. Opened on first use; ``close()`` releases it."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        #: the URL of this database, for components that open their own connection to it
        self.url = f"sqlite:///{self.path}"
        self._db: sqlite3.Connection | None = None
        self._host = socket.gethostname()
        self._pid = os.getpid()

    # ------------------------------------------------------------------ connection

    @property
    def db(self) -> sqlite3.Connection:
        """The connection, opened (and the schema migrated) on first use."""
        if self._db is None:
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise FileNotFoundError(f"cannot open {self.path}: directory {parent} does not exist")
        # isolation_level=None: autocommit, transactions only where we BEGIN them
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            migrate(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise sqlite3.DatabaseError(f"cannot use {self.path} as a reactchat database: {exc}") from exc
        return db

    async def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    # ------------------------------------------------------------------ sessions

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session (a random id unless given) and return its id."""
        session_id = session_id or uuid.uuid4().hex
        self.db.execute("INSERT OR IGNORE INTO sessions (id, created_at) VALUES (?, ?)", (session_id, time.time()))
        return session_id

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        return self.db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, newest first."""
        rows = self.db.execute("SELECT id FROM sessions ORDER BY created_at DESC, id LIMIT ?", (limit,))
        return [row[0] for row in rows]

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session and all its events; False if there was none."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM session_locks WHERE session = ?", (session_id,))
            deleted = db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return deleted > 0

    # ------------------------------------------------------------------ events

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events in order, after the first ``since``. Raises ``SessionNotFound``."""
        rows = self.db.execute(
            "SELECT seq, body FROM events WHERE session = ? AND seq > ? ORDER BY seq", (session_id, since)
        ).fetchall()
        if not rows and not since and not await self.exists(session_id):
            raise SessionNotFound(session_id)
        return [stored_event(seq, body) for seq, body in rows]

    async def append(self, *events: Event) -> None:
        """Commit events in one transaction; they are durable when this returns."""
        db = self.db
        rows = [(e.session, e.turn, e.step, e.type, e.at, stored_json(e).decode()) for e in events]
        try:
            if len(rows) > 1:
                db.execute("BEGIN IMMEDIATE")
            for event, row in zip(events, rows, strict=True):
                # one statement, so the next seq is computed under the write lock
                (seq,) = db.execute(
                    """INSERT INTO events (session, seq, turn, step, type, at, body) VALUES
                       (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE session = ?1), ?2, ?3, ?4, ?5, ?6)
                       RETURNING seq""",
                    row,
                ).fetchone()
                event.__dict__["seq"] = seq
            if db.in_transaction:
                db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError) and "FOREIGN KEY" in str(exc):
                raise SessionNotFound(events[0].session) from None
            raise

    # ------------------------------------------------------------------ reflections

    async def reflections(self, key: str, limit: int, since: float) -> list[str]:
        """The newest ``limit`` reflections under ``key`` made after ``since``, oldest first."""
        rows = self.db.execute(
            "SELECT text FROM reflections WHERE key = ? AND at > ? ORDER BY at DESC, rowid DESC LIMIT ?",
            (key, since, limit),
        ).fetchall()
        return [text for (text,) in reversed(rows)]

    async def add_reflection(self, key: str, text: str, at: float, keep: int, expire_before: float) -> None:
        """Keep a reflection; only the newest ``keep`` under ``key`` stay, none from before ``expire_before``."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("INSERT INTO reflections (key, at, text) VALUES (?, ?, ?)", (key, at, text))
            db.execute("DELETE FROM reflections WHERE at < ?", (expire_before,))
            db.execute(
                """DELETE FROM reflections WHERE key = ?1 AND rowid NOT IN
                   (SELECT rowid FROM reflections WHERE key = ?1 ORDER BY at DESC, rowid DESC LIMIT ?2)""",
                (key, keep),
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ turn locks

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the turn lock unless another owner holds it: a live process on this host, or unexpired."""
        db = self.db
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT owner, host, pid, expires FROM session_locks WHERE session = ?", (session_id,))
            holder = row.fetchone()
            if holder is not None and holder[0] != owner and self._holds(holder[1], holder[2], holder[3], now):
                db.execute("ROLLBACK")
                return False
            db.execute(
                "INSERT OR REPLACE INTO session_locks (session, owner, host, pid, expires) VALUES (?, ?, ?, ?, ?)",
                (session_id, owner, self._host, self._pid, now + ttl),
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return True

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the turn lock if ``owner`` holds it."""
        self.db.execute("DELETE FROM session_locks WHERE session = ? AND owner = ?", (session_id, owner))

    def _holds(self, host: str, pid: int, expires: float, now: float) -> bool:
        """Whether a lock still binds: its process lives (this host) or it has not expired (another host)."""
        return pid_alive(pid) if host == self._host else expires > now


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # the state letter follows the command name, which is in parentheses
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations this database has not seen, under one write lock."""
    db.execute("BEGIN IMMEDIATE")
    try:
        migrations.migrate(migrations.Database(db, "sqlite"), SCHEMA)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def path_from_url(url: str) -> str:
    """The file path of a ``sqlite:///path`` URL."""
    if not url.startswith("sqlite:///"):
        raise ValueError(f"bad SQLite URL {url!r}: use 'sqlite:///relative.db' or 'sqlite:////absolute/path.db'")
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if not path:
        raise ValueError(f"bad SQLite URL {url!r}: no file path")
    return path


def from_url(url: str) -> SqliteStore:
    """``sqlite:///path.db`` → a ``SqliteStore`` (nothing is opened yet)."""
    return SqliteStore(path_from_url(url))
