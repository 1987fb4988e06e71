"""The files a turn's ``end`` frame lists: read again only when the turn may have changed them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_support import make_app, parse_sse

NOTES = b"# Trip notes\n\nThe rose costs 80.16 euros at the florist on Rue Lepic.\n"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    """A client of the app in this process, and the sessions whose files the knowledge base read."""
    app = make_app(store=f"sqlite:///{tmp_path / 'files.db'}")
    kb = app.state.server.files.kb
    reads: list[str] = []
    files = kb.files

    async def counted(session: str) -> Any:
        reads.append(session)
        return await files(session)

    kb.files = counted
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
    async with app.router.lifespan_context(app), client:
        yield client, reads


async def turn(client: httpx.AsyncClient, session: str, message: str) -> dict[str, Any]:
    reply = await client.post(f"/v1/sessions/{session}/messages", json={"message": message}, timeout=20)
    kind, end = parse_sse(reply.text)[-1]
    assert kind == "end" and end["status"] == "done", reply.text
    return end


async def test_a_turn_without_files_ends_without_a_second_look(served: tuple[httpx.AsyncClient, list[str]]) -> None:
    client, reads = served
    session = (await client.post("/v1/sessions")).json()["session"]
    end = await turn(client, session, "compute 1+1")
    assert end["files"] == []
    assert reads == [session], "one look, when the turn chose its tools; none for the end frame"


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
