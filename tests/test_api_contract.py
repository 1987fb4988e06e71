"""The HTTP API keeps its OpenAPI document: Schemathesis, with all its checks, against a real server.

It generates requests from ``/openapi.json`` (valid and invalid ones, and sequences of
calls) and checks every answer against the document: status codes, content types, bodies,
headers (``Allow`` on a 405), that valid requests are accepted and invalid ones refused,
and that nothing is a server error. Two seeds, each bounded by a count of examples per
operation; ``tests/schemathesis_hooks.py`` says what a readable uploaded file looks like.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from attack_support import serve
from server_support import make_app, running

HERE = Path(__file__).resolve().parent
SCHEMATHESIS = Path(sys.executable).with_name("st")


@pytest.mark.parametrize("seed", [17, 20261202])
def test_the_api_answers_as_its_openapi_document_says(tmp_path: Path, seed: int) -> None:
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "schemathesis_hooks"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    with serve(tmp_path, max_new_sessions=None) as served:
        command = [str(SCHEMATHESIS), "run", f"{served.url}/openapi.json", "--checks", "all"]
        command += ["--max-examples", "15", "--seed", str(seed), "--no-color"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=env)
    report = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    assert " passed" in done.stdout and "failures" not in done.stdout.lower(), report
    assert "schema validation mismatch" not in done.stdout.lower(), report  # an operation refusing valid data


def test_a_retention_too_large_to_store_is_a_422() -> None:
    # found by Schemathesis: 42337424633502228480 rounds passed validation, then overflowed the store (500)
    with running(make_app()) as url:
        session = httpx.post(f"{url}/v1/sessions").json()["session"]
        upload = {"file": ("roses.txt", b"Roses are red.")}
        huge = httpx.post(
            f"{url}/v1/sessions/{session}/files", files=upload, data={"retention": "42337424633502228480"}
        )
        assert huge.status_code == 422 and "retention" in huge.json()["error"]["message"]
        kept = httpx.post(f"{url}/v1/sessions/{session}/files", files=upload, data={"retention": "3"})
        assert kept.status_code == 201 and kept.json()["file"]["retention"] == 3
