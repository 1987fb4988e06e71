"""Compressed bombs: a few KB on the wire that unpack to hundreds of MB.

``fetch_url`` and links in messages must refuse them with the reason, and the process
that fetched them must not grow by more than 50 MB (peak RSS, measured in a fresh child
process by ``benchmarks/fetch_bombs.py``). Honest compressed pages still read whole.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import random
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.knowledge import attach
from reactchat.toolbox import FetchPolicy, FetchRefused, fetch, fetch_url_tool, read_links_in_messages

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from fetch_bombs import BOMBS, bomb_routes, bomb_site, measure

#: what each bomb unpacks to: far past the 10 MB cap
BOMB_MB = 128
LOCAL = FetchPolicy(allow=["127.0.0.1"])
_WORDS = [bytes(random.Random(n).choices(range(97, 123), k=6)) for n in range(500)]
#: 4 MB of words: compressible, under the cap, decoded in many pieces
TEXT = b" ".join(random.Random(7).choices(_WORDS, k=4 * 2**20 // 7))


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    routes = bomb_routes(BOMB_MB)
    text = {"content-type": "text/plain"}
    raw_deflate = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    routes |= {
        "/text.gz": ({**text, "content-encoding": "gzip"}, gzip.compress(TEXT)),
        "/text.zlib": ({**text, "content-encoding": "deflate"}, zlib.compress(TEXT)),
        "/text.deflate": ({**text, "content-encoding": "deflate"}, raw_deflate.compress(TEXT) + raw_deflate.flush()),
        "/text.br": ({**text, "content-encoding": "br"}, b"\x1b\xff\xff\x7f" + bytes(64)),
        "/broken.gz": ({**text, "content-encoding": "gzip"}, gzip.compress(TEXT)[:20] + b"\xff" * 100),
    }
    with bomb_site(routes) as base:
        yield base


REASONS = {
    "/gzip": "is larger than the 10 MB limit",
    "/deflate": "is larger than the 10 MB limit",
    "/zstd": "is compressed with zstd, which was not offered (only gzip, deflate)",
    "/gzip-gzip": "is compressed more than once (gzip, gzip)",
}


@pytest.mark.parametrize("route", BOMBS)
def test_a_bomb_is_refused_and_costs_the_fetching_process_little(site: str, route: str) -> None:
    result = measure(site, route, dict(os.environ))
    if route.startswith("/redirect"):  # the redirect's own body is never read: the page it points to is
        assert result["outcome"] == "read 26 bytes"
    else:
        assert result["outcome"].startswith(f"refused: {site}{route} {REASONS[route]}")
    assert result["grew_mb"] < 50, result


@pytest.mark.parametrize("route", ["/text.gz", "/text.zlib", "/text.deflate"])
async def test_compressed_pages_under_the_cap_read_whole(site: str, route: str) -> None:
    page = await fetch(site + route, LOCAL)
    assert page.data == TEXT


async def test_a_coding_that_was_not_offered_or_a_broken_body_is_refused(site: str) -> None:
    with pytest.raises(FetchRefused, match="compressed with br, which was not offered"):
        await fetch(site + "/text.br", LOCAL)
    with pytest.raises(FetchRefused, match="sent a broken gzip body"):
        await fetch(site + "/broken.gz", LOCAL)


async def test_the_tool_answers_the_refusal_as_its_observation(site: str) -> None:
    call = " I read it.\nAction: fetch_url\nAction Input: " + json.dumps({"url": site + "/gzip-gzip"})
    model = ScriptedModel([call, " It was refused.\nFinal Answer: no."])
    agent = Agent(model=model, tools=[fetch_url_tool(LOCAL)])
    kb = attach(agent)
    result = await agent.arun("read the page")
    step = result.steps[0]
    assert step.is_error and "is compressed more than once (gzip, gzip)" in (step.observation or "")
    assert result.answer == "no."
    await kb.close()
    await agent.store.close()


async def test_a_bomb_linked_in_a_message_is_skipped_and_logged(site: str, caplog: pytest.LogCaptureFixture) -> None:
    agent = Agent(model=ScriptedModel([" Nothing to read.\nFinal Answer: none"]), tools=[fetch_url_tool(LOCAL)])
    kb = attach(agent)
    read_links_in_messages(agent, LOCAL)
    with caplog.at_level(logging.WARNING, "reactchat.fetch"):
        result = await agent.arun(f"what is at {site}/zstd and {site}/deflate ?")
    assert result.answer == "none"
    assert await kb.files(result.session) == []
    assert f"{site}/zstd is compressed with zstd, which was not offered" in caplog.text
    assert f"{site}/deflate is larger than the 10 MB limit" in caplog.text
    await kb.close()
    await agent.store.close()
