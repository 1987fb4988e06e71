"""Where the knowledge base lives: tables prefixed ``kb_`` in the session store's database.

Two backends with one shape: SQLite (FTS5 with BM25; also ``memory:`` as an in-memory
database) and PostgreSQL (``_postgres.py``: full-text search with ``ts_rank``). Both are
synchronous and guarded by a lock; ``KnowledgeBase`` runs them in a worker thread so a
large upload never blocks the event loop. Each write is one transaction: a file is
stored whole, with its chunks and index entries, or not at all.
"""

from __future__ import annotations

import os
import re
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from reactchat.knowledge._chunk import Chunk
from reactchat.store._migrations import Database, Schema, migrate
from reactchat.store.sqlite import full_disk_said, pid_alive


@dataclass
class FileRow:
    """A stored file, as the index keeps it."""

    id: str
    session: str
    name: str
    kind: str
    size: int
    pages: int | None
    chunks: int
    retention: int
    rounds: int
    created: float
    #: where a fetched page came from (its URL); None for an upload
    source: str | None = None


@dataclass
class ChunkRow:
    """A stored chunk with the name of its file."""

    id: int
    file_id: str
    name: str
    text: str
    page: int | None
    heading: str
    span: str


class Index(Protocol):
    """The storage operations of a knowledge base (synchronous, thread-safe)."""

    def add(
        self,
        file: FileRow,
        data: bytes,
        chunks: Sequence[Chunk],
        vectors: Sequence[bytes] | None,
        max_files: int | None = None,
    ) -> bool: ...
    def files(self, session: str) -> list[FileRow]: ...
    def data(self, session: str, file_id: str) -> bytes | None: ...
    def delete(self, session: str, file_ids: Sequence[str] | None = None) -> list[FileRow]: ...
    def end_round(self, session: str) -> list[FileRow]: ...
    def keyword(self, session: str, terms: Sequence[str], k: int) -> list[tuple[int, float]]: ...
    def vectors(self, session: str) -> list[tuple[int, bytes]]: ...
    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]: ...
    def close(self) -> None: ...


# Question words match nearly every chunk: with OR queries they only add noise to the
# ranking (and to rank fusion), so they are dropped unless nothing else is left.
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be by can did do does for from has have how i in is it its me my "
        "of on or that the their there this to was what when where which who why will with you your",
    )
)


def terms(query: str, limit: int = 32) -> list[str]:
    """The distinct words of a query, safe to put in any full-text query syntax."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[^\W_]+", query.lower()):
        seen.setdefault(word, None)
    words = [w for w in seen if w not in _STOPWORDS] or list(seen)
    return words[:limit]


def open_index(url: str) -> Index:
    """The index for a store URL: ``memory:``, ``sqlite:///path.db`` or ``postgresql://...``."""
    scheme = url.split(":", 1)[0]
    if scheme == "memory":
        return SQLiteIndex(":memory:")
    if scheme == "sqlite":
        # SQLAlchemy's form, as the SQLite store reads it: sqlite:///rel.db, sqlite:////abs.db
        path = url.removeprefix("sqlite:").removeprefix("//").split("?", 1)[0]
        path = path[1:] if path.startswith("/") else path
        return SQLiteIndex(path or ":memory:")
    if scheme in ("postgresql", "postgres"):
        # optional: psycopg, the [postgres] extra, which _postgres imports at its top
        from reactchat.knowledge._postgres import PostgresIndex

        return PostgresIndex(url)
    raise ValueError(f"no knowledge base for store URL {url!r}: use memory:, sqlite:///path.db or postgresql://...")


