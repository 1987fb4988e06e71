"""``fetch_url`` extracts a page's main text in the knowledge base's parser processes, under
their CPU and memory limits: a hostile page (megabytes of tiny elements, which cost
trafilatura a minute of CPU and gigabytes in the process that runs it) is refused while
the server keeps answering other sessions and stays small. A page's URL is stored with it:
the same URL fetched again replaces its copy instead of counting twice against
``max_files``."""

from __future__ import annotations

import re
import resource
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from reactchat.knowledge import FileRejected, KnowledgeBase, Limits
from reactchat.toolbox import FetchPolicy, FetchRefused, read_link
from server_support import parse_sse, start_worker

pytestmark = pytest.mark.slow  # the parser processes the knowledge base starts, up to their limits

#: about 9 MB of markup: 300,000 small paragraphs
HOSTILE = (
    b"<!DOCTYPE html><html><head><title>Many</title></head><body>"
    + (b"<p><b>rose</b> <i>tulip</i></p>" * 300_000)
    + b"</body></html>"
)

PAGES = {
    "/hostile": HOSTILE,
    "/roses": b"<!DOCTYPE html><html><head><title>Roses</title></head><body><article><h1>Roses</h1>"
    b"<p>A dozen red roses costs 80.16 dollars on average this spring, according to the florists' survey"
    b" of four hundred shops in twelve cities across the country.</p></article></body></html>",
    "/tulips": b"<!DOCTYPE html><html><head><title>Tulips</title></head><body><article><h1>Tulips</h1>"
    b"<p>Tulip bulbs cost three dollars each at the spring market, and they flower in April in most"
    b" gardens of the northern half of the country.</p></article></body></html>",
}
LOCAL = FetchPolicy(allow=["127.0.0.1"])


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """A local web site with the pages of ``PAGES``; its base URL. ``/roses?v=2`` changes the text."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            body = PAGES.get(path, b"")
            if query:
                body = body.replace(b"80.16", b"92.18")
            self.send_response(200 if body else 404)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def test_a_hostile_page_is_refused_by_the_parser_limits_not_read_here(site: str) -> None:
    # memory enough for the whole tree (~1.7 GB): the time limit is the one it reaches
    kb = KnowledgeBase(limits=Limits(seconds=2, memory=4 << 30))
    before = peak_rss_mb()
    try:
        with pytest.raises(FetchRefused, match=r"/hostile: reading it took more than 2 s"):
            await read_link(kb, "s1", f"{site}/hostile", LOCAL)
        assert peak_rss_mb() - before < 150  # the page's ~10 MB was held, never its tree
        assert await kb.files("s1") == []
        info, beginning = await read_link(kb, "s1", f"{site}/roses", LOCAL)  # the pool goes on
        assert info.name == "Roses (127.0.0.1).md" and "80.16 dollars" in beginning
    finally:
        await kb.close()


async def test_a_page_that_fills_the_parsers_memory_is_refused_for_that(site: str) -> None:
    kb = KnowledgeBase(limits=Limits(seconds=60, memory=400 << 20))
    try:
        with pytest.raises(FetchRefused, match=r"/hostile: reading it took more than the parser's 400 MB of memory"):
            await read_link(kb, "s1", f"{site}/hostile", LOCAL)
        info, _ = await read_link(kb, "s1", f"{site}/roses", LOCAL)  # a fresh parser took its place
        assert info.name == "Roses (127.0.0.1).md"
    finally:
        await kb.close()


async def test_the_same_url_fetched_again_replaces_its_copy(store_url: str, site: str) -> None:
    kb = KnowledgeBase(store_url, max_files=2)
    try:
        first, _ = await read_link(kb, "s1", f"{site}/roses", LOCAL)
        assert first.source == f"{site}/roses"
        await kb.add_file("s1", "notes.txt", b"Orchids need indirect light.")  # the session is full now
        with pytest.raises(FileRejected) as refused:  # another URL would be a third file
            await read_link(kb, "s1", f"{site}/roses?v=2", LOCAL)
        assert refused.value.reason == "full"
        second, beginning = await read_link(kb, "s1", f"{site}/roses", LOCAL)  # the same URL replaces its copy
        assert "80.16 dollars" in beginning
        files = await kb.files("s1")
        assert sorted(f.name for f in files) == ["Roses (127.0.0.1).md", "notes.txt"]
        assert second.id != first.id and [f.id for f in files if f.source] == [second.id]
        hits = await kb.search("s1", "roses dozen dollars")
        assert len([h for h in hits if h.name.startswith("Roses")]) == 1  # one copy's passages, not two
        other, _ = await read_link(kb, "s2", f"{site}/roses", LOCAL)  # another session keeps its own
        assert [f.id for f in await kb.files("s1") if f.source] == [second.id]
        assert other.id != second.id
    finally:
        await kb.close()


def test_a_server_reading_a_hostile_link_keeps_answering_and_stays_small(
    sqlite_url: str, site: str, tmp_path: Path
) -> None:
    process, url = start_worker(
        sqlite_url, tmp_path / "worker.log", "server_support:fetch_app_from_env", REACTCHAT_PARSE_SECONDS="3"
    )
    try:
        hostile, calm = (httpx.post(f"{url}/v1/sessions").json()["session"] for _ in range(2))
        frames: list[tuple[str, dict[str, Any]]] = []

        def send_link() -> None:
            message = {"message": f"What does {site}/hostile say?"}
            with httpx.stream("POST", f"{url}/v1/sessions/{hostile}/messages", json=message, timeout=120) as r:
                frames.extend(parse_sse(r.read().decode()))

        reader = threading.Thread(target=send_link)
        reader.start()
        waits = []
        while reader.is_alive() or len(waits) < 3:  # the other session, while the link is read
            start = time.monotonic()
            n = len(waits)
            answer = httpx.post(f"{url}/v1/sessions/{calm}/messages", json={"message": f"compute 2+{n}"}, timeout=30)
            waits.append(time.monotonic() - start)
            assert parse_sse(answer.text)[-1][1]["answer"] == str(2 + n), answer.text
            reader.join(0.2)
        assert max(waits) < 5.0, waits  # it never waited for the page (generous: a loaded machine)
        assert frames[-1][0] == "end" and frames[-1][1]["status"] == "done"  # the turn went on without it
        assert httpx.get(f"{url}/v1/sessions/{hostile}").json()["files"] == []
        status = Path(f"/proc/{process.pid}/status").read_text()
        peak = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024
        assert peak < 500, f"the server process peaked at {peak:.0f} MB"  # trafilatura in it takes ~1.7 GB
        # logged, refused by whichever limit it reached first: the 3 s, or the parser's memory
        log = (tmp_path / "worker.log").read_text()
        assert re.search(r"/hostile: reading it took more than (3 s|the parser's \d+ MB of memory);", log), log
    finally:
        process.terminate()
        process.wait(10)
