"""Chat with a link: fetching pages into the knowledge base, and what is refused.

Pages come from a local HTTP server, reached through the allow-list (``127.0.0.1``);
every refusal is checked without it, or with an address the allow-list does not cover.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.knowledge import KnowledgeBase, attach
from reactchat.toolbox import (
    FetchPolicy,
    FetchRefused,
    fetch,
    fetch_url_tool,
    links_in,
    read_link,
    read_links_in_messages,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from tinypdf import make_pdf

ARTICLE = b"""<!DOCTYPE html><html><head><title>Rose prices in 2026</title></head><body>
<nav><a href="/">Home</a> | <a href="/shop">Shop</a> | <a href="/login">Log in</a></nav>
<article>
<h1>Rose prices in 2026</h1>
<p>A dozen red roses costs 80.16 dollars on average this spring, according to the florists' union survey
of four hundred shops in twelve cities.</p>
<h2>Why February is dearer</h2>
<p>Demand doubles in the week before Valentine's day, and growers ship by air, which adds a third to the price
of every stem that reaches the shops in time.</p>
</article>
<footer>Copyright 2026 Flower News. Cookie settings. Subscribe to our newsletter.</footer>
</body></html>"""

Route = Callable[[BaseHTTPRequestHandler], None]


def _send(handler: BaseHTTPRequestHandler, body: bytes, kind: str, status: int = 200) -> None:
    handler.send_response(status)
    handler.send_header("content-type", kind)
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _huge(handler: BaseHTTPRequestHandler) -> None:
    """50 MB of text, without a content-length: the limit must count what arrives."""
    handler.send_response(200)
    handler.send_header("content-type", "text/plain")
    handler.send_header("connection", "close")
    handler.end_headers()
    block = b"x" * 65536
    try:
        for _ in range(50 * 16):
            handler.wfile.write(block)
    except OSError:
        pass  # the client gave up, as it should


def _slow(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/plain")
    handler.send_header("content-length", "100")
    handler.end_headers()
    try:
        for _ in range(100):
            handler.wfile.write(b"x")
            handler.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass


def _redirect(to: str) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("location", to)
        handler.send_header("content-length", "0")
        handler.end_headers()

    return route


ROUTES: dict[str, Route] = {
    "/roses": lambda h: _send(h, ARTICLE, "text/html; charset=utf-8"),
    "/report.pdf": lambda h: _send(
        h, make_pdf([["Tulip bulbs cost 3 dollars each."], ["Quokkas live on Rottnest Island."]]), "application/pdf"
    ),
    "/notes.txt": lambda h: _send(h, b"Orchids need indirect light.\n\nWater them weekly.\n", "text/plain"),
    "/image.png": lambda h: _send(h, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png"),
    "/huge": _huge,
    "/slow": _slow,
    "/to-private": _redirect("http://10.0.0.1/admin"),
    "/to-metadata": _redirect("http://169.254.169.254/latest/meta-data/"),
    "/to-file": _redirect("file:///etc/passwd"),
    "/to-roses": _redirect("/roses"),
    "/missing": lambda h: _send(h, b"not here", "text/plain", 404),
}


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """A local web site on 127.0.0.1; its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            ROUTES.get(self.path, lambda h: _send(h, b"no such page", "text/plain", 404))(self)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that gave up on a refused body

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


LOCAL = FetchPolicy(allow=["127.0.0.1"])


# ------------------------------------------------------------------ what is read


async def test_a_page_becomes_its_main_text(site: str) -> None:
    kb = KnowledgeBase()
    info, beginning = await read_link(kb, "s1", f"{site}/roses", LOCAL)
    assert info.name == "Rose prices in 2026 (127.0.0.1).md" and info.kind == "markdown"
    assert "80.16 dollars" in beginning and "Valentine" in beginning
    assert "Cookie settings" not in beginning and "Log in" not in beginning  # boilerplate dropped
    hits = await kb.search("s1", "why is February dearer")
    assert hits and hits[0].heading.endswith("Why February is dearer")
    await kb.close()


async def test_pdf_and_text_go_through_the_knowledge_base_readers(site: str) -> None:
    kb = KnowledgeBase()
    pdf, beginning = await read_link(kb, "s1", f"{site}/report.pdf", LOCAL)
    assert (pdf.kind, pdf.pages, beginning) == ("pdf", 2, "")
    assert (await kb.search("s1", "quokkas"))[0].page == 2
    text, beginning = await read_link(kb, "s1", f"{site}/notes.txt", LOCAL)
    assert text.kind == "text" and beginning.startswith("Orchids need indirect light.")
    await kb.close()


async def test_redirects_within_the_allow_list_are_followed(site: str) -> None:
    page = await fetch(f"{site}/to-roses", LOCAL)
    assert page.url == f"{site}/roses" and page.content_type == "text/html"


async def test_what_is_not_a_document_is_refused(site: str) -> None:
    kb = KnowledgeBase()
    with pytest.raises(FetchRefused, match="image/png, not a page"):
        await read_link(kb, "s1", f"{site}/image.png", LOCAL)
    with pytest.raises(FetchRefused, match="HTTP 404"):
        await fetch(f"{site}/missing", LOCAL)
    assert await kb.files("s1") == []
    await kb.close()


# ---------------------------------------------------------------- what is refused


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:9/", "127.0.0.1, a loopback address"),
        ("http://localhost:9/", "a loopback address"),
        ("http://[::1]:9/", "a loopback address"),
        ("http://[::ffff:127.0.0.1]:9/", "a loopback address"),
        ("http://2130706433:9/", "a loopback address"),  # 127.0.0.1 as one number
        ("http://169.254.169.254/latest/meta-data/", "link-local address"),
        ("http://10.0.0.1/", "a private address"),
        ("http://192.168.1.1/", "a private address"),
        ("http://0.0.0.0:9/", r"private address|not a public address"),
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/x", "only http and https"),
        ("gopher://127.0.0.1:70/", "only http and https"),
    ],
)
async def test_internal_addresses_and_other_schemes_are_refused(url: str, why: str) -> None:
    with pytest.raises(FetchRefused, match=why):
        await fetch(url, FetchPolicy(allow=[]))


