"""Facts kept across sessions (``reactchat.memory``) and the token counts models reported
(``reactchat.engine.tokens``): the rows, the tables and the SQL the SQLite and PostgreSQL
stores share (written with ``?``; PostgreSQL's store swaps in ``%s``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Fact:
    """One remembered fact of a scope, with where and when it was learned."""

    id: str
    scope: str
    text: str
    #: the session in which it was remembered
    session: str
    #: when it was remembered (Unix time)
    at: float
    #: when it expires (Unix time); None: never
    expires: float | None = None
    #: its embedding (float32 bytes) when dense retrieval is on
    vector: bytes | None = None


@runtime_checkable
class FactStore(Protocol):
    """A store that keeps facts by scope (the memory, SQLite and PostgreSQL stores)."""

    async def add_fact(self, fact: Fact) -> None:
        """Keep ``fact`` (and drop the scope's expired ones)."""
        ...

    async def facts(self, scope: str, now: float, limit: int = 1000) -> list[Fact]:
        """The scope's facts that have not expired at ``now``, newest first."""
        ...

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete a fact of ``scope``; whether there was one."""
        ...


#: SQLite and PostgreSQL tables (the store's migration ``m008_facts_token_calibrations``)
def tables(blob: str, real: str) -> tuple[str, ...]:
    """The statements that create the tables, with the dialect's binary and float types."""
    return (
        f"""CREATE TABLE facts (
            id TEXT PRIMARY KEY,
            scope TEXT NOT NULL,
            text TEXT NOT NULL,
            session TEXT NOT NULL,
            at {real} NOT NULL,
            expires {real},
            vector {blob}
        )""",
        "CREATE INDEX facts_scope_at ON facts(scope, at)",
        "CREATE TABLE token_calibrations (model TEXT PRIMARY KEY, chars BIGINT NOT NULL, tokens BIGINT NOT NULL)",
    )


#: the same id again (the same text in the same scope) refreshes the fact
ADD = (
    "INSERT INTO facts (id, scope, text, session, at, expires, vector) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET text = excluded.text, session = excluded.session, at = excluded.at, "
    "expires = excluded.expires, vector = excluded.vector"
)
EXPIRE = "DELETE FROM facts WHERE scope = ? AND expires IS NOT NULL AND expires <= ?"
LIST = (
    "SELECT id, scope, text, session, at, expires, vector FROM facts "
    "WHERE scope = ? AND (expires IS NULL OR expires > ?) ORDER BY at DESC, id LIMIT ?"
)
FORGET = "DELETE FROM facts WHERE scope = ? AND id = ?"
CALIBRATION = "SELECT chars, tokens FROM token_calibrations WHERE model = ?"
CALIBRATE = (
    "INSERT INTO token_calibrations (model, chars, tokens) VALUES (?, ?, ?) ON CONFLICT (model) DO UPDATE "
    "SET chars = token_calibrations.chars + excluded.chars, tokens = token_calibrations.tokens + excluded.tokens"
)


def values(fact: Fact) -> tuple[object, ...]:
    """``fact`` as the parameters of ``ADD``."""
    return (fact.id, fact.scope, fact.text, fact.session, fact.at, fact.expires, fact.vector)


def from_row(row: Sequence[Any]) -> Fact:
    """A fact from a row of ``LIST`` (PostgreSQL gives ``memoryview`` for bytes)."""
    expires, vector = row[5], row[6]
    return Fact(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        float(row[4]),
        None if expires is None else float(expires),
        None if vector is None else bytes(vector),
    )


def postgres(sql: str) -> str:
    """``sql`` with PostgreSQL's placeholders."""
    return sql.replace("?", "%s")


__all__ = [
    "ADD",
    "CALIBRATE",
    "CALIBRATION",
    "EXPIRE",
    "FORGET",
    "LIST",
    "Fact",
    "FactStore",
    "from_row",
    "postgres",
    "tables",
]
