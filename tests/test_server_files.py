"""Uploaded files over HTTP: upload, rounds left, search by the agent, clear, rejections."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server_support import make_app, parse_sse, running

NOTES = b"# Trip notes\n\nThe rose costs 80.16 euros at the florist on Rue Lepic.\n\nThe train leaves at 9:12.\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db: Path = tmp_path_factory.mktemp("files") / "files.db"
    with running(make_app(store=f"sqlite:///{db}", max_upload=50_000)) as url:
        yield url


@pytest.fixture
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=20) as c:
        yield c


@pytest.fixture
def session(client: httpx.Client) -> str:
    value: str = client.post("/v1/sessions").json()["session"]
    return value


def upload(client: httpx.Client, session: str, name: str, data: bytes, **form: str) -> httpx.Response:
    return client.post(f"/v1/sessions/{session}/files", files={"file": (name, data)}, data=form)


def test_an_uploaded_file_is_searched_and_counts_down_its_rounds(client: httpx.Client, session: str) -> None:
    response = upload(client, session, "notes.md", NOTES, retention="2")
    assert response.status_code == 201, response.text
    info = response.json()["file"]
    assert (info["name"], info["size"], info["rounds_left"]) == ("notes.md", len(NOTES), 2)
    assert info["chunks"] >= 1

    reply = client.post(f"/v1/sessions/{session}/messages", json={"message": "files: rose florist"})
    frames = parse_sse(reply.text)
    action = next(data for kind, data in frames if kind == "action")
    assert action["tool"] == "search_files"
    end = frames[-1][1]
    assert "80.16 euros" in str(end["answer"])
    assert [(f["name"], f["rounds_left"]) for f in end["files"]] == [("notes.md", 1)]

    client.post(f"/v1/sessions/{session}/messages", json={"message": "compute 1+1"})
    view = client.get(f"/v1/sessions/{session}").json()
    assert view["files"] == [], "the file is gone once its rounds are used up"


def test_clearing_the_context_forgets_the_files(client: httpx.Client, session: str) -> None:
    assert upload(client, session, "notes.txt", NOTES).status_code == 201
    assert [f["name"] for f in client.get(f"/v1/sessions/{session}").json()["files"]] == ["notes.txt"]
    cleared = client.delete(f"/v1/sessions/{session}/context")
    assert cleared.status_code == 200
    assert cleared.json()["files"] == []
    assert client.get(f"/v1/sessions/{session}").json()["files"] == []


@pytest.mark.parametrize(
    ("name", "data", "status", "message"),
    [
        ("empty.txt", b"", 400, "empty"),
        ("blob.bin", bytes(range(256)) * 4, 415, "supported"),
        ("../escape.txt", b"hello", 400, "plain name"),
        ("big.txt", b"x" * 60_000, 413, "limit"),
    ],
)
def test_bad_uploads_get_a_clear_error_and_store_nothing(
    client: httpx.Client, session: str, name: str, data: bytes, status: int, message: str
) -> None:
    response = upload(client, session, name, data)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]["message"]
    assert client.get(f"/v1/sessions/{session}").json()["files"] == []


def test_uploads_to_unknown_sessions_are_404(client: httpx.Client) -> None:
    assert upload(client, "missing", "notes.txt", NOTES).status_code == 404


def test_an_upload_can_stream_its_indexing_progress(client: httpx.Client, session: str) -> None:
    response = client.post(
        f"/v1/sessions/{session}/files",
        files={"file": ("notes.md", NOTES * 50)},
        headers={"Accept": "text/event-stream"},
    )
    frames = parse_sse(response.text)
    progress = [data for kind, data in frames if kind == "progress"]
    assert progress, "at least one progress event"
    assert progress[-1]["done"] == progress[-1]["total"]
    assert frames[-1][0] == "file"
    assert frames[-1][1]["file"]["name"] == "notes.md"

    rejected = parse_sse(
        client.post(
            f"/v1/sessions/{session}/files",
            files={"file": ("blob.bin", bytes(range(256)) * 4)},
            headers={"Accept": "text/event-stream"},
        ).text
    )
    assert rejected[-1][0] == "error"
    assert rejected[-1][1]["status"] == 415
    assert "supported" in str(rejected[-1][1]["message"])
