"""Hostile uploads against a real server process: each is refused quickly with a
clear 4xx, stores nothing, keeps the server's memory bounded and leaves another session
answering within a second while it runs. The files are generated here (``attack_files``).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from attack_support import Served, Watch, serve
from reactchat.knowledge import FileRejected, KnowledgeBase

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import attack_files

MB = 2**20
#: the server process itself: its baseline (~100 MB) plus the uploads it holds
SERVER_BOUND = 400 * MB
#: the parser processes: each is capped at 1 GiB of address space
PARSERS_BOUND = 2 * 1100 * MB


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with the default limits."""
    with serve(tmp_path_factory.mktemp("attacks"), max_upload=25_000_000) as running:
        yield running


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose parsers may use 3 s of CPU per file (the default is 60)."""
    with serve(tmp_path_factory.mktemp("tight"), file_limits={"seconds": 3}) as running:
        yield running


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attack-files")


def attack(served: Served, name: str, data: bytes) -> tuple[httpx.Response, float, Watch]:
    """Upload ``data`` to a new session while the watch runs; checks that nothing was stored."""
    with httpx.Client(base_url=served.url, timeout=60) as client, Watch(served) as watch:
        session = client.post("/v1/sessions").json()["session"]
        start = time.perf_counter()
        response = client.post(f"/v1/sessions/{session}/files", files={"file": (name, data)})
        elapsed = time.perf_counter() - start
        time.sleep(0.3)
        assert client.get(f"/v1/sessions/{session}").json()["files"] == [], "nothing is half-stored"
    watch.assert_responsive()
    assert watch.peak_server < SERVER_BOUND, f"server peaked at {watch.peak_server / MB:.0f} MB"
    assert watch.peak_children < PARSERS_BOUND, f"parsers peaked at {watch.peak_children / MB:.0f} MB"
    return response, elapsed, watch


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("many.docx", attack_files.many_paragraphs_docx, "paragraphs"),
        ("empty.docx", attack_files.empty_paragraphs_docx, "paragraphs"),
        ("pages.pdf", attack_files.shared_stream_pdf, "pages"),
        ("data.json", attack_files.json_array, "rows"),
        ("rows.csv", attack_files.csv_rows, "rows"),
    ],
)
def test_a_file_over_a_content_limit_is_refused_at_once(
    served: Served, files: Path, name: str, make: Callable[[Path], Path], message: str
) -> None:
    data = make(files / name).read_bytes()
    response, elapsed, _ = attack(served, name, data)
    assert response.status_code == 413, response.text
    assert message in response.json()["error"]["message"]
    assert elapsed < 60, f"refused after {elapsed:.1f} s"


def test_a_pdf_that_is_slow_to_read_is_stopped_by_the_cpu_limit(tight: Served, files: Path) -> None:
    data = attack_files.shared_stream_pdf(files / "slow.pdf", pages=400, draws=20_000).read_bytes()
    response, elapsed, _ = attack(tight, "slow.pdf", data)
    assert response.status_code == 413, response.text
    assert "took more than 3 s" in response.json()["error"]["message"]
    assert elapsed < 20


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("records.csv", attack_files.csv_records),
        ("prose.txt", attack_files.text_paragraphs),
        ("records.json", attack_files.json_records),
        ("lines.txt", attack_files.text_lines),
    ],
)
def test_large_files_are_read_in_memory_bounded_by_their_size(
    served: Served, files: Path, name: str, make: Callable[[Path, int], Path]
) -> None:
    data = make(files / name, 8_000_000).read_bytes()
    with httpx.Client(base_url=served.url, timeout=60) as client, Watch(served) as watch:
        session = client.post("/v1/sessions").json()["session"]
        response = client.post(f"/v1/sessions/{session}/files", files={"file": (name, data)})
        assert response.status_code == 201, response.text
        assert response.json()["file"]["chunks"] > 500
    watch.assert_responsive()
    assert watch.peak_server < SERVER_BOUND
    # a parser process starts at ~40 MB; reading adds a small multiple of the file
    assert watch.peak_child < 100 * MB + 10 * len(data), f"a parser peaked at {watch.peak_child / MB:.0f} MB"


def test_concurrent_uploads_are_limited_per_session_and_per_server(tight: Served, files: Path) -> None:
    served = tight
    slow = attack_files.shared_stream_pdf(files / "slow2.pdf", pages=400, draws=20_000).read_bytes()
    statuses: list[int] = []
    with httpx.Client(base_url=served.url, timeout=60) as client:
        sessions = [client.post("/v1/sessions").json()["session"] for _ in range(6)]

        def upload(session: str) -> None:
            with httpx.Client(base_url=served.url, timeout=60) as own:
                reply = own.post(f"/v1/sessions/{session}/files", files={"file": ("slow.pdf", slow)})
                statuses.append(reply.status_code)

        threads = [threading.Thread(target=upload, args=(s,)) for s in [sessions[0], *sessions]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    # 7 uploads at once: one session's second upload and everything past 4 at a time are 429
    assert statuses.count(429) >= 3, statuses
    assert set(statuses) <= {413, 429}, statuses


def test_a_second_file_part_and_unsafe_names_are_refused(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=20) as client:
        session = client.post("/v1/sessions").json()["session"]
        two = client.post(
            f"/v1/sessions/{session}/files", files=[("file", ("a.txt", b"first")), ("file", ("b.txt", b"second"))]
        )
        assert two.status_code == 400 and "one file" in two.json()["error"]["message"]
        for name in ("invoice\u202etxt.exe", "a\u2028b.txt", "rtl\u2067.txt"):
            reply = client.post(f"/v1/sessions/{session}/files", files={"file": (name, b"hello")})
            assert reply.status_code == 400, (name, reply.text)
        assert client.get(f"/v1/sessions/{session}").json()["files"] == []


async def test_max_files_holds_under_concurrent_uploads(durable_url: str) -> None:
    kb = KnowledgeBase(durable_url, max_files=20)
    try:
        for n in range(18):
            await kb.add_file("s1", f"old{n}.txt", f"note number {n}".encode())
        results = await asyncio.gather(
            *(kb.add_file("s1", f"new{n}.txt", f"fresh note {n}".encode()) for n in range(12)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, FileRejected)]
        assert len(await kb.files("s1")) == 20
        assert len(refused) == 10 and all(r.reason == "full" for r in refused)
    finally:
        await kb.close()
