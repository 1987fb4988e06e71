#!/usr/bin/env bash
# The whole test suite: static checks, then pytest against real SQLite, a real
# PostgreSQL (started here), the real llama.cpp model and a real Chromium.
# With --fast: the static checks and the tests not marked slow (those that run inside the
# pytest process: no other process, PostgreSQL or model; tests/conftest.py says which), in
# two pytest workers, for the edit-test loop. Any other argument goes to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

fast=false
pytest_args=()
for arg in "$@"; do
    if [ "$arg" = "--fast" ]; then
        fast=true
    else
        pytest_args+=("$arg")
    fi
done

if [ "$fast" = true ]; then
    # two workers: 146 s instead of 175 s for the fast set at a load average of about 10
    pytest_args=(-m "not slow" -n 2 "${pytest_args[@]}")
elif [ -z "${REACTCHAT_TEST_POSTGRES:-}" ]; then
    REACTCHAT_TEST_POSTGRES=$(bash scripts/start-postgres.sh | tail -n 1)
    export REACTCHAT_TEST_POSTGRES
fi

.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy --strict src
.venv/bin/python -m pytest "${pytest_args[@]}"
