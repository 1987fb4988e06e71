"""Shared pytest fixtures. Each block is owned by one part of the project: add yours in your own block."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# ==================================================================== stores (issue 5)
# Real SQLite files and a real PostgreSQL server. PostgreSQL comes from
# $REACTCHAT_TEST_POSTGRES, else the throwaway cluster of scripts/start-postgres.sh
# (started here when it is not running). It is never silently skipped: if it cannot
# be reached, every test that needs it fails with the reason.

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:55432/reactchat_test"


def _postgres_reachable(url: str) -> str | None:
    """None if a connection works, else why not."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc).strip()
    return None


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The URL of a reachable PostgreSQL database (fails loudly when there is none)."""
    url = os.environ.get("REACTCHAT_TEST_POSTGRES")
    if url:
        problem = _postgres_reachable(url)
        if problem:
            pytest.fail(f"REACTCHAT_TEST_POSTGRES={url} is unreachable: {problem}")
        return url
    problem = _postgres_reachable(DEFAULT_POSTGRES)
    if problem:
        script = ROOT / "scripts" / "start-postgres.sh"
        started = subprocess.run([str(script)], capture_output=True, text=True, timeout=120, check=False)
        problem = _postgres_reachable(DEFAULT_POSTGRES)
        if problem:
            pytest.fail(
                f"no PostgreSQL for the store tests: {DEFAULT_POSTGRES} is unreachable ({problem}) and "
                f"{script} failed: {started.stderr.strip() or started.stdout.strip()}. "
                "Set REACTCHAT_TEST_POSTGRES to a database URL."
            )
    return DEFAULT_POSTGRES


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A private schema in the test database (tables start empty), dropped afterwards."""
    import psycopg

    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in postgres_server else "?"
    yield f"{postgres_server}{separator}options=-csearch_path%3D{schema}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite file."""
    return f"sqlite:///{tmp_path / 'sessions.db'}"


@pytest.fixture
def memory_url() -> str:
    """An in-process store."""
    return "memory:"


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest) -> str:
    """Each store that outlives a process."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Every store."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


# ================================================================ end of stores (issue 5)
