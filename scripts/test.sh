#!/usr/bin/env bash
# The whole test suite: static checks, then pytest against real SQLite, a real
# PostgreSQL (started here), the real llama.cpp model and a real Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${REACTCHAT_TEST_POSTGRES:-}" ]; then
    REACTCHAT_TEST_POSTGRES=$(bash scripts/start-postgres.sh | tail -n 1)
    export REACTCHAT_TEST_POSTGRES
fi

.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy --strict src
.venv/bin/python -m pytest "$@"
