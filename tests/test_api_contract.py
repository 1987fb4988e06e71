"""The HTTP API keeps its OpenAPI document: Schemathesis, with all its checks, against a real server.

It generates requests from ``/openapi.json`` (valid and invalid ones, and sequences of
calls) and checks every answer against the document: status codes, content types, bodies,
headers (``Allow`` on a 405), that valid requests are accepted and invalid ones refused,
and that nothing is a server error. Two seeds, each bounded by a count of examples per
operation; ``tests/schemathesis_hooks.py`` says what a readable uploaded file looks like.

What Schemathesis cannot make happen is a database failing: the last tests send a valid
request to every operation of the document while PostgreSQL is out of reach (503) and
while the disk under SQLite is full (507), and check each answer is one the document
declares for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from attack_support import serve
from reactchat import Agent, Memory
from reactchat.server import ServerConfig, create_app
from server_support import RuleModel, make_app, running
from test_disk_full import fill, small_disk  # noqa: F401  (the module's 2 MB disk fixture)

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


#: what fills a path's parameters
NAMES = {"session": "s1", "name": "a.png", "fact": "f1"}
#: a text far larger than what is left on a full disk
BIG = "y" * 300_000


def valid(method: str, path: str, text: str) -> dict[str, Any]:
    """The body of a valid request of the operation (``text``: what it carries), for ``httpx.request``."""
    if (method, path) == ("post", "/v1/sessions/{session}/messages"):
        return {"json": {"message": text, "stream": False}}
    if (method, path) == ("post", "/v1/chat/completions"):
        return {"json": {"model": "rules", "messages": [{"role": "user", "content": text}]}}
    if (method, path) == ("post", "/v1/sessions/{session}/files"):
        return {"files": {"file": ("notes.txt", text.encode())}}
    return {}


def answers(client: httpx.Client, text: str) -> tuple[dict[str, int], dict[str, set[int]]]:
    """Each operation of the document sent once (``text`` in its body): the status it answered,
    and the statuses the document declares for it, by ``"METHOD /path"``."""
    document = client.get("/openapi.json").json()
    answered, declared = {}, {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            name = f"{method.upper()} {path}"
            response = client.request(method, path.format(**NAMES), **valid(method, path, text))
            answered[name], declared[name] = response.status_code, {int(code) for code in operation["responses"]}
    return answered, declared


def memory_app(store: str) -> Any:
    return create_app(
        lambda opened: Agent(model=RuleModel(), store=opened, memory=Memory(scope="team")),
        config=ServerConfig(store=store),
    )


def test_every_operation_declares_the_503_it_answers_while_the_database_is_down() -> None:
    app = memory_app("postgresql://postgres@127.0.0.1:1/nowhere")
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        answered, declared = answers(client, "hello")
    assert {name: status for name, status in answered.items() if status not in declared[name]} == {}
    # the one operation that reads no database
    assert {name for name, status in answered.items() if status != 503} == {"GET /v1/models"}


def test_every_operation_that_writes_declares_the_507_it_answers_on_a_full_disk(small_disk: Path) -> None:  # noqa: F811
    app = memory_app(f"sqlite:///{small_disk / 'served.db'}")
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/v1/sessions", json={"session": "s1"}).status_code == 201
        filler = fill(small_disk)
        answered, declared = answers(client, BIG)
        filler.unlink()
    assert {name: status for name, status in answered.items() if status not in declared[name]} == {}
    full = {name for name, status in answered.items() if status == 507}
    assert full >= {
        "POST /v1/sessions",
        "GET /v1/sessions/{session}",  # a read, but the first to open the knowledge base, which writes its schema
        "POST /v1/sessions/{session}/messages",
        "POST /v1/sessions/{session}/fork",
        "POST /v1/sessions/{session}/files",
        "POST /v1/chat/completions",
    }
