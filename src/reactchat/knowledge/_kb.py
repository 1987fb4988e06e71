"""``KnowledgeBase``: the temporary, per-session knowledge base of uploaded files.

A file uploaded into a session gets a round counter starting at 0. Each finished
turn of the session (``end_round``) adds one; when a file's rounds reach its
retention it is deleted with its chunks and bytes. ``clear`` deletes them at once
(the user clears the context). Everything lives in the session store's own
database, in tables prefixed ``kb_``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
import unicodedata
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from reactchat.knowledge._blocks import FileRejected, Limits, Report
from reactchat.knowledge._embed import default_embedder, encode, nearest
from reactchat.knowledge._index import FileRow, Index, open_index, terms
from reactchat.knowledge._isolate import Parsed, pool

#: progress(done, total): sync or async; called on the event loop
Progress = Callable[[int, int], Any]

DEFAULT_RETENTION = 5
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
#: sessions remembered as without files (a set of ids; a turn's end forgets its session)
MAX_FILELESS = 100_000
#: reciprocal rank fusion constant (Cormack et al. 2009): damps the weight of the very top ranks
RRF_K = 60


@dataclass(frozen=True)
class FileInfo:
    """A file in a session's knowledge base.

    ``rounds_left`` is how many more finished turns it stays for; ``pages`` is the PDF
    page count (None for other kinds); ``source`` the URL of a fetched page (None for an
    upload).
    """

    id: str
    name: str
    size: int
    chunks: int
    pages: int | None
    rounds_left: int
    retention: int
    kind: str
    rounds: int = 0
    source: str | None = None

    @classmethod
    def of(cls, row: FileRow) -> FileInfo:
        """From a stored row."""
        return cls(
            id=row.id,
            name=row.name,
            size=row.size,
            chunks=row.chunks,
            pages=row.pages,
            rounds_left=max(0, row.retention - row.rounds),
            retention=row.retention,
            kind=row.kind,
            rounds=row.rounds,
            source=row.source,
        )


@dataclass(frozen=True)
class Hit:
    """A passage found by ``search``, with its file and position."""

    file_id: str
    name: str
    text: str
    page: int | None
    heading: str
    span: str
    score: float

    @property
    def where(self) -> str:
        """The position to cite: ``page 3 · § Intro > Setup · lines 4-9``."""
        parts = [f"page {self.page}" if self.page is not None else "", f"§ {self.heading}" if self.heading else ""]
        parts.append(self.span)
        return " · ".join(p for p in parts if p)


#: format characters allowed in names: the joiners of emoji sequences and of some scripts
_JOINERS = {"\u200c", "\u200d"}


def _unsafe(c: str) -> bool:
    """Control, format (bidirectional overrides...), line/paragraph separator or surrogate."""
    category = unicodedata.category(c)
    return category in ("Cc", "Zl", "Zp", "Cs") or (category == "Cf" and c not in _JOINERS)


def check_name(name: str) -> str:
    """A file name without folders, control characters or characters that reorder or break
    the text around it (bidirectional overrides, line separators), or ``FileRejected``."""
    if not name or not name.strip():
        raise FileRejected("the file has no name")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise FileRejected(f"{name!r}: a file name must be a plain name, without folders such as '../'")
    if any(_unsafe(c) for c in name):
        raise FileRejected(f"{name!r}: a file name must not hold control, bidirectional or line-separator characters")
    if len(name) > 255:
        raise FileRejected(f"{name[:40]}...: the file name is longer than 255 characters")
    return name


class KnowledgeBase:
    """The uploaded files of every session of one database.

    ``url`` is the store's URL (``memory:``, ``sqlite:///path.db``, ``postgresql://...``);
    prefer ``KnowledgeBase.for_store(store)``. ``retention`` is the default number of
    finished turns a file stays for; ``embeddings=True`` adds dense retrieval (the
    ``embeddings`` extra) fused with keyword search, or pass any object with
    ``encode(list[str]) -> array``; left unset, ``REACTCHAT_EMBEDDINGS=1`` in the
    environment turns it on (for the CLI and the server). ``limits`` bound what reading one
    file may take (pages, paragraphs, rows, cells, characters, CPU seconds, memory); files
    are read in parser processes (``_isolate``). Nothing is opened until first use.
    """

    def __init__(
        self,
        url: str = "memory:",
        *,
        retention: int = DEFAULT_RETENTION,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_files: int = 20,
        chunk_chars: int = 1000,
        overlap: int = 150,
        embeddings: bool | Any | None = None,
        limits: Limits | None = None,
    ) -> None:
        if retention < 1:
            raise ValueError("retention must be at least 1 round")
        self.url = url
        self.retention = retention
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.chunk_chars = chunk_chars
        self.overlap = overlap
        self.limits = limits or Limits()
        if embeddings is None:
            embeddings = os.environ.get("REACTCHAT_EMBEDDINGS", "").lower() in ("1", "true", "yes", "on")
        self._embeddings = embeddings
        self._embedder: Any = None
        self._index: Index | None = None
        self._opening = threading.Lock()
        #: sessions this process last saw without files and has added none to since: the
        #: end of their turn has no round to count (see ``end_round``)
        self._fileless: set[str] = set()
        #: files added or deleted by this process: each ``add_file`` begun or ended, ``remove``, ``clear``
        self.changes = 0

    _by_store: ClassVar[weakref.WeakKeyDictionary[Any, KnowledgeBase]] = weakref.WeakKeyDictionary()
    #: stores that take no weak reference, kept alive with their knowledge base (an id
    #: alone could be reused by another store once the first is collected)
    _pinned: ClassVar[list[tuple[Any, KnowledgeBase]]] = []

    @classmethod
    def for_store(cls, store: Any, **options: Any) -> KnowledgeBase:
        """The knowledge base in ``store``'s database (one per store; the first call's options win).

        For a ``memory:`` store it is an in-memory database that lives as long as this object.
        """
        try:
            kb = cls._by_store.get(store)
        except TypeError:  # a store without weak references
            kb = next((kb for held, kb in cls._pinned if held is store), None)
        if kb is None:
            kb = cls(getattr(store, "url", "memory:"), **options)
            try:
                cls._by_store[store] = kb
            except TypeError:
                cls._pinned.append((store, kb))
        return kb

    @property
    def dense(self) -> bool:
        """Whether search fuses dense (embedding) retrieval with keyword search."""
        return self._embeddings is not False and self._embeddings is not None

    def _open(self) -> Index:
        # worker threads race to the first use: two connections to "memory:" would be two databases
        with self._opening:
            if self._index is None:
                self._index = open_index(self.url)
            return self._index

    def _encoder(self) -> Any:
        if self._embedder is None:
            self._embedder = default_embedder() if self._embeddings is True else self._embeddings
        return self._embedder

    async def add_file(
        self,
        session: str,
        filename: str,
        data: bytes,
        retention: int | None = None,
        progress: Progress | None = None,
        *,
        source: str | None = None,
    ) -> FileInfo:
        """Read, chunk and index a file for ``session``; ``FileRejected`` leaves nothing stored.

        ``source`` is where the file came from (a fetched page's URL): a file of the session
        from the same source is replaced by this one, so it does not count twice.

        ``progress(done, total)`` is called as pages (PDF) and then embedded chunks are
        done; ``total`` may grow once the chunk count is known; the last call has
        ``done == total``.
        """
        check_name(filename)
        retention = self.retention if retention is None else retention
        if retention < 1:
            raise FileRejected(f"{filename}: retention must be at least 1 round, not {retention}")
        if not data:
            raise FileRejected(f"{filename}: the file is empty")
        if len(data) > self.max_bytes:
            raise FileRejected(
                f"{filename}: {len(data) / 1e6:.1f} MB is over the {self.max_bytes / 1e6:.1f} MB limit; "
                "split it or upload the part you need",
                "too_large",
            )
        others = [f for f in await self.files(session) if source is None or f.source != source]
        if len(others) >= self.max_files:  # before the parser's time is spent
            raise self._full(filename)

        async def ingest(report: Report) -> FileRow:
            parsed = await pool().read(data, filename, self.limits, self.chunk_chars, self.overlap, report)
            return await asyncio.to_thread(self._store, session, filename, data, retention, parsed, report, source)

        self._fileless.discard(session)
        self.changes += 1
        try:
            return FileInfo.of(await _with_progress(ingest, progress))
        finally:
            self._fileless.discard(session)  # a look at the files may have ended meanwhile
            self.changes += 1

    async def copy_files(self, source: str, target: str) -> list[FileInfo]:
        """Copy ``source``'s live files into ``target`` (a fork of it), each with its name, bytes,
        retention and rounds so far; the copies are read again (the index keeps a file's chunks
        with its session). Returns the copies."""
        copies = []
        for info in await self.files(source):
            data = await self.data(source, info.id)
            if data is None:  # expired meanwhile
                continue
            parsed = await pool().read(data, info.name, self.limits, self.chunk_chars, self.overlap, _silent)
            self._fileless.discard(target)
            self.changes += 1
            row = await asyncio.to_thread(
                self._store, target, info.name, data, info.retention, parsed, _silent, info.source, info.rounds
            )
            copies.append(FileInfo.of(row))
        return copies

    def _full(self, name: str) -> FileRejected:
        return FileRejected(f"{name}: this session already has {self.max_files} files; clear some first", "full")

    def _store(
        self,
        session: str,
        name: str,
        data: bytes,
        retention: int,
        parsed: Parsed,
        report: Report,
        source: str | None,
        rounds: int = 0,
    ) -> FileRow:
        """Embed (when dense) and store a read file in one transaction; the file limit is checked
        in it. ``rounds``: the rounds it has already lived (a copy's)."""
        chunks = parsed.chunks
        done = parsed.pages or 1
        total = done + (len(chunks) if self.dense else 0)
        report(done, total)
        vectors = None
        if self.dense:
            vectors = encode(
                self._encoder(), [f"{c.heading}\n{c.text}" for c in chunks], lambda n: report(done + n, total)
            )
        row = FileRow(
            id=uuid.uuid4().hex[:12],
            session=session,
            name=name,
            kind=parsed.kind,
            size=len(data),
            pages=parsed.pages,
            chunks=len(chunks),
            retention=retention,
            rounds=rounds,
            created=time.time(),
            source=source,
        )
        if not self._open().add(row, data, chunks, vectors, max_files=self.max_files):
            raise self._full(name)
        return row

    async def files(self, session: str) -> list[FileInfo]:
        """The session's live files, oldest first."""
        index = self._index if self._index is not None else await asyncio.to_thread(self._open)
        now = getattr(index, "files_now", None)  # a SQLite index's, when it need not wait
        rows: list[FileRow] | None = now(session) if now is not None else None
        if rows is None:
            read = getattr(index, "files_async", None)  # PostgreSQL's: on the loop, no thread
            rows = await read(session) if read is not None else await asyncio.to_thread(index.files, session)
        if rows:
            self._fileless.discard(session)
        elif len(self._fileless) < MAX_FILELESS:  # past it, a round is counted the long way
            self._fileless.add(session)
        return [FileInfo.of(r) for r in rows]

    def known_fileless(self, session: str) -> bool:
        """Whether this process's last look at the session's files (``files``) found none
        and it has added none since; no read (another process may have added one)."""
        return session in self._fileless

    async def has_files(self, session: str) -> bool:
        """Whether the session has any live file."""
        return bool(await self.files(session))

    async def data(self, session: str, file_id: str) -> bytes | None:
        """A file's stored bytes (None once it expired)."""
        return await asyncio.to_thread(lambda: self._open().data(session, file_id))

    async def remove(self, session: str, file_id: str) -> bool:
        """Delete one file; False if the session has no such file."""
        self.changes += 1
        rows = await asyncio.to_thread(lambda: self._open().delete(session, [file_id]))
        return bool(rows)

    async def clear(self, session: str) -> list[FileInfo]:
        """Delete all of the session's files (the user cleared the context); returns them."""
        self.changes += 1
        rows = await asyncio.to_thread(lambda: self._open().delete(session))
        return [FileInfo.of(r) for r in rows]

    async def end_round(self, session: str) -> list[FileInfo]:
        """Count one finished round; delete and return the files whose rounds reached their retention.

        Free for a session this process last saw without files (``files``, at the start of
        each turn) and added none to since: a turn costs such a session one read. A file
        another process uploads while such a turn runs is not counted that round (the turn
        did not have it: its tools were chosen at the start)."""
        if session in self._fileless:
            self._fileless.discard(session)
            return []
        rows = await asyncio.to_thread(lambda: self._open().end_round(session))
        return [FileInfo.of(r) for r in rows]

    async def search(self, session: str, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` passages of the session's files that best match ``query``, best first."""
        return await asyncio.to_thread(self._search, session, query, k)

    def _search(self, session: str, query: str, k: int) -> list[Hit]:
        index = self._open()
        pool = k * 4 if self.dense else k
        keyword = index.keyword(session, terms(query), pool)
        if self.dense:
            dense = nearest(self._encoder(), query, index.vectors(session), pool)
            ranked = fuse([keyword, dense])[:k]
        else:
            ranked = keyword[:k]
        rows = index.chunks([cid for cid, _ in ranked])
        return [
            Hit(r.file_id, r.name, r.text, r.page, r.heading, r.span, score)
            for cid, score in ranked
            if (r := rows.get(cid)) is not None
        ]

    async def close(self) -> None:
        """Close the database connection (which ends a ``memory:`` knowledge base)."""
        if self._index is not None:
            index, self._index = self._index, None
            await asyncio.to_thread(index.close)


def _silent(done: int, total: int) -> None:
    """A report nobody follows."""


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each list adds ``1 / (k + rank)`` to an item's score."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, (item, _) in enumerate(ranking, 1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


T = TypeVar("T")


async def _with_progress(work: Callable[[Report], Awaitable[T]], progress: Progress | None) -> T:
    """Run ``work(report)``; its reports, from any thread, reach ``progress`` on the event loop."""
    if progress is None:
        return await work(lambda done, total: None)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()

    def report(done: int, total: int) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (done, total))

    task = asyncio.ensure_future(work(report))
    while True:
        getter = asyncio.ensure_future(queue.get())
        await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
        if not getter.done():
            getter.cancel()
            break
        await _call(progress, *getter.result())
    await asyncio.sleep(0)  # reports sent just before the end are still in call_soon_threadsafe's queue
    while not queue.empty():
        await _call(progress, *queue.get_nowait())
    return task.result()


async def _call(fn: Callable[..., Any], *args: Any) -> None:
    result = fn(*args)
    if inspect.isawaitable(result):
        await result


__all__ = ["FileInfo", "FileRejected", "Hit", "KnowledgeBase", "Limits"]
