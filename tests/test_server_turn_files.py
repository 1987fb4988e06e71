"""The files a turn's ``end`` frame lists: read again only when the turn may have changed them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reactchat import Agent, RunContext, tool
from reactchat.server import ServerConfig, create_app
from server_support import RuleModel, make_app, parse_sse

NOTES = b"# Trip notes\n\nThe rose costs 80.16 euros at the florist on Rue Lepic.\n"


@tool(name="calculator")
async def noting_calculator(expression: str, ctx: RunContext) -> str:
    """Compute, and keep a note of it among the session's files (as the fetch tool keeps pages)."""
    kb = ctx.services["knowledge"]
    await kb.add_file(ctx.session, "note.md", f"# Note\n\n{expression} was asked.\n".encode())
    return str(eval(expression, {"__builtins__": {}}))  # the test's own arithmetic: "2+2"


@pytest.fixture
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    """A client of the app in this process, and the sessions whose files the knowledge base read;
    with ``noting``, the turn's calculator itself adds a file to the session."""
    store = f"sqlite:///{tmp_path / 'files.db'}"
    kind = getattr(request, "param", "plain")
    if kind == "plain":
        app = make_app(store=store)
    else:
        tools = [noting_calculator]
        app = create_app(lambda s: Agent(model=RuleModel(), tools=tools, store=s), config=ServerConfig(store=store))
    kb = app.state.server.files.kb
    reads: list[str] = []
    files = kb.files

    async def counted(session: str) -> Any:
        reads.append(session)
        return await files(session)

    kb.files = counted
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
    client.kind = kind  # type: ignore[attr-defined]
    async with app.router.lifespan_context(app), client:
        yield client, reads


async def turn(client: httpx.AsyncClient, session: str, message: str) -> dict[str, Any]:
    reply = await client.post(f"/v1/sessions/{session}/messages", json={"message": message}, timeout=20)
    kind, end = parse_sse(reply.text)[-1]
    assert kind == "end" and end["status"] == "done", reply.text
    return end


@pytest.mark.parametrize("served", ["plain", "noting"], indirect=True)
async def test_a_turn_without_files_ends_without_a_second_look(served: tuple[httpx.AsyncClient, list[str]]) -> None:
    client, reads = served
    session = (await client.post("/v1/sessions")).json()["session"]
    end = await turn(client, session, "compute 1+1")
    if client.kind == "plain":  # type: ignore[attr-defined]
        assert end["files"] == []
        assert reads == [session], "one look, when the turn chose its tools; none for the end frame"
    else:  # the turn added a file itself: the end frame looks again and lists it
        assert [f["name"] for f in end["files"]] == ["note.md"]


async def test_a_file_uploaded_during_a_turn_is_in_its_end_frame(served: tuple[httpx.AsyncClient, list[str]]) -> None:
    client, reads = served
    session = (await client.post("/v1/sessions")).json()["session"]
    running = asyncio.create_task(turn(client, session, "slow compute 2+2"))  # a second per step
    while not reads:  # the turn has looked at its files (none yet)
        await asyncio.sleep(0.01)
    uploaded = await client.post(f"/v1/sessions/{session}/files", files={"file": ("notes.md", NOTES)})
    assert uploaded.status_code == 201, uploaded.text
    assert not running.done(), "the upload must land while the turn runs"
    end = await running
    assert end["answer"] == "4"
    assert [f["name"] for f in end["files"]] == ["notes.md"]
    left = end["files"][0]["rounds_left"]

    end = await turn(client, session, "compute 3+3")  # that turn had the file: its end reads it again
    assert [(f["name"], f["rounds_left"]) for f in end["files"]] == [("notes.md", left - 1)]
