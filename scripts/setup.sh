#!/usr/bin/env bash
# One-time set-up on a fresh machine: system packages, .venv/ with reactchat and every
# extra, llama.cpp built portably. Safe to run again: what is there is kept.
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL (tests, multi-worker serving), Chromium (web page tests), bubblewrap
# (run_python's sandbox) and iproute2 (the multi-host tests' network namespaces) from Debian
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for pkg in postgresql chromium chromium-driver bubblewrap iproute2; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

# llama-cpp-python compiles llama.cpp: a portable x86_64 build (the native one dies with
# SIGILL in AMX tile code on some CPUs); pip caches the wheel for the next run.
if [ "$(uname -m)" = x86_64 ]; then
    export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"
fi
# the CPU build of torch first, so that sentence-transformers does not pull a CUDA one
.venv/bin/pip install -q "torch==2.13.0"
.venv/bin/pip install -q -e ".[all,dev]"
# the public suites' data (the `suites` extra) without its pins, which would downgrade numpy
.venv/bin/pip install -q --no-deps "bfcl-eval==2026.3.23"
# τ²-bench's tasks, databases and tools (inspect-evals on inspect-ai) and AgentDojo's suites,
# with only the modules their task files import: their own pins would pull every provider SDK
.venv/bin/pip install -q --no-deps "inspect-evals==0.26.0" "inspect-ai==0.3.285" \
    "platformdirs==4.14.9" "psutil==7.2.2" "nest-asyncio2==1.7.4" "shortuuid==1.0.13" "jsonlines==4.0.0" \
    "textual==8.2.8" "semver==3.1.2" "mmh3==5.3.1" "botocore==1.44.8" "zipfile-zstd==0.0.4" "toml==0.10.2"
.venv/bin/pip install -q --no-deps "agentdojo==0.1.35" \
    "deepdiff==9.1.0" "orderly-set==5.5.0" "cachebox==6.2.10" "email-validator==2.4.0"
echo "reactchat is set up: .venv/bin/reactchat ask \"What is 80.16 * 1.15?\""
