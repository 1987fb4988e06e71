"""``SqliteStore``: sessions and their events in one SQLite file (the default store).

URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's
convention, so ``f"sqlite:///{path}"`` works for both), ``sqlite:///:memory:`` for a
private in-memory database. Several processes may share one file.

Schema (created by the migrations of ``SCHEMA``; other components may add tables to the same file,
prefixed ``kb_`` for the knowledge base, and must leave these alone)::

    reactchat_migrations(name TEXT PRIMARY KEY, applied_at REAL)   -- see store/_migrations.py
    sessions(id TEXT PRIMARY KEY, created_at REAL,
             active_at REAL,                -- when its last turn ended (or it was created)
             forked_from TEXT, forked_before INTEGER)   -- a fork's origin (``fork``)
    events(session TEXT → sessions.id ON DELETE CASCADE, seq INTEGER,   -- 1, 2, 3… per session
           turn INTEGER, step INTEGER, type TEXT, at REAL,
           body TEXT,                       -- the event as JSON (``EVENTS.dump_json``)
           PRIMARY KEY (session, seq))
    session_locks(session TEXT PRIMARY KEY, owner TEXT, host TEXT, pid INTEGER, expires REAL,
                  cancel REAL)              -- when a cancel of the running turn was asked for
    reflections(key TEXT, at REAL, text TEXT)   -- Reflexion's memory (orchestration.reflexion)
    artifacts(session TEXT → sessions.id ON DELETE CASCADE, name TEXT, content_type TEXT,
              size INTEGER, at REAL, data BLOB, PRIMARY KEY (session, name))   -- store/_artifacts.py

Events are append-only; the state of a session is derived from them. Durability: WAL
with ``synchronous=NORMAL``, so every committed event survives a killed process (a
power cut may lose the last few). Each ``append`` is one committed transaction, made
before the engine goes on. Calls run on the event loop and never wait there for a
lock: one that finds the file locked by another connection (another worker, the
knowledge base) waits on the store's own thread instead (see ``SqliteStore``), and WAL
checkpoints run on that thread too.

Turn locks live in ``session_locks`` with an owner, its host and pid, and an expiry,
taken inside ``BEGIN IMMEDIATE`` so two processes cannot both win. On this host the
holder's pid decides: a lock whose process is gone is taken over at once (a killed
process does not block its session), and a live process keeps its lock however long
its turn runs (a slow local model must not see a second turn start beside it). The
expiry (``ttl``) only frees locks held from another host, whose pid cannot be checked.

A lock row is also the durable mark of a running turn: ``request_cancel`` (any process)
stamps it, and the holder, polling ``cancel_requests`` every ``CANCEL_POLL`` seconds while
it holds locks, stops that turn. Releasing the lock records the session's last activity
(``sessions.active_at``), which ``idle_sessions`` reads for retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from reactchat.errors import DiskFull
from reactchat.messages import Event, stored_event, stored_json
from reactchat.store import SessionNotFound, _facts
from reactchat.store import _migrations as migrations
from reactchat.store._artifacts import MAX_ARTIFACTS, MAX_SESSION_BYTES, PRUNE, Artifact, content_type
from reactchat.store._facts import Fact
from reactchat.store._fork import Rebase, fork_point
from reactchat.store._migrations import Schema, mark_interrupted
from reactchat.store._views import TurnViews, View

BUSY_TIMEOUT_MS = 10_000
#: writes between two WAL checkpoints, run on the store's thread (SQLite's own default is
#: one every 1,000 pages, about 400 commits here, run inline by the commit that crosses it);
#: each makes every write wait a few ms at its end, so not more often: the WAL grows to
#: ~6,500 frames (26 MiB) between two under the HTTP benchmark's load
CHECKPOINT_EVERY = 2000
#: pauses (seconds) between the event loop's attempts on a locked file before the call
#: goes to the store's thread, which waits for the lock
INLINE_RETRIES = (0.0005, 0.001, 0.002)
#: WAL frames (pages, 16 MiB) past which, if the WAL did not start over since the last
#: checkpoint, the next one waits for other processes' readers and writers so that it does
#: (this process's own never keep it from starting over)
WAL_RESTART_FRAMES = 4000
#: passes a checkpoint makes while writes go on, each copying what was written during the
#: one before, until less than ``FINISH_FRAMES`` is left for the pass that writes wait for
COPY_AGAIN = 3
FINISH_FRAMES = 64
#: how long (ms) that step waits for them at most: this process's writes wait behind it
RESTART_WAIT_MS = 100
#: seconds between two looks for cancel requests of the turns this store's process runs
CANCEL_POLL = 0.05

T = TypeVar("T")


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
    "m002_reflections",  # Reflexion's memory across sessions: reflections by task fingerprint (orchestration.reflexion)
    "CREATE TABLE reflections (key TEXT NOT NULL, at REAL NOT NULL, text TEXT NOT NULL)",
    "CREATE INDEX reflections_key_at ON reflections(key, at)",
)
SCHEMA.add(3, "m003_interrupted_field", mark_interrupted)
SCHEMA.add(
    4,
    "m004_cancel_requests",  # POST .../cancel on any worker: the holder of the turn lock sees it
    "ALTER TABLE session_locks ADD COLUMN cancel REAL",
)
SCHEMA.add(
    5,
    "m005_last_activity",  # when the session's last turn ended, for retention (reactchat.cli.retention)
    "ALTER TABLE sessions ADD COLUMN active_at REAL",
    """UPDATE sessions
    SET active_at = coalesce((SELECT max(at) FROM events WHERE session = sessions.id), created_at)""",
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
        at REAL NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (session, name)
    ) WITHOUT ROWID""",
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
    *_facts.tables("BLOB", "REAL"),
)


