"""``reactchat serve`` as a user runs it: a real process, a SQLite file, a scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from server_support import free_port, parse_sse


def test_reactchat_serve_answers_over_http_and_keeps_sessions_in_sqlite(tmp_path: Path) -> None:
    replies = tmp_path / "replies.txt"
    replies.write_text(" I can answer.\nFinal Answer: hello from the file\n", encoding="utf-8")
    db = tmp_path / "chat.db"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REACTCHAT_TOKEN", "REACTCHAT_DB")}
    command = [sys.executable, "-m", "reactchat.cli", "serve", "--port", str(port), "--db", str(db)]
    command += ["--model", f"scripted:{replies}"]
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                page = httpx.get(f"{url}/", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline, "reactchat serve did not start"
                time.sleep(0.1)
        assert "<title>reactchat</title>" in page.text
        assert httpx.get(f"{url}/static/app.js").status_code == 200
        session = httpx.post(f"{url}/v1/sessions").json()["session"]
        frames = parse_sse(httpx.post(f"{url}/v1/sessions/{session}/messages", json={"message": "hi"}).text)
        assert frames[-1][1]["answer"] == "hello from the file"
    finally:
        process.terminate()
        process.wait(10)
        log.close()
    assert db.exists(), "the default store of the server is the SQLite file given by --db"


def test_reactchat_serve_refuses_a_public_host_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REACTCHAT_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "reactchat.cli", "serve", "--host", "0.0.0.0", "--db", "memory:"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "REACTCHAT_TOKEN" in done.stderr