async def test_the_local_site_itself_is_refused_without_the_allow_list(site: str) -> None:
    with pytest.raises(FetchRefused, match=r"loopback.*REACTCHAT_FETCH_ALLOW"):
        await fetch(f"{site}/roses", FetchPolicy(allow=[]))


@pytest.mark.parametrize("route", ["/to-private", "/to-metadata"])
async def test_a_redirect_to_an_internal_address_is_refused(site: str, route: str) -> None:
    with pytest.raises(FetchRefused, match=r"private address|link-local"):
        await fetch(f"{site}{route}", LOCAL)


async def test_a_redirect_to_a_file_url_is_refused(site: str) -> None:
    with pytest.raises(FetchRefused, match="only http and https addresses can be fetched, not file:"):
        await fetch(f"{site}/to-file", LOCAL)


async def test_a_50_mb_body_is_cut_off_early(site: str) -> None:
    started = time.perf_counter()
    with pytest.raises(FetchRefused, match="larger than the 10 MB limit"):
        await fetch(f"{site}/huge", LOCAL)
    assert time.perf_counter() - started < 10


async def test_a_slow_answer_is_abandoned(site: str) -> None:
    started = time.perf_counter()
    with pytest.raises(FetchRefused, match="did not answer within 1 s"):
        await fetch(f"{site}/slow", FetchPolicy(allow=["127.0.0.0/8"], timeout=1))
    assert time.perf_counter() - started < 3


def test_allow_list_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTCHAT_FETCH_ALLOW", "10.1.0.0/16, wiki.intranet")
    policy = FetchPolicy()
    policy.check_address("anything", "10.1.2.3")
    policy.check_address("wiki.intranet", "192.168.0.5")
    with pytest.raises(FetchRefused):
        policy.check_address("anything", "10.2.0.1")


def test_links_in_a_message() -> None:
    text = "Compare https://a.example/x?y=1 and (http://b.example/page). Also https://a.example/x?y=1!"
    assert links_in(text) == ["https://a.example/x?y=1", "http://b.example/page"]


# ----------------------------------------------------------------- in a ReAct run


def _fetch_call(url: str, **extra: str) -> str:
    return " I should read the page.\nAction: fetch_url\nAction Input: " + json.dumps({"url": url, **extra})


async def test_fetched_page_is_cited_kept_and_cleared_like_an_upload(site: str) -> None:
    search = " I should search the page.\nAction: search_files\nAction Input: " + json.dumps({"query": "Valentine"})
    model = ScriptedModel(
        [
            _fetch_call(f"{site}/roses"),
            " I know it.\nFinal Answer: 80.16 dollars [Rose prices in 2026 (127.0.0.1).md].",
            search,
            " I know it.\nFinal Answer: demand doubles.",
        ]
    )
    agent = Agent(model=model, tools=[fetch_url_tool(LOCAL)])
    kb = attach(agent, retention=2)
    first = await agent.arun("How much are roses? See " + f"{site}/roses")
    observation = first.steps[0].observation or ""
    assert observation.startswith(f"Read {site}/roses into this chat's files as 'Rose prices in 2026 (127.0.0.1).md'")
    assert "80.16 dollars" in observation
    # the next turn offers search_files over the page, with the same citations as an upload
    second = await agent.arun("Why is February dearer?", first.session)
    assert "[1] Rose prices in 2026 (127.0.0.1).md" in (second.steps[0].observation or "")
    assert [f.rounds_left for f in await kb.files(first.session)] == [0] or await kb.files(first.session) == []
    await kb.close()
    await agent.store.close()


async def test_a_refused_link_is_an_observation_not_a_crash() -> None:
    model = ScriptedModel([_fetch_call("http://169.254.169.254/latest/meta-data/"), " ok.\nFinal Answer: no."])
    agent = Agent(model=model, tools=[fetch_url_tool(FetchPolicy(allow=[]))])
    kb = attach(agent)
    result = await agent.arun("read the metadata")
    step = result.steps[0]
    assert step.is_error and "169.254.169.254, a link-local address" in (step.observation or "")
    assert await kb.files(result.session) == []
    await kb.close()
    await agent.store.close()


async def test_a_link_in_the_message_is_read_before_the_turn(site: str, caplog: pytest.LogCaptureFixture) -> None:
    search = " I search the page.\nAction: search_files\nAction Input: " + json.dumps({"query": "Valentine"})
    model = ScriptedModel([search, " I know it.\nFinal Answer: demand doubles"])
    agent = Agent(model=model, tools=[fetch_url_tool(LOCAL)])
    kb = attach(agent)
    read_links_in_messages(agent, LOCAL)
    message = f"Why is February dearer? {site}/roses (and http://169.254.169.254/latest/meta-data/)"
    result = await agent.arun(message)
    assert "search_files" in [t.name for t in model.requests[0].react_tools]
    assert "[1] Rose prices in 2026 (127.0.0.1).md" in (result.steps[0].observation or "")
    assert [f.name for f in await kb.files(result.session)] == ["Rose prices in 2026 (127.0.0.1).md"]
    assert "the link http://169.254.169.254/latest/meta-data/ in a message" in caplog.text  # refused, logged
    assert result.steps[0].tool == "search_files"
    await kb.close()
    await agent.store.close()