def _use_wal(db: sqlite3.Connection) -> None:
    """Put the file in WAL mode. Switching a new file needs it to itself: a connection that
    finds another one switching it at the same moment is told "locked" at once (SQLite's busy
    timeout does not apply there), so it tries again until the busy timeout has passed."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


class SqliteStore:
    """Sessions and events in a SQLite file. Opened on first use; ``close()`` releases it.

    Calls run on the event loop on a connection that never waits for a lock (they take
    well under a millisecond, less than handing them to a thread would cost); a call
    that finds the database locked by another connection goes to the store's own
    thread, whose connection waits up to ``BUSY_TIMEOUT_MS``, so that the wait stalls
    only that call, not every session of the process. The same thread checkpoints the
    WAL every ``CHECKPOINT_EVERY`` writes, off the hot path.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        #: the URL of this database, for components that open their own connection to it
        self.url = f"sqlite:///{self.path}"
        self._db: sqlite3.Connection | None = None
        #: the connection of the store's thread, which may wait for locks
        self._waiting: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._writes = 0
        #: ``_writes`` when the last checkpoint began
        self._checkpointed_at = 0
        #: the running checkpoint, on the store's thread (``_checkpoint_wal``)
        self._checkpoint: Future[None] | None = None
        #: set by the store's thread during the checkpoint's last step, which writes wait for
        self._writes_wait = False
        self._last_step_done: Future[None] = Future()
        #: a write runs on the event loop
        self._writing = False
        #: the WAL's header (its salts) at the last checkpoint: it changes when the WAL starts over
        self._wal_header = b""
        self._host = socket.gethostname()
        self._pid = os.getpid()
        #: the sessions whose turn lock this store holds
        self._held: set[str] = set()
        #: per session: what ``turn_events`` returned and the appends since (the same objects
        #: the engine made or was given), with the stored JSON of its last event
        self._views = TurnViews()

    # ------------------------------------------------------------------ connection

    @property
    def db(self) -> sqlite3.Connection:
        """The event loop's connection, opened (and the schema migrated) on first use."""
        if self._db is None:
            db = self._open()
            if self.path != ":memory:":
                # fail at once on a lock (the call then waits on the store's thread), and
                # leave checkpoints to that thread
                db.execute("PRAGMA busy_timeout = 0")
                db.execute("PRAGMA wal_autocheckpoint = 0")
            self._db = db
        return self._db

    def _open(self, migrated: bool = False) -> sqlite3.Connection:
        """A connection to the file, its schema migrated first unless this store did that already
        (``migrated``: migrating takes the write lock, which a stream of writes may keep busy)."""
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise FileNotFoundError(f"cannot open {self.path}: directory {parent} does not exist")
        # isolation_level=None: autocommit, transactions only where we BEGIN them
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _use_wal(db)
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            if not migrated:
                migrate(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise sqlite3.DatabaseError(f"cannot use {self.path} as a reactchat database: {exc}") from exc
        return db

    async def _call(self, work: Callable[[sqlite3.Connection], T], write: bool = False) -> T:
        """``work(connection)`` on the event loop, or on the store's thread if it must wait for a lock."""
        db = self._db
        if db is None:
            if self.path != ":memory:":
                # opening migrates the schema under a write lock, which may have to wait
                await asyncio.wrap_future(self._pool().submit(lambda: self.db))
            db = self.db
        # set before the look at _writes_wait, which the store's thread sets before it looks at
        # this: a write either waits for the checkpoint's last step or that step waits for it
        self._writing = write
        while self._writing and self._writes_wait:
            self._writing = False
            # shielded: a write that is cancelled must not cancel what the others wait for
            await asyncio.shield(asyncio.wrap_future(self._last_step_done))
            self._writing = True
        try:
            try:
                result = work(db)
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or self.path == ":memory:":
                    raise
                self._writing = False
                result = await self._when_unlocked(work)
        except sqlite3.OperationalError as exc:
            if _full(exc):  # the transaction was rolled back: say so, and which disk to free
                raise DiskFull(self.path, _disk(self.path)) from exc
            raise
        finally:
            self._writing = False
        if write:
            self._writes += 1
            if self._writes - self._checkpointed_at >= CHECKPOINT_EVERY and (
                self._checkpoint is None or self._checkpoint.done()
            ):
                self._checkpointed_at = self._writes
                self._checkpoint = self._pool().submit(self._checkpoint_wal)
        return result

    async def _when_unlocked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` once the file's lock is free: most locks are short (another process's
        write, the knowledge base), so try again shortly without blocking the loop,
        then wait for it on the store's thread."""
        for pause in INLINE_RETRIES:
            await asyncio.sleep(pause)
            try:
                return work(self.db)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
        return await asyncio.wrap_future(self._pool().submit(lambda: work(self._waiting_db())))

    def _pool(self) -> ThreadPoolExecutor:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reactchat-sqlite")
        return self._thread

    def _waiting_db(self) -> sqlite3.Connection:
        """The connection of the store's thread (waits up to the busy timeout)."""
        if self._waiting is None:
            # the loop's connection migrated the schema when it opened
            self._waiting = self._open(migrated=self._db is not None)
        return self._waiting

    def _checkpoint_wal(self) -> None:
        """Copy the WAL into the database file, on the store's thread, so that it starts over.

        SQLite makes the WAL start over only when a write begins after a checkpoint copied
        every frame (and no other connection still reads the old ones). Under a steady
        stream of writes a passive checkpoint, which waits for nobody, never gets there: the
        event loop's writes add frames while it copies. So it copies while writes go on,
        then again what was written meanwhile, up to ``COPY_AGAIN`` times, until under
        ``FINISH_FRAMES`` were; then this process's writes wait (on the loop, without
        blocking it) while it copies the few frames left (~1-10 ms, two fsyncs) and the
        first write after it starts the WAL over.
        """
        header, self._wal_header = self._wal_header, _wal_header(self.path)
        with contextlib.suppress(sqlite3.Error):  # the next checkpoint will catch up
            db = self._waiting_db()
            _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            copied = frames
            for _ in range(COPY_AGAIN):
                _, length, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                written, copied = length - copied, length
                if written < FINISH_FRAMES:
                    break
            done: Future[None] = Future()
            self._last_step_done, self._writes_wait = done, True
            while self._writing:  # a write that began before: let it end (it takes microseconds)
                time.sleep(0.0001)
            try:
                self._copy_the_rest(db, stuck=frames > WAL_RESTART_FRAMES and header == self._wal_header)
            finally:
                self._writes_wait = False
                done.set_result(None)

    def _copy_the_rest(self, db: sqlite3.Connection, stuck: bool) -> None:
        """The checkpoint's last step, while this process's writes wait. A ``stuck`` WAL did
        not start over after the last checkpoint (another process kept it: a reader on an old
        snapshot, writes): then wait for those to end, ``RESTART_WAIT_MS`` at most, and start
        it over."""
        if stuck:
            db.execute(f"PRAGMA busy_timeout = {RESTART_WAIT_MS}")
            try:
                db.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return
        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    async def close(self) -> None:
        """Close the connections (they reopen on next use)."""
        thread, self._thread = self._thread, None
        self._checkpoint = None
        if thread is not None:
            # a call waiting for a lock finishes first; the connections close after it
            await asyncio.wrap_future(thread.submit(self._close_waiting))
            thread.shutdown(wait=False)
        if self._db is not None:
            self._db.close()
            self._db = None

    def _close_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.close()
            self._waiting = None

    # ------------------------------------------------------------------ sessions

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session (a random id unless given) and return its id."""
        session_id = session_id or uuid.uuid4().hex
        row = (session_id, time.time())
        await self._call(
            lambda db: db.execute(
                "INSERT OR IGNORE INTO sessions (id, created_at, active_at) VALUES (?1, ?2, ?2)", row
            ),
            write=True,
        )
        return session_id

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        return await self._call(lambda db: _exists(db, session_id))

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, newest first."""

        def newest(db: sqlite3.Connection) -> list[str]:
            rows = db.execute("SELECT id FROM sessions ORDER BY created_at DESC, id LIMIT ?", (limit,))
            return [row[0] for row in rows]

        return await self._call(newest)

    async def idle_sessions(self, before: float, limit: int = 1000) -> list[str]:
        """Sessions last active before ``before`` (a Unix time), longest idle first."""

        def idle(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT id FROM sessions WHERE active_at < ? ORDER BY active_at, id LIMIT ?", (before, limit)
            )
            return [row[0] for row in rows]

        return await self._call(idle)

    async def delete_session(self, session_id: str, idle_before: float | None = None) -> bool:
        """Delete a session and all its events; False if there was none. With ``idle_before``,
        only if it was last active before that time and no turn of it is running."""

        def delete(db: sqlite3.Connection) -> bool:
            with _immediate(db):
                if idle_before is not None and self._running(db, session_id):
                    return False
                deleted = db.execute(
                    "DELETE FROM sessions WHERE id = ?1 AND (?2 IS NULL OR coalesce(active_at, created_at) < ?2)",
                    (session_id, idle_before),
                )
                if deleted.rowcount:
                    db.execute("DELETE FROM session_locks WHERE session = ?", (session_id,))
                return deleted.rowcount > 0

        self._views.take(session_id)
        return await self._call(delete, write=True)

    async def fork(self, session_id: str, before: int | None, new_id: str | None = None) -> str:
        """A new session holding copies of the events before ``before`` (all when None), same
        seqs, with its origin, in one transaction (see ``Store.fork``)."""
        new_id = new_id or uuid.uuid4().hex
        rebase = Rebase(session_id, new_id)

        def copy(db: sqlite3.Connection) -> None:
            with _immediate(db):
                if not _exists(db, session_id):
                    raise SessionNotFound(session_id)
                (last,) = db.execute(_LAST_SEQ, (session_id,)).fetchone()
                stop = fork_point(session_id, before, last)
                now = time.time()
                db.execute(_FORK_SESSION, (new_id, now, session_id, stop))
                rows = db.execute(_FORK_EVENTS, (session_id, stop)).fetchall()
                db.executemany(
                    "INSERT INTO events (session, seq, turn, step, type, at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (new_id, seq, turn, step, kind, at, rebase(seq, body))
                        for seq, turn, step, kind, at, body in rows
                    ],
                )

        await self._call(copy, write=True)
        return new_id

    async def origin(self, session_id: str) -> tuple[str, int] | None:
        """The original and the fork point of a forked session; None for any other."""

        def read(db: sqlite3.Connection) -> tuple[str, int] | None:
            row = db.execute("SELECT forked_from, forked_before FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return (row[0], row[1]) if row is not None and row[0] is not None else None

        return await self._call(read)

    # ------------------------------------------------------------------ events

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events in order, after the first ``since``. Raises ``SessionNotFound``."""

        def read(db: sqlite3.Connection) -> list[tuple[int, str]]:
            rows: list[tuple[int, str]] = db.execute(_SINCE, (session_id, since)).fetchall()
            if not rows and not since and not _exists(db, session_id):
                raise SessionNotFound(session_id)
            return rows

        return [stored_event(seq, body) for seq, body in await self._call(read)]

    async def turn_events(self, session_id: str) -> list[Event]:
        """What a new turn of the session reads before it starts: every event of its last
        turn (and the session's last event), and of the earlier turns only their first event,
        user messages and answers (their questions and answers, for the history). Each event
        is parsed from its JSON: not reading a long session's earlier steps saves most of
        that. A session this store read or wrote lately is not parsed again: its view is kept
        (``VIEW_EVENTS``) and used if the session's last stored event is still the view's
        own (nobody else appended since). Raises ``SessionNotFound``."""
        view = self._views.take(session_id)
        if view is not None:

            def last(db: sqlite3.Connection) -> tuple[int, str] | None:
                row: tuple[int, str] | None = db.execute(_LAST, (session_id,)).fetchone()
                return row

            if await self._call(last) == (view.events[-1].seq, view.body):
                return self._views.renew(session_id, view)

        def read(db: sqlite3.Connection) -> list[tuple[int, str]]:
            rows: list[tuple[int, str]] = db.execute(_TURN_EVENTS, (session_id,)).fetchall()
            if not rows and not _exists(db, session_id):
                raise SessionNotFound(session_id)
            return rows

        rows = await self._call(read)
        events = [stored_event(seq, body) for seq, body in rows]
        if events:
            self._views.keep(session_id, View(events, rows[-1][1]))
        return list(events)

    async def append(self, *events: Event) -> None:
        """Commit events in one transaction; they are durable when this returns."""
        await self._append(events, None)

    async def append_unlock(self, owner: str, *events: Event) -> None:
        """``append``, and in the same transaction ``unlock`` of their session for ``owner``
        (one commit, not two, for a turn's last event)."""
        await self._append(events, owner)
        self._held.discard(events[0].session)

    async def _append(self, events: tuple[Event, ...], release: str | None) -> None:
        rows = [(e.session, e.turn, e.step, e.type, e.at, stored_json(e)) for e in events]

        def insert(db: sqlite3.Connection) -> None:
            # one statement per event, so the next seq is computed under the write lock;
            # several events (or a release) in one transaction (not a context manager: this is per step)
            many = len(rows) > 1 or release is not None
            if many:
                db.execute("BEGIN IMMEDIATE")
            try:
                _insert(db, events, rows)
                if release is not None:
                    _release(db, events[0].session, release)
                if many:
                    db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        await self._call(insert, write=True)
        if rows:
            self._views.extend(events, rows[-1][5])

    # ------------------------------------------------------------------ reflections

    async def reflections(self, key: str, limit: int, since: float) -> list[str]:
        """The newest ``limit`` reflections under ``key`` made after ``since``, oldest first."""

        def newest(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT text FROM reflections WHERE key = ? AND at > ? ORDER BY at DESC, rowid DESC LIMIT ?",
                (key, since, limit),
            ).fetchall()
            return [text for (text,) in reversed(rows)]

        return await self._call(newest)

    async def add_reflection(self, key: str, text: str, at: float, keep: int, expire_before: float) -> None:
        """Keep a reflection; only the newest ``keep`` under ``key`` stay, none from before ``expire_before``."""

        def add(db: sqlite3.Connection) -> None:
            with _immediate(db):
                db.execute("INSERT INTO reflections (key, at, text) VALUES (?, ?, ?)", (key, at, text))
                db.execute("DELETE FROM reflections WHERE at < ?", (expire_before,))
                db.execute(
                    """DELETE FROM reflections WHERE key = ?1 AND rowid NOT IN
                       (SELECT rowid FROM reflections WHERE key = ?1 ORDER BY at DESC, rowid DESC LIMIT ?2)""",
                    (key, keep),
                )

        await self._call(add, write=True)

    # ------------------------------------------------------------------ facts, token counts

    async def add_fact(self, fact: Fact) -> None:
        """Keep ``fact`` (and drop the scope's expired ones)."""

        def add(db: sqlite3.Connection) -> None:
            with _immediate(db):
                db.execute(_facts.EXPIRE, (fact.scope, fact.at))
                db.execute(_facts.ADD, _facts.values(fact))

        await self._call(add, write=True)

    async def facts(self, scope: str, now: float, limit: int = 1000) -> list[Fact]:
        """The scope's facts that have not expired at ``now``, newest first."""
        rows = await self._call(lambda db: db.execute(_facts.LIST, (scope, now, limit)).fetchall())
        return [_facts.from_row(row) for row in rows]

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete a fact of ``scope``; whether there was one."""
        return bool(await self._call(lambda db: db.execute(_facts.FORGET, (scope, fact_id)).rowcount, write=True))

    async def token_calibration(self, model: str) -> tuple[int, int] | None:
        """The ``(characters, tokens)`` recorded for ``model``, or None."""
        row = await self._call(lambda db: db.execute(_facts.CALIBRATION, (model,)).fetchone())
        return (int(row[0]), int(row[1])) if row else None

    async def add_token_calibration(self, model: str, chars: int, tokens: int) -> None:
        """Add to ``model``'s totals of characters sent and input tokens reported."""
        await self._call(lambda db: db.execute(_facts.CALIBRATE, (model, chars, tokens)), write=True)

    # ------------------------------------------------------------------ artifacts

    async def put_artifact(self, session_id: str, name: str, data: bytes, at: float) -> Artifact:
        """Keep an artifact (replacing one of that name); the oldest beyond the bounds go."""
        kept = Artifact(name, content_type(name, data), len(data), at)

        def put(db: sqlite3.Connection) -> None:
            with _immediate(db):
                if not _exists(db, session_id):
                    raise SessionNotFound(session_id)
                db.execute(
                    "INSERT OR REPLACE INTO artifacts (session, name, content_type, size, at, data) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (session_id, name, kept.content_type, kept.size, at, data),
                )
                db.execute(PRUNE, (session_id, session_id, MAX_ARTIFACTS, MAX_SESSION_BYTES))

        await self._call(put, write=True)
        return kept

    async def artifact(self, session_id: str, name: str) -> Artifact | None:
        """The artifact with its bytes, or None."""

        def read(db: sqlite3.Connection) -> Artifact | None:
            row = db.execute(
                "SELECT name, content_type, size, at, data FROM artifacts WHERE session = ? AND name = ?",
                (session_id, name),
            ).fetchone()
            return Artifact(*row) if row else None

        return await self._call(read)

    async def artifacts(self, session_id: str) -> list[Artifact]:
        """The session's artifacts without their bytes, oldest first."""

        def read(db: sqlite3.Connection) -> list[Artifact]:
            rows = db.execute(
                "SELECT name, content_type, size, at FROM artifacts WHERE session = ? ORDER BY at, name",
                (session_id,),
            ).fetchall()
            return [Artifact(*row) for row in rows]

        return await self._call(read)

    # ------------------------------------------------------------------ turn locks

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the turn lock unless another owner holds it: a live process on this host, or unexpired."""

        def take(db: sqlite3.Connection) -> bool:
            with _immediate(db):
                return self._take(db, session_id, owner, ttl)

        won = await self._call(take, write=True)
        if won:
            self._held.add(session_id)
        return won

    async def try_lock_read(
        self, session_id: str, owner: str, ttl: float, since: int | None, then: tuple[Event, ...] = ()
    ) -> list[Event] | None:
        """``try_lock``, then the session's events after the first ``since`` (none when None), read
        in the lock's own transaction; None, with nothing read, when someone else holds the lock.
        ``SessionNotFound`` (``since`` 0 only, as ``events``) leaves the lock untaken. If the read
        finds nothing (the session is as the caller last saw it), ``then`` is appended in the same
        transaction: a turn's lock and its first event in one commit."""
        events = then
        rows = [(e.session, e.turn, e.step, e.type, e.at, stored_json(e)) for e in events]

        def take_read(db: sqlite3.Connection) -> list[tuple[int, str]] | None:
            with _immediate(db):
                if not self._take(db, session_id, owner, ttl):
                    return None
                if since is None:
                    read: list[tuple[int, str]] = []
                else:
                    read = db.execute(_SINCE, (session_id, since)).fetchall()
                    if not read and not since and not _exists(db, session_id):
                        raise SessionNotFound(session_id)  # rolled back: no lock taken
                if not read and rows:
                    _insert(db, events, rows)
                return read

        read = await self._call(take_read, write=True)
        if read is None:
            return None
        self._held.add(session_id)
        if not read and rows:
            self._views.extend(events, rows[-1][5])
        return [stored_event(seq, body) for seq, body in read]

    def _take(self, db: sqlite3.Connection, session_id: str, owner: str, ttl: float) -> bool:
        """The lock's row for ``owner`` unless another owner holds it, in the caller's write transaction."""
        now = time.time()
        holder = db.execute(_HOLDER, (session_id,)).fetchone()
        if holder is not None and holder[0] != owner and self._holds(holder[1], holder[2], holder[3], now):
            return False
        db.execute(_LOCK, (session_id, owner, self._host, self._pid, now + ttl))
        db.execute(_ACTIVE, (now, session_id))
        return True

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the turn lock if ``owner`` holds it; the session was active until now."""

        def release(db: sqlite3.Connection) -> None:
            with _immediate(db):
                _release(db, session_id, owner)

        await self._call(release, True)
        self._held.discard(session_id)

    async def request_cancel(self, session_id: str) -> bool:
        """Ask whichever process runs the session's turn to cancel it; False if none runs it."""

        def ask(db: sqlite3.Connection) -> bool:
            now = time.time()
            with _immediate(db):
                holder = db.execute("SELECT host, pid, expires FROM session_locks WHERE session = ?", (session_id,))
                row = holder.fetchone()
                if row is None or not self._holds(row[0], row[1], row[2], now):
                    return False
                db.execute("UPDATE session_locks SET cancel = ? WHERE session = ?", (now, session_id))
                return True

        return await self._call(ask, write=True)

    async def cancel_requests(self) -> list[str]:
        """After ``CANCEL_POLL`` seconds, the sessions whose turn lock this store holds and whose
        turn someone asked to cancel (``request_cancel``)."""
        await asyncio.sleep(CANCEL_POLL)
        if not self._held:
            return []

        def asked(db: sqlite3.Connection) -> list[str]:
            rows = db.execute(
                "SELECT session FROM session_locks WHERE cancel IS NOT NULL AND host = ? AND pid = ?",
                (self._host, self._pid),
            )
            return [row[0] for row in rows]

        return [session for session in await self._call(asked) if session in self._held]

    async def abandoned(self) -> list[str]:
        """Sessions whose turn lock is held by a process of this host that no longer runs.

        A worker that dies mid-turn leaves its turn interrupted and its lock row behind.
        Each such row is removed here by exactly one caller, which gets its session: of
        several workers looking at once, one takes the turn over.
        """

        def claim(db: sqlite3.Connection) -> list[str]:
            # this process's own locks (its running turns) need no look at /proc
            rows = db.execute(
                "SELECT session, owner, pid FROM session_locks WHERE host = ? AND pid != ?", (self._host, self._pid)
            )
            dead = [(session, owner, pid) for session, owner, pid in rows.fetchall() if not pid_alive(pid)]
            claimed = []
            for session, owner, pid in dead:
                gone = db.execute(
                    "DELETE FROM session_locks WHERE session = ? AND owner = ? AND pid = ?", (session, owner, pid)
                )
                if gone.rowcount:
                    claimed.append(session)
            return claimed

        return await self._call(claim, write=True)

    def _running(self, db: sqlite3.Connection, session_id: str) -> bool:
        """Whether a turn of the session runs: a process holds its turn lock."""
        row = db.execute("SELECT host, pid, expires FROM session_locks WHERE session = ?", (session_id,)).fetchone()
        return row is not None and self._holds(row[0], row[1], row[2], time.time())

    def _holds(self, host: str, pid: int, expires: float, now: float) -> bool:
        """Whether a lock still binds: its process lives (this host) or it has not expired (another host)."""
        if host != self._host:
            return expires > now
        return pid == self._pid or pid_alive(pid)


#: ``turn_events``: the last turn whole; of the others, what their question and answer need. The
#: last turn is the last event's (one seek: a turn's events come after the earlier turns'), which
#: includes the last event
_TURN_EVENTS = """SELECT seq, body FROM events WHERE session = ?1 AND (
    type IN ('user', 'answer', 'compaction')
    OR turn >= (SELECT turn FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1)
    OR seq IN (SELECT min(seq) FROM events WHERE session = ?1 GROUP BY turn)
) ORDER BY seq"""
#: a fork's session row (an id already taken is an ``IntegrityError``: a fork never merges)
_FORK_SESSION = """INSERT INTO sessions (id, created_at, active_at, forked_from, forked_before)
VALUES (?1, ?2, ?2, ?3, ?4)"""
_LAST_SEQ = "SELECT coalesce(max(seq), 0) FROM events WHERE session = ?"
_FORK_EVENTS = "SELECT seq, turn, step, type, at, body FROM events WHERE session = ? AND seq < ? ORDER BY seq"
_LAST = "SELECT seq, body FROM events WHERE session = ? ORDER BY seq DESC LIMIT 1"
_SINCE = "SELECT seq, body FROM events WHERE session = ? AND seq > ? ORDER BY seq"
_HOLDER = "SELECT owner, host, pid, expires FROM session_locks WHERE session = ?"
_LOCK = "INSERT OR REPLACE INTO session_locks (session, owner, host, pid, expires) VALUES (?, ?, ?, ?, ?)"
_ACTIVE = "UPDATE sessions SET active_at = ? WHERE id = ?"
_APPEND = """INSERT INTO events (session, seq, turn, step, type, at, body) VALUES
(?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE session = ?1), ?2, ?3, ?4, ?5, ?6) RETURNING seq"""


def _wal_header(path: str) -> bytes:
    """The WAL file's checkpoint sequence number and salts, which change when it starts over."""
    try:
        with open(f"{path}-wal", "rb") as wal:
            return wal.read(24)[12:]
    except OSError:
        return b""


#: an event's row in ``events``: session, turn, step, type, at, body
_Row = tuple[str, int, int, str, float, str]


def _insert(db: sqlite3.Connection, events: tuple[Event, ...], rows: Sequence[_Row]) -> None:
    """The events' rows, each given the session's next seq (one statement per event, so that
    it is computed under the write lock)."""
    try:
        for event, row in zip(events, rows, strict=True):
            (event.seq,) = db.execute(_APPEND, row).fetchone()
    except sqlite3.IntegrityError as exc:
        if "FOREIGN KEY" in str(exc):
            raise SessionNotFound(events[0].session) from None
        raise


def _release(db: sqlite3.Connection, session_id: str, owner: str) -> None:
    """The turn lock's row gone if ``owner`` holds it, the session active until now, in the caller's transaction."""
    if db.execute("DELETE FROM session_locks WHERE session = ? AND owner = ?", (session_id, owner)).rowcount:
        db.execute(_ACTIVE, (time.time(), session_id))


def _exists(db: sqlite3.Connection, session_id: str) -> bool:
    return db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None


@contextlib.contextmanager
def _immediate(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: committed if the block ends normally, rolled back otherwise."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _full(exc: sqlite3.OperationalError) -> bool:
    """Whether the error is SQLITE_FULL: the disk (or the file system's quota) has no room."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF == sqlite3.SQLITE_FULL if code is not None else "disk is full" in str(exc)


@contextlib.contextmanager
def full_disk_said(path: str) -> Iterator[None]:
    """SQLITE_FULL inside raised as ``DiskFull`` (naming ``path`` and its disk); for the other
    SQLite files reactchat writes (the knowledge base's)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if _full(exc):
            raise DiskFull(path, _disk(path)) from exc
        raise


def _disk(path: str) -> str:
    """The mount point of the file system that holds ``path``."""
    place = Path(path).resolve().parent
    while not os.path.ismount(place) and place != place.parent:
        place = place.parent
    return str(place)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether the error is SQLITE_BUSY: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF == sqlite3.SQLITE_BUSY if code is not None else "locked" in str(exc)


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