#: the knowledge base's tables in SQLite, version by version (``IF NOT EXISTS``: databases
#: made before the tables were versioned have them without a record)
SQLITE_SCHEMA = Schema("kb")
SQLITE_SCHEMA.add(
    1,
    "kb001_files_chunks",
    """CREATE TABLE IF NOT EXISTS kb_files (
    id TEXT PRIMARY KEY, session TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
    size INTEGER NOT NULL, pages INTEGER, chunks INTEGER NOT NULL, retention INTEGER NOT NULL,
    rounds INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, data BLOB NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS kb_files_session ON kb_files(session)",
    """CREATE TABLE IF NOT EXISTS kb_chunks (
    id INTEGER PRIMARY KEY, file_id TEXT NOT NULL, session TEXT NOT NULL, ord INTEGER NOT NULL,
    text TEXT NOT NULL, page INTEGER, heading TEXT NOT NULL, span TEXT NOT NULL, vector BLOB)""",
    "CREATE INDEX IF NOT EXISTS kb_chunks_file ON kb_chunks(file_id)",
    "CREATE INDEX IF NOT EXISTS kb_chunks_session ON kb_chunks(session)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS kb_fts USING fts5(
    text, heading, tokenize = 'porter unicode61 remove_diacritics 2')""",
)
SQLITE_SCHEMA.add(
    2,
    "kb002_uploads",  # the uploads being written, so the chunks of one whose process died can go
    """CREATE TABLE IF NOT EXISTS kb_uploads (
    file_id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, started REAL NOT NULL)""",
    # chunks that no file owns, left by a process killed mid-upload before this table existed
    "DELETE FROM kb_fts WHERE rowid IN (SELECT id FROM kb_chunks WHERE file_id NOT IN (SELECT id FROM kb_files))",
    "DELETE FROM kb_chunks WHERE file_id NOT IN (SELECT id FROM kb_files)",
)
SQLITE_SCHEMA.add(3, "kb003_source", "ALTER TABLE kb_files ADD COLUMN source TEXT")  # a fetched page's URL

#: chunks written per transaction (each holds SQLite's write lock for about 10 ms), and the pause
#: after each, in seconds
_BATCH = 128
_PAUSE = 0.02
#: this machine: an upload's pid is checked only on the host that wrote it
_HOST = socket.gethostname()


class _Full(Exception):
    """The session has as many files as it may."""


_FILE_COLUMNS = "id, session, name, kind, size, pages, chunks, retention, rounds, created, source"
_FILES = f"SELECT {_FILE_COLUMNS} FROM kb_files WHERE session = ? ORDER BY created, id"


