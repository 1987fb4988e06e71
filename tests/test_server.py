"""The HTTP API over a real uvicorn on loopback: sessions, SSE turns, questions, errors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from reactchat.server import serve
from server_support import make_app, parse_sse, running


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running(make_app(max_body=10_000)) as url:
        yield url


@pytest.fixture
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=20) as c:
        yield c


def new_session(client: httpx.Client) -> str:
    response = client.post("/v1/sessions")
    assert response.status_code == 201
    session: str = response.json()["session"]
    return session


def say(client: httpx.Client, session: str, message: str, **extra: object) -> list[tuple[str, dict[str, object]]]:
    response = client.post(f"/v1/sessions/{session}/messages", json={"message": message, **extra})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


def test_a_turn_streams_every_step_then_the_end(client: httpx.Client) -> None:
    session = new_session(client)
    frames = say(client, session, "compute 80.16 * 1.15")
    kinds = [kind for kind, _ in frames]
    assert kinds == ["user", "thought", "action", "observation", "answer", "end"]
    assert frames[2][1]["tool"] == "calculator"
    assert frames[3][1]["text"] == "92.184"
    assert all(data["session"] == session for _, data in frames)
    end = dict(frames[-1][1])
    usage = end.pop("usage")
    assert end == {
        "session": session,
        "turn": 1,
        "status": "done",
        "answer": "92.184",
        "reason": "",
        "question": None,
        "reply_to": None,
        "pending": None,
        "files": [],
    }
    # the turn's two model calls; the rule model reports no usage, so it is estimated
    assert isinstance(usage, dict) and usage["calls"] == 2 and usage["estimated"] is True
    assert usage["input_tokens"] == sum(data["usage"]["input_tokens"] for _, data in frames[:-1] if data.get("usage"))


def test_sse_frames_arrive_while_the_turn_runs(client: httpx.Client) -> None:
    session = new_session(client)
    arrivals: list[tuple[str, float]] = []
    started = time.monotonic()
    with client.stream("POST", f"/v1/sessions/{session}/messages", json={"message": "slow compute 2+2"}) as response:
        for line in response.iter_lines():
            if line.startswith("event: "):
                arrivals.append((line[7:], time.monotonic() - started))
    assert [kind for kind, _ in arrivals] == ["user", "thought", "action", "observation", "answer", "end"]
    thought_at = dict(arrivals)["thought"]
    answer_at = dict(arrivals)["answer"]
    assert answer_at - thought_at > 0.8, "the thought must be sent before the second (1 s) model call ends"


def test_a_streaming_model_s_text_arrives_as_deltas_before_its_step(client: httpx.Client) -> None:
    session = new_session(client)
    frames = say(client, session, "stream compute 2*8")
    kinds = [kind for kind, _ in frames]
    first_thought = kinds.index("thought")
    streamed = "".join(str(data["text"]) for kind, data in frames[:first_thought] if kind == "delta")
    assert streamed == ' Use the calculator.\nAction: calculator\nAction Input: {"expression": "2*8"}'
    assert kinds.count("delta") >= 2, "the words come in several frames"
    assert frames[-1][1]["answer"] == "16"
    stored = client.get(f"/v1/sessions/{session}").json()["turns"][0]["events"]
    assert "delta" not in [e["type"] for e in stored], "deltas are shown, never stored"


def test_a_question_pauses_the_turn_and_the_next_message_answers_it(client: httpx.Client) -> None:
    session = new_session(client)
    frames = say(client, session, "How far is Paris?")
    assert frames[-2][0] == "question"
    end = frames[-1][1]
    assert end["status"] == "waiting"
    assert end["question"] == "Where are you?"
    reply_to = end["reply_to"]

    view = client.get(f"/v1/sessions/{session}").json()
    assert view["status"] == "waiting"
    pending = view["pending"]
    assert (pending["kind"], pending["question"], pending["reply_to"]) == ("question", "Where are you?", reply_to)
    assert (pending["tool"], pending["input"]) == ("ask_user", {"question": "Where are you?"})
    assert end["pending"] == pending

    frames = say(client, session, "Lyon", reply_to=reply_to)
    assert frames[-1][1]["status"] == "done"
    assert frames[-1][1]["answer"] == "From Lyon, Paris is 400 km away."
    assert frames[-1][1]["turn"] == 1, "the answer resumes the same turn"

    again = client.post(f"/v1/sessions/{session}/messages", json={"message": "Lyon", "reply_to": reply_to})
    assert again.status_code == 409
    assert "no longer pending" in again.json()["error"]["message"]

    view = client.get(f"/v1/sessions/{session}").json()
    assert view["status"] == "done"
    assert view["pending"] is None
    assert view["history"] == [["How far is Paris?", "From Lyon, Paris is 400 km away."]]
    kinds = [e["type"] for e in view["turns"][0]["events"]]
    assert kinds == ["user", "thought", "action", "question", "user", "observation", "answer"]


def test_a_message_without_reply_to_also_answers_the_pending_question(client: httpx.Client) -> None:
    session = new_session(client)
    say(client, session, "how far is Paris from here?")
    frames = say(client, session, "Nantes")
    assert frames[-1][1]["answer"] == "From Nantes, Paris is 400 km away."


def test_unknown_sessions_are_404(client: httpx.Client) -> None:
    for response in (
        client.get("/v1/sessions/nope"),
        client.post("/v1/sessions/nope/messages", json={"message": "hi"}),
        client.delete("/v1/sessions/nope/context"),
    ):
        assert response.status_code == 404
        assert "nope" in response.json()["error"]["message"]


def test_a_second_message_while_a_turn_runs_is_409_and_loses_nothing(base: str, client: httpx.Client) -> None:
    session = new_session(client)
    with client.stream(
        "POST", f"/v1/sessions/{session}/messages", json={"message": "slow compute 3*3"}
    ) as running_turn:
        lines = running_turn.iter_lines()
        assert [next(lines), next(lines)] == ["id: 1", "event: user"]  # the first event of the session
        busy = httpx.post(f"{base}/v1/sessions/{session}/messages", json={"message": "hello"}, timeout=10)
        assert busy.status_code == 409
        assert "busy" in busy.json()["error"]["message"]
        assert client.get(f"/v1/sessions/{session}").json()["status"] == "running"
        rest = "\n".join(lines)
    assert '"answer": "9"' in rest
    view = client.get(f"/v1/sessions/{session}").json()
    assert [t["question"] for t in view["turns"]] == ["slow compute 3*3"]


def test_a_turn_outlives_a_client_that_disconnects(client: httpx.Client) -> None:
    session = new_session(client)
    with client.stream("POST", f"/v1/sessions/{session}/messages", json={"message": "slow compute 5*5"}) as response:
        lines = response.iter_lines()
        assert [next(lines), next(lines)] == ["id: 1", "event: user"]
    deadline = time.monotonic() + 10
    while (view := client.get(f"/v1/sessions/{session}").json())["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert view["status"] == "done"
    assert view["turns"][0]["answer"] == "25"


def test_stream_false_answers_with_json(client: httpx.Client) -> None:
    session = new_session(client)
    response = client.post(f"/v1/sessions/{session}/messages", json={"message": "compute 6*7", "stream": False})
    body = response.json()
    assert body["status"] == "done"
    assert body["answer"] == "42"
    assert [e["type"] for e in body["events"]] == ["user", "thought", "action", "observation", "answer"]


def test_a_model_failure_ends_the_stream_with_an_error(client: httpx.Client) -> None:
    session = new_session(client)
    frames = say(client, session, "please fail")
    assert frames[-2][0] == "error"
    assert "told to fail" in str(frames[-2][1]["message"])
    assert frames[-1][1]["status"] == "interrupted"
    assert client.get(f"/v1/sessions/{session}").json()["status"] == "interrupted"


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        (b"{not json", 400, "the body is not valid JSON (Expecting property name"),
        (b"", 422, "the request needs a JSON body"),
        (b"[1, 2]", 422, "valid dictionary"),
        (b'{"text": "hi"}', 422, "message: Field required"),
        (b'{"message": ""}', 422, "message: String should have at least 1 character"),
        (b'{"message": "hi", "colour": 1}', 422, "colour: Extra inputs are not permitted"),
    ],
)
def test_bad_bodies_get_a_clear_error(client: httpx.Client, body: bytes, status: int, expected: str) -> None:
    session = new_session(client)
    response = client.post(
        f"/v1/sessions/{session}/messages", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == status
    assert expected in response.json()["error"]["message"]
    assert client.get(f"/v1/sessions/{session}").json()["turns"] == []


def test_bodies_over_the_limit_are_413_with_or_without_a_length(client: httpx.Client) -> None:
    session = new_session(client)
    big = b'{"message": "' + b"x" * 20_000 + b'"}'
    response = client.post(f"/v1/sessions/{session}/messages", content=big)
    assert response.status_code == 413
    assert "10000 bytes" in response.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    response = client.post(
        f"/v1/sessions/{session}/messages", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert client.get(f"/v1/sessions/{session}").json()["turns"] == []


def test_a_named_session_is_created_once(client: httpx.Client) -> None:
    first = client.post("/v1/sessions", json={"session": "my-chat-1"})
    assert first.json() == {"session": "my-chat-1", "created": True}
    again = client.post("/v1/sessions", json={"session": "my-chat-1"})
    assert again.status_code == 201
    assert again.json() == {"session": "my-chat-1", "created": False}
    bad = client.post("/v1/sessions", json={"session": "../etc"})
    assert bad.status_code == 422


def test_the_token_guards_the_api_but_not_the_page() -> None:
    with running(make_app(token="s3cret")) as url:
        assert httpx.post(f"{url}/v1/sessions").status_code == 401
        wrong = httpx.post(f"{url}/v1/sessions", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert "bearer token" in wrong.json()["error"]["message"]
        ok = httpx.post(f"{url}/v1/sessions", headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 201
        assert httpx.get(f"{url}/").status_code == 200
        assert httpx.get(f"{url}/v1/models").status_code == 401


async def test_the_token_cannot_be_bypassed_through_a_root_path() -> None:
    # behind a proxy (uvicorn --root-path /api) /api/v1/... reaches the /v1/ routes
    transport = httpx.ASGITransport(app=make_app(token="s3cret"), root_path="/api")
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for path in ("/api/v1/sessions", "/api/v1/chat/completions"):
            assert (await client.post(path, json={})).status_code == 401
        assert (await client.get("/api/v1/models")).status_code == 401
        assert (await client.get("/api/docs")).status_code == 401


def test_serve_refuses_a_public_host_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTCHAT_TOKEN", raising=False)
    with pytest.raises(ValueError, match="REACTCHAT_TOKEN"):
        serve(host="0.0.0.0", port=1, db="memory:", model="local", token=None)


def test_an_unreachable_store_is_a_clear_503() -> None:
    with running(make_app(store="postgresql://postgres@127.0.0.1:1/nowhere")) as url:
        response = httpx.post(f"{url}/v1/sessions", timeout=20)
        assert response.status_code == 503
        assert "cannot connect to PostgreSQL" in response.json()["error"]["message"]
