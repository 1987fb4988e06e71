"""Shared pytest fixtures. Each block is owned by one part of the project: add yours in your own block."""

from __future__ import annotations

import inspect
import os
import subprocess
import types
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactchat.engine import tokens

# =========================================================================== stores
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


@pytest.fixture(autouse=True)
def fresh_token_calibration() -> Iterator[None]:
    """Each test starts with no characters-per-token learned by this process's earlier tests
    (``reactchat.engine.tokens``): compaction decisions depend on it, so without this a test
    depends on which ran before it (a replay of a compacted session diverged in a full run)."""
    tokens.forget_calibration()
    yield


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


# ==================================================================== end of stores


# ===================================================================== the slow marker
# `scripts/test.sh --fast` runs `-m "not slow"`: the tests that run inside the pytest
# process. Slow are those that start another process (a server, the command, a child
# agent, an MCP server, Chromium), PostgreSQL, the local model or the embedding model.
# Most are found in the code rather than listed, so that a new test that starts a worker
# is slow without anyone marking it: a test is slow when its function, one of its
# fixtures, or a function of tests/ that they call names one of SLOW_NAMES, or when it
# runs on the postgres store. SLOW_TESTS names the few whose cost the code does not show;
# a module whose processes the library starts says `pytestmark = pytest.mark.slow`.
# Servers in a thread of the test process (server_support.running, the replay servers)
# start in milliseconds and stay in the fast set.

TESTS = Path(__file__).resolve().parent
SLOW_NAMES = frozenset(
    {
        "subprocess",  # the command, a uvicorn worker, a child agent, `reactchat serve`, a llama.cpp server
        "Popen",
        "create_subprocess_exec",
        "MCPServer",  # an MCP server process, over stdio or HTTP
        "sync_playwright",  # Chromium
        "async_playwright",
        "LocalModel",  # the llama.cpp model, loaded into this process
        "postgres_server",  # the fixture every PostgreSQL test reaches
    }
)
SLOW_TESTS = frozenset(
    {
        "test_the_packaged_minilm_model_finds_paraphrases",  # the embedding model, on torch
    }
)


def _names_reached(function: object, seen: set[object]) -> Iterator[str]:
    """The global and attribute names that ``function`` and the functions of tests/ it calls use."""
    function = inspect.unwrap(function) if callable(function) else function  # a fixture wraps its function
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType) or function in seen or not Path(code.co_filename).is_relative_to(TESTS):
        return
    seen.add(function)
    namespace = getattr(function, "__globals__", {})
    codes = [code]
    while codes:  # nested functions, lambdas and comprehensions have code objects of their own
        current = codes.pop()
        codes += [const for const in current.co_consts if isinstance(const, types.CodeType)]
        for name in current.co_names:
            yield name
            yield from _names_reached(namespace.get(name), seen)


def _is_slow(item: pytest.Function) -> bool:
    """Whether ``item`` starts one of the slow parts (see SLOW_NAMES and SLOW_TESTS)."""
    if item.originalname in SLOW_TESTS:
        return True
    params = item.callspec.params if hasattr(item, "callspec") else {}
    if "postgres" in (params.get("durable_url"), params.get("store_url")):
        return True  # these fixtures reach postgres_url at run time, by a name in no signature
    names = set(item.fixturenames)  # every fixture the test reaches, postgres_server among them
    seen: set[object] = set()
    for part in [item.function, *(getattr(item.module, name, None) for name in item.fixturenames)]:
        names.update(_names_reached(part, seen))
    return not SLOW_NAMES.isdisjoint(names)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark slow every test that starts another process, PostgreSQL or a model (see SLOW_NAMES)."""
    for item in items:
        if isinstance(item, pytest.Function) and _is_slow(item):
            item.add_marker(pytest.mark.slow)


# ============================================================== end of the slow marker