class SQLiteIndex:
    """SQLite with FTS5: BM25 ranking, the chunk id as the FTS rowid."""

    def __init__(self, path: str) -> None:
        self.path = path
        # autocommit mode: transactions are explicit (BEGIN IMMEDIATE) so writers queue
        # on the database lock instead of failing to upgrade a read lock
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self.lock = threading.Lock()
        #: a connection that never waits for a lock, for ``files_now`` (a file's index only)
        self._quick: sqlite3.Connection | None = None
        self._quick_lock = threading.Lock()
        if path != ":memory:":
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=30000")
        with self.write() as db:
            migrate(Database(db, "sqlite"), SQLITE_SCHEMA)
            _sweep(db)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction."""
        with self.lock, full_disk_said(self.path):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                if self.db.in_transaction:  # SQLite may have rolled back already (a full disk does)
                    self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def add(
        self,
        file: FileRow,
        data: bytes,
        chunks: Sequence[Chunk],
        vectors: Sequence[bytes] | None,
        max_files: int | None = None,
    ) -> bool:
        """Store a file, its chunks and their index entries, replacing the session's files
        from the same ``source``; False (nothing stored) if the session already has
        ``max_files`` files.

        SQLite has one writer at a time and the sessions share this database, so a large
        file is written in batches of chunks, each its own short transaction, and the
        file's row comes last, in a transaction that also counts the session's files:
        until then its chunks belong to no file and no query sees them (queries join
        ``kb_files``); if anything fails they are deleted. The upload is recorded first
        (``kb_uploads``, with this process's pid): if the process is killed before the
        end, the next upload (from any process on this host) or the next opening of the
        database deletes its chunks.
        """
        with self.write() as db:
            _sweep(db)
            db.execute(
                "INSERT INTO kb_uploads (file_id, host, pid, started) VALUES (?, ?, ?, ?)",
                (file.id, _HOST, os.getpid(), time.time()),
            )
        try:
            for start in range(0, len(chunks), _BATCH):
                if start:
                    # a pause between batches: a writer waiting on the lock (a session's turn,
                    # whose busy handler polls) gets its turn instead of waiting for the whole file
                    time.sleep(_PAUSE)
                with self.write() as db:
                    self._add_chunks(db, file, chunks, vectors, start)
            with self.write() as db:
                if file.source is not None:  # the same page fetched again: it replaces its copy
                    self._delete(db, file.session, self._from_source(db, file))
                if max_files is not None:
                    count = db.execute("SELECT count(*) FROM kb_files WHERE session = ?", (file.session,)).fetchone()
                    if count[0] >= max_files:
                        raise _Full
                db.execute(
                    f"INSERT INTO kb_files ({_FILE_COLUMNS}, data) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (*_file_values(file), data),
                )
                db.execute("DELETE FROM kb_uploads WHERE file_id = ?", (file.id,))
        except BaseException as exc:
            with self.write() as db:
                _drop_upload(db, file.id)
            if isinstance(exc, _Full):
                return False
            raise
        return True

    @staticmethod
    def _add_chunks(
        db: sqlite3.Connection, file: FileRow, chunks: Sequence[Chunk], vectors: Sequence[bytes] | None, start: int
    ) -> None:
        # ids given here so that both tables are filled by executemany, a loop in C
        batch = chunks[start : start + _BATCH]
        (last,) = db.execute("SELECT coalesce(max(id), 0) FROM kb_chunks").fetchone()
        ids = range(last + 1, last + 1 + len(batch))
        db.executemany(
            "INSERT INTO kb_chunks (id, file_id, session, ord, text, page, heading, span, vector) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            (
                (cid, file.id, file.session, n, c.text, c.page, c.heading, c.span, vectors[n] if vectors else None)
                for n, cid, c in zip(range(start, start + len(batch)), ids, batch, strict=True)
            ),
        )
        db.executemany(
            "INSERT INTO kb_fts (rowid, text, heading) VALUES (?,?,?)",
            ((cid, c.text, c.heading) for cid, c in zip(ids, batch, strict=True)),
        )

    def files(self, session: str) -> list[FileRow]:
        """The session's files, oldest first."""
        with self.lock:
            rows = self.db.execute(_FILES, (session,)).fetchall()
        return [FileRow(*row) for row in rows]

    def files_now(self, session: str) -> list[FileRow] | None:
        """``files`` if it cannot wait (a query of a few microseconds, cheaper than handing it to
        a thread); None otherwise. An in-memory index answers when no other thread is using it;
        a file's on a connection of its own that never waits for a lock (busy timeout 0): a read
        of a WAL file needs none, but a file may be locked by another process (a recovery, a
        rollback journal), and this call must not stall the event loop that makes it."""
        if self.path == ":memory:":
            if not self.lock.acquire(blocking=False):
                return None
            try:
                rows = self.db.execute(_FILES, (session,)).fetchall()
            finally:
                self.lock.release()
            return [FileRow(*row) for row in rows]
        if not self._quick_lock.acquire(blocking=False):
            return None
        try:
            if self._quick is None:
                self._quick = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=0)
                self._quick.execute("PRAGMA busy_timeout=0")
            rows = self._quick.execute(_FILES, (session,)).fetchall()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return None  # the caller reads on a thread, which waits for the lock
        finally:
            self._quick_lock.release()
        return [FileRow(*row) for row in rows]

    def data(self, session: str, file_id: str) -> bytes | None:
        """A stored file's bytes."""
        with self.lock:
            row = self.db.execute(
                "SELECT data FROM kb_files WHERE session = ? AND id = ?", (session, file_id)
            ).fetchone()
        return None if row is None else bytes(row[0])

    def delete(self, session: str, file_ids: Sequence[str] | None = None) -> list[FileRow]:
        """Delete some (or all) of the session's files with their chunks."""
        with self.write() as db:
            return self._delete(db, session, file_ids)

    @staticmethod
    def _from_source(db: sqlite3.Connection, file: FileRow) -> list[str]:
        rows = db.execute("SELECT id FROM kb_files WHERE session = ? AND source = ?", (file.session, file.source))
        return [row[0] for row in rows]

    def _delete(self, db: sqlite3.Connection, session: str, file_ids: Sequence[str] | None) -> list[FileRow]:
        rows = [
            FileRow(*r)
            for r in db.execute(f"SELECT {_FILE_COLUMNS} FROM kb_files WHERE session = ?", (session,)).fetchall()
        ]
        if file_ids is not None:
            rows = [r for r in rows if r.id in set(file_ids)]
        for row in rows:
            _drop_chunks(db, row.id)
            db.execute("DELETE FROM kb_files WHERE id = ?", (row.id,))
        return rows

    def end_round(self, session: str) -> list[FileRow]:
        """Count a finished round for each of the session's files; delete those past retention.
        A session without files costs one read: no write lock on the file (the store's)."""
        with self.lock:
            if self.db.execute("SELECT 1 FROM kb_files WHERE session = ? LIMIT 1", (session,)).fetchone() is None:
                return []
        with self.write() as db:
            db.execute("UPDATE kb_files SET rounds = rounds + 1 WHERE session = ?", (session,))
            expired = [
                r[0]
                for r in db.execute(
                    "SELECT id FROM kb_files WHERE session = ? AND rounds >= retention", (session,)
                ).fetchall()
            ]
            return self._delete(db, session, expired) if expired else []

    def keyword(self, session: str, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """BM25 over the session's chunks: ``(chunk id, score)``, best first, higher is better."""
        if not terms:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        with self.lock:
            rows = self.db.execute(
                "SELECT c.id, bm25(kb_fts, 1.0, 0.5) AS score FROM kb_fts JOIN kb_chunks c ON c.id = kb_fts.rowid "
                "JOIN kb_files f ON f.id = c.file_id WHERE kb_fts MATCH ? AND c.session = ? ORDER BY score LIMIT ?",
                (match, session, k),
            ).fetchall()
        return [(int(cid), -float(score)) for cid, score in rows]

    def vectors(self, session: str) -> list[tuple[int, bytes]]:
        """The session's chunk vectors (chunks stored without one are left out)."""
        with self.lock:
            rows = self.db.execute(
                "SELECT c.id, c.vector FROM kb_chunks c JOIN kb_files f ON f.id = c.file_id "
                "WHERE c.session = ? AND c.vector IS NOT NULL",
                (session,),
            ).fetchall()
        return [(int(cid), bytes(vec)) for cid, vec in rows]

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks by id, with their file's name."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self.lock:
            rows = self.db.execute(
                "SELECT c.id, c.file_id, f.name, c.text, c.page, c.heading, c.span FROM kb_chunks c "
                f"JOIN kb_files f ON f.id = c.file_id WHERE c.id IN ({marks})",
                list(ids),
            ).fetchall()
        return {int(r[0]): ChunkRow(*r) for r in rows}

    def close(self) -> None:
        """Close the connections."""
        with self.lock:
            self.db.close()
        with self._quick_lock:
            if self._quick is not None:
                self._quick.close()
                self._quick = None


def _drop_chunks(db: sqlite3.Connection, file_id: str) -> None:
    db.execute("DELETE FROM kb_fts WHERE rowid IN (SELECT id FROM kb_chunks WHERE file_id = ?)", (file_id,))
    db.execute("DELETE FROM kb_chunks WHERE file_id = ?", (file_id,))


def _drop_upload(db: sqlite3.Connection, file_id: str) -> None:
    """Forget an upload that did not finish, with the chunks it wrote."""
    _drop_chunks(db, file_id)
    db.execute("DELETE FROM kb_uploads WHERE file_id = ?", (file_id,))


def _sweep(db: sqlite3.Connection) -> None:
    """Drop the uploads whose process (on this host) died before it finished them."""
    uploads = db.execute("SELECT file_id, host, pid FROM kb_uploads").fetchall()
    for file_id, host, pid in uploads:
        if host == _HOST and not pid_alive(pid):
            _drop_upload(db, file_id)


def _file_values(file: FileRow) -> tuple[object, ...]:
    return (
        file.id,
        file.session,
        file.name,
        file.kind,
        file.size,
        file.pages,
        file.chunks,
        file.retention,
        file.rounds,
        file.created,
        file.source,
    )
