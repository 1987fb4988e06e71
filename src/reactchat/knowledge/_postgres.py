"""The knowledge base in PostgreSQL: ``kb_*`` tables, full-text search ranked by ``ts_rank``.

The text search vector is a generated column (English stemming; the heading weighted
below the text) with a GIN index. Vectors for dense retrieval are ``bytea`` ranked in
Python, since pgvector cannot be assumed. psycopg is imported only here (``open_index``
imports this module for a PostgreSQL URL).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

try:
    import psycopg
except ImportError:  # optional: the [postgres] extra (this module is imported only for a PostgreSQL URL)
    raise ImportError("a PostgreSQL store needs psycopg: pip install 'reactchat[postgres]'") from None

from reactchat.knowledge._chunk import Chunk
from reactchat.knowledge._index import _FILE_COLUMNS, ChunkRow, FileRow, _file_values
from reactchat.store._batch import Batcher
from reactchat.store._migrations import Database, Schema, migrate
from reactchat.store.postgres import _redact

#: a session's files, oldest first (``_FILES_OF``: of several sessions)
_FILES = f"SELECT {_FILE_COLUMNS} FROM kb_files WHERE session = %s ORDER BY created, id"
_FILES_OF = f"SELECT {_FILE_COLUMNS} FROM kb_files WHERE session = ANY(%s) ORDER BY created, id"

#: the knowledge base's tables in PostgreSQL, version by version (``IF NOT EXISTS``:
#: databases made before the tables were versioned have them without a record)
SCHEMA = Schema("kb")
SCHEMA.add(
    1,
    "kb001_files_chunks",
    """CREATE TABLE IF NOT EXISTS kb_files (
        id TEXT PRIMARY KEY, session TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
        size BIGINT NOT NULL, pages INTEGER, chunks INTEGER NOT NULL, retention INTEGER NOT NULL,
        rounds INTEGER NOT NULL DEFAULT 0, created DOUBLE PRECISION NOT NULL, data BYTEA NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS kb_files_session ON kb_files(session)",
    """CREATE TABLE IF NOT EXISTS kb_chunks (
        id BIGSERIAL PRIMARY KEY, file_id TEXT NOT NULL REFERENCES kb_files(id) ON DELETE CASCADE,
        session TEXT NOT NULL, ord INTEGER NOT NULL, text TEXT NOT NULL, page INTEGER,
        heading TEXT NOT NULL, span TEXT NOT NULL, vector BYTEA,
        tsv TSVECTOR GENERATED ALWAYS AS (
            setweight(to_tsvector('english', text), 'A') || setweight(to_tsvector('english', heading), 'B')
        ) STORED)""",
    "CREATE INDEX IF NOT EXISTS kb_chunks_file ON kb_chunks(file_id)",
    "CREATE INDEX IF NOT EXISTS kb_chunks_session ON kb_chunks(session)",
    "CREATE INDEX IF NOT EXISTS kb_chunks_tsv ON kb_chunks USING GIN (tsv)",
)
SCHEMA.add(2, "kb002_source", "ALTER TABLE kb_files ADD COLUMN IF NOT EXISTS source TEXT")  # a fetched page's URL


#: seconds to wait for a connection: a database that is down answers 503 soon, not after a hang
CONNECT_TIMEOUT = 5


def _unreachable(url: str, exc: Exception) -> ConnectionError:
    """The error of a database that cannot be reached (the server answers 503 with it)."""
    return ConnectionError(f"the knowledge base cannot reach PostgreSQL at {_redact(url)}: {exc}".strip())


