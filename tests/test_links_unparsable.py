"""A link that cannot be parsed (a leading-zero IPv4 address, an empty label, a broken
A-label, digits that are not ASCII) is skipped like a refused one: the turn answers, the
log says why, and every route of a real server answers a body, never a reset.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from reactchat import Agent
from reactchat.server import ServerConfig, create_app
from reactchat.toolbox import FetchPolicy, FetchRefused, calculator, fetch, fetch_url_tool, read_links_in_messages
from server_support import RuleModel, parse_sse, running

UNPARSABLE = ["http://0177.0.0.1/", "http://1.2.3.04/", "http://a..b/", "http://xn--zz/", "http://①②⑦.0.0.1/"]


@pytest.mark.parametrize("url", UNPARSABLE)
async def test_fetch_refuses_an_unparsable_url_with_the_reason(url: str) -> None:
    with pytest.raises(FetchRefused, match="is not a valid URL"):
        await fetch(url, FetchPolicy(allow=[]))


def _app(store: str) -> Any:
    policy = FetchPolicy(allow=[])

    def agent(made_store: Any) -> Agent:
        made = Agent(model=RuleModel(), tools=[calculator, fetch_url_tool(policy)], store=made_store)
        read_links_in_messages(made, policy)
        return made

    return create_app(agent, config=ServerConfig(model="rules", store=store))


@pytest.fixture
def server(tmp_path: Any) -> Any:
    with running(_app(f"sqlite:///{tmp_path / 'links.db'}")) as base:
        yield base


@pytest.mark.parametrize("url", UNPARSABLE)
def test_messages_route_answers_and_logs_the_skipped_link(
    server: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "reactchat.fetch"), httpx.Client(base_url=server, timeout=30) as client:
        session = client.post("/v1/sessions").json()["session"]
        answer = client.post(f"/v1/sessions/{session}/messages", json={"message": f"read {url}", "stream": False})
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "done"
        assert answer.json()["answer"] == f"echo: read {url}"
        streamed = client.post(f"/v1/sessions/{session}/messages", json={"message": f"again {url}"})
        assert streamed.status_code == 200
        assert parse_sse(streamed.text)[-1][1]["status"] == "done"
    assert f"the link {url} in a message of session {session} was not read" in caplog.text
    assert "is not a valid URL" in caplog.text


@pytest.mark.parametrize("url", UNPARSABLE)
def test_chat_completions_answer_with_a_link_that_cannot_be_parsed(server: str, url: str) -> None:
    asked = {"model": "rules", "messages": [{"role": "user", "content": f"look at {url}"}]}
    with httpx.Client(base_url=server, timeout=30) as client:
        plain = client.post("/v1/chat/completions", json=asked)
        assert plain.status_code == 200, plain.text
        assert plain.json()["choices"][0]["message"]["content"] == f"echo: look at {url}"
        streamed = client.post("/v1/chat/completions", json={**asked, "stream": True})
        assert streamed.status_code == 200
        assert streamed.text.rstrip().endswith("data: [DONE]")
        assert plain.json()["reactchat"]["status"] == "done"
