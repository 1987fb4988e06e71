"""Schema versions, one way for every database reactchat writes.

Each schema (the session store's tables, the knowledge base's ``kb_*`` tables) is a
list of numbered ``Migration``s, applied in order, each once, and recorded by name in
``reactchat_migrations`` of the same database. Append new migrations; never edit one
that has shipped. A migration's steps are SQL statements or functions of the
connection (for data that SQL alone cannot rewrite safely).

``migrate`` runs them on any DB-API connection (``sqlite3``; ``psycopg`` in sync mode)
inside one transaction, after ``lock`` (a statement that makes concurrent starters
wait for each other, or none where the transaction itself is exclusive).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Dialect = Literal["sqlite", "postgres"]


class Database:
    """A connection as the migrations see it: ``execute`` with ``?`` placeholders, and its dialect."""

    def __init__(self, connection: Any, dialect: Dialect) -> None:
        self.connection = connection
        self.dialect = dialect

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (empty for statements that return none)."""
        if self.dialect == "postgres":  # psycopg: %s placeholders, none at all without parameters
            cursor = self.connection.execute(sql.replace("?", "%s"), params or None)
        else:
            cursor = self.connection.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall() if cursor.description else []
        return rows


Step = str | Callable[[Database], None]

#: PostgreSQL: every schema's migrations take this one transaction-level lock, so that
#: processes starting at once (and the store and the knowledge base of one process)
#: apply them one after the other ("rct\0" in ASCII)
POSTGRES_LOCK = f"SELECT pg_advisory_xact_lock({0x72637400})"


@dataclass(frozen=True)
class Migration:
    """Version ``version`` of a schema: its ``steps`` in order, recorded as ``name``."""

    version: int
    name: str
    steps: tuple[Step, ...]


class Schema:
    """The migrations of one group of tables, in version order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.migrations: list[Migration] = []

    def add(self, version: int, name: str, *steps: Step) -> None:
        """Append version ``version``; versions go up by one."""
        expected = len(self.migrations) + 1
        if version != expected:
            raise ValueError(f"{self.name}: migration {name} is version {version}, expected {expected}")
        self.migrations.append(Migration(version, name, steps))

    @property
    def version(self) -> int:
        """The newest version."""
        return len(self.migrations)


_RECORD = (
    "CREATE TABLE IF NOT EXISTS reactchat_migrations (name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)


def migrate(db: Database, schema: Schema, lock: str | None = None) -> list[int]:
    """Apply the migrations of ``schema`` that ``db`` has not seen; the versions applied.

    The caller holds a transaction open around this call (and commits it).
    """
    if lock:
        db.execute(lock)
    db.execute(_RECORD)
    done = {row[0] for row in db.execute("SELECT name FROM reactchat_migrations")}
    applied = []
    for migration in schema.migrations:
        if migration.name in done:
            continue
        for step in migration.steps:
            if isinstance(step, str):
                db.execute(step)
            else:
                step(db)
        db.execute("INSERT INTO reactchat_migrations (name, applied_at) VALUES (?, ?)", (migration.name, time.time()))
        applied.append(migration.version)
    return applied


def applied(db: Database) -> list[str]:
    """The names of the migrations recorded in ``db``, in the order they were applied."""
    return [row[0] for row in db.execute("SELECT name FROM reactchat_migrations ORDER BY applied_at, name")]


# ------------------------------------------------------------ the events schema's data steps

#: the observation text that marked an interrupted call before ``ObservationEvent.interrupted``
LEGACY_INTERRUPTED = (
    "This call was interrupted before it returned (the process running it stopped), so its "
    "effect is unknown and it was not run again. Check before relying on it."
)


def mark_interrupted(db: Database) -> None:
    """Events schema v2: observations stored with the interrupted sentence get ``interrupted: true``."""
    body = "body::text" if db.dialect == "postgres" else "body"
    rows = db.execute(
        f"SELECT session, seq, {body} FROM events WHERE type = 'observation' AND {body} LIKE ?",
        ("%interrupted before it returned%",),
    )
    for session, seq, text in rows:
        event = json.loads(text)
        if event.get("text") == LEGACY_INTERRUPTED and not event.get("interrupted"):
            event["interrupted"] = True
            db.execute(
                "UPDATE events SET body = ? WHERE session = ? AND seq = ?",
                (json.dumps(event, ensure_ascii=False), session, seq),
            )


__all__ = [
    "LEGACY_INTERRUPTED",
    "POSTGRES_LOCK",
    "Database",
    "Migration",
    "Schema",
    "applied",
    "mark_interrupted",
    "migrate",
]