class PostgresIndex:
    """PostgreSQL full-text search over the session's chunks (one connection, serialised)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self.db: Any = self._connect()
        #: ``files_async``: its connection, the loop both belong to, and its batches of reads
        self._aconn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reads: Batcher[str, list[FileRow]] | None = None
        with self.write() as cur:
            # workers starting at once wait for each other
            migrate(
                Database(cur, "postgres"), SCHEMA, lock="SELECT pg_advisory_xact_lock(hashtext('reactchat.kb_schema'))"
            )

    def _connect(self) -> Any:
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.OperationalError as exc:
            raise _unreachable(self.url, exc) from None

    def _live(self, fresh: bool = False) -> Any:
        # a server restart breaks the connection, which psycopg learns only when it is next
        # used: that use fails and the call is made again on a new connection (``fresh``)
        if fresh or self.db.closed or self.db.broken:
            self.db.close()
            self.db = self._connect()
        return self.db

    @contextmanager
    def write(self) -> Iterator[Any]:
        """A cursor inside one transaction, on a connection checked first (a write is not
        made twice: if the server restarted, the check fails, not the transaction)."""
        with self.lock:
            db = self._live()
            try:
                db.execute("SELECT 1")
            except psycopg.OperationalError:
                db = self._live(fresh=True)
            try:
                with db.transaction(), db.cursor() as cur:
                    yield cur
            except psycopg.OperationalError as exc:  # rolled back, or the server went away mid-way
                raise _unreachable(self.url, exc) from None

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self.lock:
            for fresh in (False, True):  # a read may be made again, on a new connection
                try:
                    with self._live(fresh).cursor() as cur:
                        cur.execute(sql, params)
                        rows: list[tuple[Any, ...]] = cur.fetchall()
                        return rows
                except psycopg.OperationalError as exc:
                    if fresh:
                        raise _unreachable(self.url, exc) from None
            raise AssertionError("unreachable")

    def add(
        self,
        file: FileRow,
        data: bytes,
        chunks: Sequence[Chunk],
        vectors: Sequence[bytes] | None,
        max_files: int | None = None,
    ) -> bool:
        """Store a file and its chunks in one transaction (replacing the session's files from the
        same ``source``); False (nothing stored) if the session already has ``max_files`` files."""
        with self.write() as cur:
            # one writer per session at a time, so concurrent uploads cannot all pass the count
            cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 17))", ("kb_files:" + file.session,))
            if file.source is not None:  # the same page fetched again: it replaces its copy
                cur.execute("DELETE FROM kb_files WHERE session = %s AND source = %s", (file.session, file.source))
            if max_files is not None:
                cur.execute("SELECT count(*) FROM kb_files WHERE session = %s", (file.session,))
                row = cur.fetchone()
                if row is not None and row[0] >= max_files:
                    return False
            cur.execute(
                f"INSERT INTO kb_files ({_FILE_COLUMNS}, data) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (*_file_values(file), data),
            )
            cur.executemany(
                "INSERT INTO kb_chunks (file_id, session, ord, text, page, heading, span, vector) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                [
                    (file.id, file.session, i, c.text, c.page, c.heading, c.span, vectors[i] if vectors else None)
                    for i, c in enumerate(chunks)
                ],
            )
        return True

    def files(self, session: str) -> list[FileRow]:
        """The session's files, oldest first."""
        return [FileRow(*r) for r in self._rows(_FILES, (session,))]

    async def files_async(self, session: str) -> list[FileRow]:
        """``files`` on the event loop, on a connection of its own (no worker thread, which
        costs more than the query); reads of several sessions that arrive while one is in
        flight go out together in one statement. A server looks once per turn."""
        loop = asyncio.get_running_loop()
        if self._reads is None or self._loop is not loop:
            self._drop_async()  # connections belong to the loop that made them
            self._loop, self._reads = loop, Batcher(self._files_batch)
        return await self._reads.submit(session)

    async def _files_batch(self, sessions: list[str]) -> list[list[FileRow] | BaseException]:
        for fresh in (False, True):  # after a server restart, once more on a new connection
            try:
                rows = await self._files_rows(sessions, fresh)
                break
            except psycopg.OperationalError as exc:
                if fresh:
                    raise _unreachable(self.url, exc) from None
        found: dict[str, list[FileRow]] = {session: [] for session in sessions}
        for row in rows:
            found[row[1]].append(FileRow(*row))
        return [list(found[session]) for session in sessions]

    async def _files_rows(self, sessions: list[str], fresh: bool) -> list[Any]:
        if fresh or self._aconn is None or self._aconn.closed or self._aconn.broken:
            self._drop_async()
            self._aconn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
            )
        if len(sessions) == 1:  # scalar parameters: psycopg dumps a list at several times the cost
            cursor = await self._aconn.execute(_FILES, (sessions[0],))
        else:
            cursor = await self._aconn.execute(_FILES_OF, (sessions,))
        rows: list[Any] = await cursor.fetchall()
        return rows

    def _drop_async(self) -> None:
        """Forget the event loop's connection without awaiting (its loop may be gone)."""
        if self._aconn is not None:
            self._aconn.pgconn.finish()
            self._aconn = None

    def data(self, session: str, file_id: str) -> bytes | None:
        """A stored file's bytes."""
        rows = self._rows("SELECT data FROM kb_files WHERE session = %s AND id = %s", (session, file_id))
        return bytes(rows[0][0]) if rows else None

    def delete(self, session: str, file_ids: Sequence[str] | None = None) -> list[FileRow]:
        """Delete some (or all) of the session's files; their chunks go by cascade."""
        with self.write() as cur:
            if file_ids is None:
                cur.execute(f"DELETE FROM kb_files WHERE session = %s RETURNING {_FILE_COLUMNS}", (session,))
            else:
                cur.execute(
                    f"DELETE FROM kb_files WHERE session = %s AND id = ANY(%s) RETURNING {_FILE_COLUMNS}",
                    (session, list(file_ids)),
                )
            return [FileRow(*r) for r in cur.fetchall()]

    def end_round(self, session: str) -> list[FileRow]:
        """Count a finished round; delete the files whose rounds reached their retention.
        A session without files costs one read, no transaction."""
        if not self._rows("SELECT 1 FROM kb_files WHERE session = %s LIMIT 1", (session,)):
            return []
        with self.write() as cur:
            cur.execute("UPDATE kb_files SET rounds = rounds + 1 WHERE session = %s", (session,))
            cur.execute(
                f"DELETE FROM kb_files WHERE session = %s AND rounds >= retention RETURNING {_FILE_COLUMNS}",
                (session,),
            )
            return [FileRow(*r) for r in cur.fetchall()]

    def keyword(self, session: str, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """``ts_rank`` over the session's chunks: ``(chunk id, score)``, best first."""
        if not terms:
            return []
        # terms are bare words ([^\W_]+), so joining them with | is always a valid tsquery
        rows = self._rows(
            "SELECT id, ts_rank(tsv, q) AS score FROM kb_chunks, to_tsquery('english', %s) q "
            "WHERE session = %s AND tsv @@ q ORDER BY score DESC, id LIMIT %s",
            (" | ".join(terms), session, k),
        )
        return [(int(cid), float(score)) for cid, score in rows]

    def vectors(self, session: str) -> list[tuple[int, bytes]]:
        """The session's chunk vectors."""
        rows = self._rows("SELECT id, vector FROM kb_chunks WHERE session = %s AND vector IS NOT NULL", (session,))
        return [(int(cid), bytes(vec)) for cid, vec in rows]

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunks by id, with their file's name."""
        if not ids:
            return {}
        rows = self._rows(
            "SELECT c.id, c.file_id, f.name, c.text, c.page, c.heading, c.span FROM kb_chunks c "
            "JOIN kb_files f ON f.id = c.file_id WHERE c.id = ANY(%s)",
            (list(ids),),
        )
        return {int(r[0]): ChunkRow(*r) for r in rows}

    def close(self) -> None:
        """Close the connections."""
        with self.lock:
            self.db.close()
        self._drop_async()
