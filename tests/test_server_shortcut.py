"""``POST /v1/sessions/{id}/messages`` takes a short way past FastAPI's per-request
machinery (``server/_lean.py``): the plain case answers as FastAPI's handler does, and
everything else is FastAPI's handler's answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from fastapi.routing import APIRoute

from reactchat.server._lean import Shortcut
from server_support import make_app

PATH = "/v1/sessions/{session}/messages"

#: (body, content type): requests FastAPI's handler answers (bad ones, and ones not plainly JSON)
FASTAPI_ANSWERS: list[tuple[bytes, str | None]] = [
    (b'{"message": "hi"', "application/json"),  # not JSON: 400
    (b"", "application/json"),  # no body
    (b'{"message": "2+2", "stream": false}', None),  # no content type: not read as JSON
    (b'{"message": "2+2", "stream": false}', "text/plain"),
    (b'{"message": "2+2", "stream": false}', "application/a/b+json"),  # not a media type FastAPI reads as JSON
    (b'{"message": ""}', "application/json"),
    (b'{"message": "hi", "extra": 1}', "application/json"),
    (b'{"message": "\\ud800"}', "application/json"),  # a lone surrogate
    (b'{"message": "hi", "stream": "false"}', "application/json"),
    (b'"just a string"', "application/json"),
    (b"[" * 100_000, "application/json"),  # too deep for the JSON parser
]
#: requests the short way answers
SHORT_ANSWERS: list[tuple[bytes, str | None]] = [
    (b'{"message": "compute 2+2", "stream": false}', "application/json"),
    (b'{"message": "compute 2+2", "stream": false}', "Application/JSON; charset=utf-8"),
    (b'{"message": "compute 2+2", "stream": false}', "application/merge-patch+json"),
    ('{"message": "compute 2+2", "stream": false}'.encode("utf-16"), "application/json"),
    (b'{"message": "compute 2+2"}', "application/json"),  # SSE
]


def route_of(app: Any) -> APIRoute:
    (route,) = [r for r in app.router.routes if isinstance(r, APIRoute) and r.path == PATH]
    return route


def without_shortcut(app: Any) -> Any:
    assert any(m.cls is Shortcut for m in app.user_middleware)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not Shortcut]
    return app


def counting(app: Any) -> list[str]:
    """The requests that reach FastAPI's own handler of the route."""
    route, calls = route_of(app), []
    handler = route.app

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        await handler(scope, receive, send)

    route.app = counted
    return calls


async def answers(app: Any, requests: list[tuple[bytes, str | None]], session: str = "s1") -> list[tuple[int, Any]]:
    transport = httpx.ASGITransport(app=app)
    found: list[tuple[int, Any]] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.post("/v1/sessions", json={"session": "s1"})).status_code == 201
        for body, kind in requests:
            headers = {"content-type": kind} if kind is not None else {}
            response = await client.post(f"/v1/sessions/{session}/messages", content=body, headers=headers)
            found.append((response.status_code, comparable(response)))
    return found


def comparable(response: httpx.Response) -> Any:
    """The answer without what differs between two runs of a turn (times, ids)."""
    if response.headers["content-type"].startswith("text/event-stream"):
        return [line for line in response.text.splitlines() if line.startswith("event: ")]
    data = response.json()
    data.pop("usage", None)  # holds the seconds the model took
    if "events" in data:
        data["events"] = [(e["type"], e.get("text")) for e in data["events"]]
    return data


def test_requests_fastapi_must_answer_get_fastapis_answer() -> None:
    short, plain = make_app(), without_shortcut(make_app())
    calls = counting(short)
    got = asyncio.run(answers(short, FASTAPI_ANSWERS))
    assert got == asyncio.run(answers(plain, FASTAPI_ANSWERS))
    assert len(calls) == len(FASTAPI_ANSWERS)
    assert {status for status, _ in got} == {400, 422}


def test_plain_json_takes_the_short_way_with_the_same_answers() -> None:
    short, plain = make_app(), without_shortcut(make_app())
    calls, plain_calls = counting(short), counting(plain)
    got = asyncio.run(answers(short, SHORT_ANSWERS))
    assert got == asyncio.run(answers(plain, SHORT_ANSWERS))
    assert [status for status, _ in got] == [200] * len(SHORT_ANSWERS)
    assert got[0][1]["answer"] == "4" and got[-1][1][-1] == "event: end"
    assert calls == [] and len(plain_calls) == len(SHORT_ANSWERS)


def test_an_unknown_session_is_the_same_404_either_way() -> None:
    request: list[tuple[bytes, str | None]] = [(json.dumps({"message": "hi"}).encode(), "application/json")]
    short = make_app()
    calls = counting(short)
    got = asyncio.run(answers(short, request, session="nobody"))
    assert got == asyncio.run(answers(without_shortcut(make_app()), request, session="nobody"))
    assert got[0][0] == 404 and calls == []


def test_a_request_opentelemetry_traces_goes_through_fastapi() -> None:
    """FastAPI's spans (dependencies, validation) stay whole for whoever configures OpenTelemetry."""
    app = make_app()
    (middleware,) = [m for m in app.user_middleware if m.cls is Shortcut]
    passed: list[dict[str, Any]] = []

    async def rest_of_fastapi(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope)

    shortcut = Shortcut(rest_of_fastapi, **middleware.kwargs)
    body = {"type": "http.request", "body": b'{"message": "compute 2+2"}', "more_body": False}
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/sessions/s1/messages",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
    }

    async def receive() -> dict[str, Any]:
        return body

    async def send(message: Any) -> None:
        raise AssertionError("the short way answered a traced request")

    asyncio.run(shortcut({**scope, "fastapi.telemetry": object()}, receive, send))
    assert len(passed) == 1
