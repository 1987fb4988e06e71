"""The HTTP API keeps its OpenAPI document: Schemathesis, with all its checks, against a real server.

It generates requests from ``/openapi.json`` (valid and invalid ones, and sequences of
calls) and checks every answer against the document: status codes, content types, bodies,
headers (``Allow`` on a 405), that valid requests are accepted and invalid ones refused,
and that nothing is a server error. The run is bounded by a fixed count of examples and a
fixed seed. ``tests/schemathesis.toml`` holds the one exception and says why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from attack_support import serve

HERE = Path(__file__).resolve().parent
SCHEMATHESIS = Path(sys.executable).with_name("st")


def test_the_api_answers_as_its_openapi_document_says(tmp_path: Path) -> None:
    with serve(tmp_path, max_new_sessions=None) as served:
        command = [str(SCHEMATHESIS), "--config-file", str(HERE / "schemathesis.toml"), "run"]
        command += [f"{served.url}/openapi.json", "--checks", "all", "--max-examples", "20"]
        command += ["--seed", "17", "--generation-deterministic", "--no-color"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    report = done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    assert " passed" in done.stdout and "failures" not in done.stdout.lower(), report
