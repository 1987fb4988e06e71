"""Attacks over HTTP: DNS rebinding, cross-site requests, other users' sessions,
derived OpenAI sessions, invalid Unicode, floods of new sessions; against a real uvicorn."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from openai import OpenAI

from server_support import free_port, make_app, running

USERS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}


def test_a_rebound_host_name_is_refused_but_loopback_names_work() -> None:
    with running(make_app()) as url:
        port = url.rsplit(":", 1)[1]
        rebound = httpx.get(f"{url}/v1/sessions/x", headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 403 and "host name" in rebound.json()["error"]["message"]
        assert httpx.post(f"{url}/v1/sessions", headers={"Host": "evil.test"}).status_code == 403
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            assert httpx.post(f"{url}/v1/sessions", headers={"Host": host}).status_code == 201, host


def test_configured_host_names_are_served() -> None:
    with running(make_app(allowed_hosts=("chat.internal",))) as url:
        assert httpx.post(f"{url}/v1/sessions", headers={"Host": "chat.internal"}).status_code == 201


def test_a_cross_site_page_cannot_post_or_upload() -> None:
    with running(make_app()) as url:
        session = httpx.post(f"{url}/v1/sessions").json()["session"]
        evil = {"Origin": "https://attacker.example"}
        # the requests a hostile page can send without a preflight: form posts and multipart
        posted = httpx.post(f"{url}/v1/sessions/{session}/messages", content=b'{"message": "hi"}', headers=evil)
        assert posted.status_code == 403 and "cross-origin" in posted.json()["error"]["message"]
        uploaded = httpx.post(f"{url}/v1/sessions/{session}/files", files={"file": ("a.txt", b"x")}, headers=evil)
        assert uploaded.status_code == 403
        assert httpx.post(f"{url}/v1/sessions", headers={"Origin": "null"}).status_code == 403
        assert httpx.get(f"{url}/v1/sessions/{session}").json()["turns"] == [], "nothing ran"
        # the page itself (same origin) and clients that send no Origin work
        same = httpx.post(f"{url}/v1/sessions", headers={"Origin": url})
        assert same.status_code == 201


def test_a_page_of_another_local_server_cannot_post() -> None:
    # what reactchat serve configures: the address it listens on is one of the host names;
    # a page served by another program on this machine (another port) is another origin
    with running(make_app(allowed_hosts=("127.0.0.1", "chat.example"))) as url:
        port = int(url.rsplit(":", 1)[1])
        for origin in (f"http://127.0.0.1:{port + 1}", f"http://localhost:{port}", "http://[::1]:3000"):
            posted = httpx.post(f"{url}/v1/sessions", headers={"Origin": origin})
            assert posted.status_code == 403, origin
        assert httpx.post(f"{url}/v1/sessions", headers={"Origin": url}).status_code == 201
        # behind a proxy that rewrites Host, the page's origin is a configured name
        proxied = httpx.post(f"{url}/v1/sessions", headers={"Origin": "https://chat.example"})
        assert proxied.status_code == 201


def test_the_page_forbids_framing_and_inline_code() -> None:
    with running(make_app()) as url:
        page = httpx.get(f"{url}/")
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert httpx.get(f"{url}/v1/models").headers["x-content-type-options"] == "nosniff"


async def test_without_a_token_only_loopback_clients_are_served() -> None:
    # what uvicorn --factory reactchat.server:app_from_env --host 0.0.0.0 would let in
    transport = httpx.ASGITransport(app=make_app(), client=("192.0.2.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        refused = await client.post("/v1/sessions")
        assert refused.status_code == 403 and "REACTCHAT_TOKEN" in refused.json()["error"]["message"]
    transport = httpx.ASGITransport(app=make_app(token="t0k"), client=("192.0.2.7", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://server.example") as client:
        allowed = await client.post("/v1/sessions", headers={"Authorization": "Bearer t0k"})
        assert allowed.status_code == 201


def test_app_from_env_refuses_a_public_host_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REACTCHAT_TOKEN", "REACTCHAT_TOKEN_FILE")}
    env |= {"REACTCHAT_HOST": "0.0.0.0", "REACTCHAT_DB": "memory:", "REACTCHAT_MODEL": "local"}
    done = subprocess.run(
        [sys.executable, "-c", "from reactchat.server import app_from_env; app_from_env()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "REACTCHAT_TOKEN" in done.stderr


def test_each_user_sees_only_their_own_sessions() -> None:
    with (
        running(make_app(users=USERS)) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {USERS['alice']}"}) as alice,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {USERS['bob']}"}) as bob,
    ):
        mine = alice.post("/v1/sessions").json()["session"]
        assert mine.startswith("alice:")
        named = alice.post("/v1/sessions", json={"session": "notes"}).json()["session"]
        assert named == "alice:notes"
        alice.post(f"/v1/sessions/{mine}/messages", json={"message": "how far is Paris?", "stream": False})
        assert alice.get(f"/v1/sessions/{mine}").json()["pending"]["question"] == "Where are you?"
        for path in (f"/v1/sessions/{mine}", f"/v1/sessions/{named}"):
            assert bob.get(path).status_code == 404
        answer = bob.post(f"/v1/sessions/{mine}/messages", json={"message": "Lyon", "stream": False})
        assert answer.status_code == 404
        listed = [s["session"] for s in bob.get("/v1/sessions").json()["sessions"]]
        assert listed == [], "bob lists only his own sessions"
        assert mine in [s["session"] for s in alice.get("/v1/sessions").json()["sessions"]]
        # naming alice's session only creates one of bob's own
        assert bob.post("/v1/sessions", json={"session": mine}).json()["session"] == f"bob:{mine}"
        assert alice.get(f"/v1/sessions/{mine}").json()["pending"] is not None, "still waiting on alice"


def test_derived_openai_sessions_cannot_be_computed_or_taken_over() -> None:
    with (
        running(make_app(users=USERS)) as url,
        OpenAI(base_url=f"{url}/v1", api_key=USERS["alice"], max_retries=0, timeout=20) as alice,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {USERS['bob']}"}) as bob,
    ):
        first = [{"role": "user", "content": "how far is Paris?"}]
        reply = alice.chat.completions.with_raw_response.create(model="rules", messages=first)  # type: ignore[arg-type]
        session = reply.headers["x-session-id"]
        assert session.startswith("alice:oa-")
        # the old derivation (sha256 of user and messages) no longer names it
        old = json.dumps(["", [("user", "how far is Paris?")]], ensure_ascii=False)
        assert hashlib.sha256(old.encode()).hexdigest()[:32] not in session
        assert bob.get(f"/v1/sessions/{session}").status_code == 404
        # bob sending the same conversation (with alice's question and an answer) gets his own session
        stolen = [*first, {"role": "assistant", "content": "Where are you?"}, {"role": "user", "content": "Lyon"}]
        his = bob.post("/v1/chat/completions", json={"model": "rules", "messages": stolen})
        assert his.headers["x-session-id"].startswith("bob:")
        # nobody may name a derived session explicitly
        named = bob.post(
            "/v1/chat/completions", json={"model": "rules", "messages": first, "session_id": session.split(":")[1]}
        )
        assert named.status_code == 422
        again = alice.chat.completions.create(model="rules", messages=stolen)  # type: ignore[arg-type]
        assert again.choices[0].message.content == "From Lyon, Paris is 400 km away."


def test_a_lone_surrogate_is_a_4xx_not_a_500() -> None:
    with running(make_app()) as url:
        body = b'{"model": "rules", "messages": [{"role": "user", "content": "hi \\ud800"}]}'
        response = httpx.post(f"{url}/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 422 and "surrogate" in response.text
        session = httpx.post(f"{url}/v1/sessions").json()["session"]
        message = httpx.post(
            f"{url}/v1/sessions/{session}/messages",
            content=b'{"message": "\\udfff"}',
            headers={"Content-Type": "application/json"},
        )
        assert message.status_code == 422


def test_new_sessions_per_client_are_limited() -> None:
    with running(make_app(max_new_sessions=5)) as url:
        statuses = [httpx.post(f"{url}/v1/sessions").status_code for _ in range(7)]
        assert statuses == [201] * 5 + [429] * 2
        limited = httpx.post(f"{url}/v1/sessions")
        assert int(limited.headers["retry-after"]) > 0
        chat = httpx.post(
            f"{url}/v1/chat/completions", json={"model": "rules", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert chat.status_code == 429, "derived sessions count too"


def test_reactchat_serve_with_a_token_file_gives_each_user_their_sessions(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# name token\n" + "".join(f"{n} {t}\n" for n, t in USERS.items()), encoding="utf-8")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REACTCHAT_TOKEN", "REACTCHAT_TOKEN_FILE")}
    command = [sys.executable, "-m", "reactchat.cli", "serve", "--port", str(port), "--db", "memory:"]
    command += ["--model", "scripted:/dev/null", "--token-file", str(tokens)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, "reactchat serve did not start"
                time.sleep(0.1)
        assert httpx.post(f"{url}/v1/sessions").status_code == 401
        made = httpx.post(f"{url}/v1/sessions", headers={"Authorization": f"Bearer {USERS['bob']}"})
        assert made.json()["session"].startswith("bob:")
    finally:
        process.terminate()
        process.wait(10)
