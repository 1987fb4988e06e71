"""``web_search``: each backend against a local server replaying the service's documented answers.

Nothing here reaches the internet. SearXNG, Brave and Tavily are pointed at a loopback
replay server; DuckDuckGo (``ddgs`` talks to a fixed HTTPS address) goes through a local
HTTPS proxy that answers in DuckDuckGo's place (``tests/fixtures/https_stand_in.py``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from fixtures.replay_server import Canned, ReplayServer
from fixtures.search_shapes import (
    brave_error,
    brave_results,
    duckduckgo_page,
    searxng_results,
    tavily_error,
    tavily_results,
)
from reactchat import Agent, ScriptedModel
from reactchat.toolbox import (
    Brave,
    DuckDuckGo,
    SearchConfigError,
    SearchUnavailable,
    SearxNG,
    Tavily,
    resolve_backend,
    web_search,
    web_search_tool,
)

ROSES = [
    ("Rose prices in 2026", "https://flowers.example/roses", "A dozen red roses costs 80.16 dollars on average."),
    ("Why roses cost more in February", "https://news.example/feb", "Demand doubles before Valentine's day."),
    ("Growing roses", "https://garden.example/grow", "Roses need six hours of sun."),
]


def call(query: str) -> str:
    return " I should search the web.\nAction: web_search\nAction Input: " + json.dumps({"query": query})


# ------------------------------------------------------------------------ SearXNG


async def test_searxng_results_are_numbered_for_citation() -> None:
    with ReplayServer(Canned(body=searxng_results("rose price", ROSES))) as server:
        tool = web_search_tool(SearxNG(server.url), k=2)
        text = await tool.run({"query": "rose price"})
    assert server.requests[0].path.startswith("/search?")
    assert "q=rose+price" in server.requests[0].path and "format=json" in server.requests[0].path
    assert "[1] Rose prices in 2026\nhttps://flowers.example/roses" in text
    assert "[2] Why roses cost more in February" in text
    assert "[3]" not in text  # k=2
    assert "80.16 dollars" in text


async def test_searxng_without_json_format_names_the_setting() -> None:
    forbidden = Canned(403, "<html><body>403 Forbidden</body></html>", content_type="text/html")
    with ReplayServer(forbidden) as server, pytest.raises(SearchConfigError, match=r"search\.formats"):
        await SearxNG(server.url).search("x", 3)


async def test_searxng_rate_limit_is_a_passing_problem() -> None:
    with ReplayServer(Canned(429, "Too Many Requests")) as server, pytest.raises(SearchUnavailable, match="429"):
        await SearxNG(server.url).search("x", 3)


def test_searxng_spec_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTCHAT_SEARCH", "searxng:http://127.0.0.1:8888/")
    backend = resolve_backend()
    assert isinstance(backend, SearxNG) and backend.url == "http://127.0.0.1:8888"
    with pytest.raises(SearchConfigError, match="searxng:https://host"):
        resolve_backend("searxng:")


# -------------------------------------------------------------------------- Brave


async def test_brave_sends_the_key_and_reads_web_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAVE_API_KEY", "brave-test-key")
    with ReplayServer(Canned(body=brave_results("rose price", ROSES))) as server:
        results = await Brave(url=server.url).search("rose price", 5)
    seen = server.requests[0]
    assert seen.path.startswith("/web/search?") and "q=rose+price" in seen.path and "count=5" in seen.path
    assert seen.headers["x-subscription-token"] == "brave-test-key"
    assert [r.url for r in results] == [url for _, url, _ in ROSES]
    assert results[0].snippet == "A dozen red roses costs 80.16 dollars on average."  # <strong> marks removed


async def test_brave_rate_limit_and_refused_key() -> None:
    limited = Canned(
        429,
        brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan."),
        headers={"X-RateLimit-Limit": "1, 15000", "X-RateLimit-Remaining": "0, 14999", "X-RateLimit-Reset": "1, 100"},
    )
    refused = Canned(422, brave_error(422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid."))
    unauthorized = Canned(
        401, brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
    )
    with ReplayServer(limited, refused, unauthorized) as server:
        brave = Brave("k", url=server.url)
        with pytest.raises(SearchUnavailable, match=r"rate-limiting.*Request rate limit exceeded"):
            await brave.search("x", 3)
        with pytest.raises(SearchUnavailable, match="422: The provided subscription token is invalid"):
            await brave.search("x", 3)
        with pytest.raises(SearchConfigError, match="BRAVE_API_KEY"):
            await brave.search("x", 3)


def test_brave_without_a_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    monkeypatch.setenv("REACTCHAT_SEARCH", "brave")
    with pytest.raises(SearchConfigError, match="set BRAVE_API_KEY"):
        resolve_backend()


# ------------------------------------------------------------------------- Tavily


async def test_tavily_through_its_sdk() -> None:
    with ReplayServer(Canned(body=tavily_results("rose price", ROSES))) as server:
        results = await Tavily("tvly-test", url=server.url).search("rose price", 2)
    seen = server.requests[0]
    assert seen.method == "POST" and seen.path == "/search"
    assert seen.json["query"] == "rose price" and seen.json["max_results"] == 2
    assert seen.headers["authorization"] == "Bearer tvly-test"
    assert [r.title for r in results] == ["Rose prices in 2026", "Why roses cost more in February"]


async def test_tavily_errors() -> None:
    answers = [
        Canned(429, tavily_error("Your request has been blocked due to excessive requests.")),
        Canned(401, tavily_error("Unauthorized: missing or invalid API key.")),
        Canned(432, tavily_error("This request exceeds your plan's set usage limit.")),
    ]
    with ReplayServer(*answers) as server:
        tavily = Tavily("tvly-test", url=server.url)
        with pytest.raises(SearchUnavailable, match="excessive requests"):
            await tavily.search("x", 3)
        with pytest.raises(SearchConfigError, match="TAVILY_API_KEY"):
            await tavily.search("x", 3)
        with pytest.raises(SearchConfigError, match="usage limit"):
            await tavily.search("x", 3)


def test_tavily_needs_its_key_and_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(SearchConfigError, match="set TAVILY_API_KEY"):
        resolve_backend("tavily")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test")
    monkeypatch.setitem(sys.modules, "tavily", None)  # as if tavily-python were not installed
    with pytest.raises(SearchConfigError, match=r"reactchat\[tavily\]"):
        resolve_backend("tavily")


# --------------------------------------------------------------------- DuckDuckGo


async def test_duckduckgo_through_ddgs() -> None:
    from fixtures.https_stand_in import HTTPSStandIn

    page = duckduckgo_page(ROSES)
    with HTTPSStandIn({"html.duckduckgo.com": [Canned(body=page, content_type="text/html")]}) as proxy:
        results = await DuckDuckGo(proxy=proxy.url, verify=False).search("rose price", 3)
    assert proxy.requests[0].method == "POST" and proxy.requests[0].path == "/html/"
    assert "q=rose+price" in proxy.requests[0].body
    # ddgs ranks the page's results by their words' overlap with the query
    assert {(r.title, r.url, r.snippet) for r in results} == set(ROSES)


async def test_duckduckgo_refusal_is_no_result_not_a_crash() -> None:
    from fixtures.https_stand_in import HTTPSStandIn

    # DuckDuckGo answers a burst of requests with HTTP 202 and an anomaly page instead of results
    refusal = Canned(202, "<html><body><div class='anomaly-modal'>Unfortunately, bots…</div></body></html>")
    with HTTPSStandIn({"html.duckduckgo.com": [refusal]}) as proxy:
        tool = web_search_tool(DuckDuckGo(proxy=proxy.url, verify=False))
        text = await tool.run({"query": "rose price"})
    assert text.startswith("No web result for 'rose price'")


def test_duckduckgo_without_ddgs_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)
    with pytest.raises(SearchConfigError, match=r"reactchat\[duckduckgo\]"):
        resolve_backend("duckduckgo")


# ------------------------------------------------------------------- in a ReAct run


def test_unconfigured_search_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTCHAT_SEARCH", raising=False)
    with pytest.raises(SearchConfigError, match="set REACTCHAT_SEARCH to searxng:URL, tavily, brave or duckduckgo"):
        resolve_backend()


def test_the_answer_cites_what_the_search_found(monkeypatch: pytest.MonkeyPatch) -> None:
    with ReplayServer(Canned(body=searxng_results("rose price", ROSES))) as server:
        monkeypatch.setenv("REACTCHAT_SEARCH", f"searxng:{server.url}")
        model = ScriptedModel([call("rose price"), " I know it.\nFinal Answer: 80.16 dollars a dozen [1]."])
        result = Agent(model=model, tools=[web_search]).run("How much are roses?")
    assert result.answer == "80.16 dollars a dozen [1]."
    observation = result.steps[0].observation or ""
    assert "[1] Rose prices in 2026\nhttps://flowers.example/roses" in observation
    # the model saw the numbered results before it answered
    assert "[1] Rose prices in 2026" in json.dumps([m.model_dump() for m in model.requests[1].messages])


def test_a_rate_limit_becomes_an_observation_the_model_can_work_around(monkeypatch: pytest.MonkeyPatch) -> None:
    with ReplayServer(Canned(429, "Too Many Requests")) as server:
        monkeypatch.setenv("REACTCHAT_SEARCH", f"searxng:{server.url}")
        model = ScriptedModel([call("rose price"), " I cannot search now.\nFinal Answer: I could not check prices."])
        result = Agent(model=model, tools=[web_search]).run("How much are roses?")
    step: Any = result.steps[0]
    assert step.is_error and "rate-limiting" in step.observation and "try again later" in step.observation
    assert result.status == "done"


def test_long_snippets_are_trimmed_so_every_citation_fits() -> None:
    from reactchat.toolbox import SearchResult
    from reactchat.toolbox._web_search import render

    results = [SearchResult(f"title {i}", f"https://site.example/{i}", "word " * 2000) for i in range(5)]
    text = render("q", results, budget=1500)
    assert len(text) < 1700
    assert all(f"[{i}] title {i - 1}" in text for i in range(1, 6))
