"""Stores: where sessions and their events live.

A store is append-only: it keeps every event of every session, and the state of a
session (its history, a pending question, an interrupted turn) is derived from them.
``resolve_store`` turns a URL into a store: ``memory:``, ``sqlite:///path.db``,
``postgresql://...``.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Protocol, runtime_checkable

from reactchat.errors import AlreadyAnswered, ConfigError, SessionBusy, SessionNotFound
from reactchat.messages import Event


@runtime_checkable
class Store(Protocol):
    """Durable, append-only storage of sessions and their events.

    A store that several processes share (SQLite, PostgreSQL) is a ``SharedStore`` too.
    """

    #: the store's URL (``memory:``, ``sqlite:///...``, ``postgresql://...``), so other
    #: components can open their own connection to the same database
    url: str

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session (a new random id unless given) and return its id."""
        ...

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        ...

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events in order, after the first ``since`` of them.

        Raises ``SessionNotFound`` (checked when ``since`` is 0: a caller that read the
        session before knows it existed).
        """
        ...

    async def turn_events(self, session_id: str) -> list[Event]:
        """What a new turn of the session reads before it starts: every event of its last turn,
        and of the earlier turns at least what their question and answer need
        (``SessionState.history``); a store may read all of them. Raises ``SessionNotFound``."""
        ...

    async def append(self, *events: Event) -> None:
        """Persist events durably, in order and all together (one transaction), before returning."""
        ...

    async def append_unlock(self, owner: str, *events: Event) -> None:
        """``append`` (at least one event), then release their session's turn lock if ``owner``
        holds it: a turn's last events and its end (one transaction where the store can);
        if the append fails, the lock is kept."""
        ...

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's turn lock for ``owner`` unless someone else holds a live one."""
        ...

    async def try_lock_read(
        self, session_id: str, owner: str, ttl: float, since: int | None, then: tuple[Event, ...] = ()
    ) -> list[Event] | None:
        """Take the session's turn lock for ``owner``, then read its events after the first
        ``since`` (none when ``since`` is None); None, with nothing read, when someone else
        holds the lock. If the read finds nothing (the session is as the caller saw it),
        ``then`` is appended. The read sees every event appended before the lock was taken;
        when the read or the append fails (``SessionNotFound``) the lock is not kept."""
        ...

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the turn lock if ``owner`` holds it; the session was active until now."""
        ...

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, newest first."""
        ...

    async def idle_sessions(self, before: float, limit: int = 1000) -> list[str]:
        """Sessions whose last turn started and ended (or, with none, that were created)
        before ``before``, a Unix time; longest idle first."""
        ...

    async def delete_session(self, session_id: str, idle_before: float | None = None) -> bool:
        """Delete a session and its events; False if there was none. With ``idle_before``,
        only if the session was last active (a turn started or ended) before that time and
        no turn of it is running."""
        ...

    async def fork(self, session_id: str, before: int | None, new_id: str | None = None) -> str:
        """A new session (``new_id``, else a random id) holding copies of the session's events
        before seq ``before`` (all of them when None), each at the same seq, made in one
        transaction; its origin is recorded (``origin``). ``SessionNotFound``; ``NoSuchEvent``
        when ``before`` is not the seq of one of its events. The session itself is untouched."""
        ...

    async def origin(self, session_id: str) -> tuple[str, int] | None:
        """Where a forked session came from: the original's id and the seq its copy stopped
        before (one past its last event for a whole copy); None for a session that is no fork."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class SharedStore(Store, Protocol):
    """A store that several processes share (SQLite, PostgreSQL): it knows the turns whose
    process died and carries a request to stop a turn to the process running it."""

    async def abandoned(self) -> list[str]:
        """Sessions whose running turn's process died; each is given to exactly one caller."""
        ...

    async def request_cancel(self, session_id: str) -> bool:
        """Ask the process running the session's turn to stop it; whether a turn was running."""
        ...

    async def cancel_requests(self) -> list[str]:
        """Sessions whose turn this process runs and was asked to stop (each once)."""
        ...


def shared(store: Store) -> SharedStore | None:
    """``store`` as a ``SharedStore`` if other processes share it (SQLite, PostgreSQL), else
    None (a memory store: every turn of it runs in this process)."""
    return store if isinstance(store, SharedStore) else None


_SCHEMES = {
    "memory": "reactchat.store.memory:from_url",
    "sqlite": "reactchat.store.sqlite:from_url",
    "postgresql": "reactchat.store.postgres:from_url",
    "postgres": "reactchat.store.postgres:from_url",
}


def resolve_store(spec: str | Store) -> Store:
    """A store for a URL (``memory:``, ``sqlite:///path.db``, ``postgresql://...``)."""
    if not isinstance(spec, str):
        return spec
    scheme = spec.split(":", 1)[0]
    target = _SCHEMES.get(scheme)
    if target is None:
        raise ConfigError(f"unknown store {spec!r}: use 'memory:', 'sqlite:///path.db' or 'postgresql://user@host/db'")
    module_name, _, attr = target.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    store: Store = factory(spec)
    return store


def default_db() -> str:
    """Where sessions live unless told otherwise (the CLI and the server alike):
    ``$REACTCHAT_DB`` (a path or a URL), else ``sessions.db`` in the user's data
    directory (``$XDG_DATA_HOME/reactchat``, by default ``~/.local/share/reactchat``)."""
    value = os.environ.get("REACTCHAT_DB")
    if value:
        return value
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return str(base / "reactchat" / "sessions.db")


def store_url(db: str | None = None) -> str:
    """A ``--db`` value (a SQLite path or a store URL; ``default_db()`` when None) as a
    store URL; a SQLite file's folder is created if needed."""
    db = db or default_db()
    if "://" in db or db.startswith("memory:"):
        return db
    path = Path(db).expanduser().resolve()
    check_sqlite_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def check_sqlite_file(path: Path) -> None:
    """``ConfigError`` unless ``path`` is absent, empty or a SQLite database."""
    if path.is_dir():
        raise ConfigError(f"--db {path} is a directory: give a database file, such as {path / 'sessions.db'}")
    if path.exists():
        if not path.is_file():
            raise ConfigError(f"--db {path} is not a regular file")
        with path.open("rb") as file:
            head = file.read(16)
        if head and head != b"SQLite format 3\x00":
            raise ConfigError(f"--db {path} is not a SQLite database: give a new path or a reactchat database")


__all__ = [
    "AlreadyAnswered",
    "SessionBusy",
    "SessionNotFound",
    "SharedStore",
    "Store",
    "default_db",
    "resolve_store",
    "shared",
    "store_url",
]
