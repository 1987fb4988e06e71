"""Tool approval on the server's surfaces: the HTTP API, the OpenAI endpoint and the page's buttons.

The rule model computes "compute X" with the calculator; this agent's policy makes every
calculation with a 9 in it wait for approval.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI
from playwright.sync_api import Page, expect

from reactchat import Agent
from reactchat.server import ServerConfig, create_app
from reactchat.toolbox import calculator
from server_support import RuleModel, running
from test_page import browser, page  # noqa: F401 - the page tests' Chromium, over this module's server


def needs_approval(tool: str, arguments: dict[str, Any]) -> bool:
    return tool == "calculator" and "9" in str(arguments.get("expression", ""))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("approval") / "s.db"

    def agent(store: Any) -> Agent:
        return Agent(model=RuleModel(), tools=[calculator], store=store, approval=needs_approval)

    with running(create_app(agent, config=ServerConfig(model="rules", store=f"sqlite:///{db}"))) as url:
        yield url


def turn(client: httpx.Client, session: str, message: str) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{session}/messages", json={"message": message, "stream": False})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_http_api_pending_approval_then_refused_or_approved(base: str) -> None:
    with httpx.Client(base_url=base, timeout=20) as client:
        for reply, answer in [("no, not with nines", "The user refused this call: not with nines."), ("yes", "81")]:
            session = client.post("/v1/sessions").json()["session"]
            waiting = turn(client, session, "compute 9*9")
            pending = waiting["pending"]
            assert waiting["status"] == "waiting"
            assert (pending["kind"], pending["tool"], pending["input"]) == (
                "approval",
                "calculator",
                {"expression": "9*9"},
            )
            view = client.get(f"/v1/sessions/{session}").json()
            assert view["status"] == "waiting" and view["pending"] == pending
            done = turn(client, session, reply)
            assert done["status"] == "done" and done["answer"].startswith(answer)


def test_openai_endpoint_asks_and_the_next_message_decides(base: str) -> None:
    with OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=20) as client:
        messages: list[dict[str, str]] = [{"role": "user", "content": "compute 19+1"}]
        first = client.chat.completions.create(model="rules", messages=messages)  # type: ignore[arg-type]
        question = first.choices[0].message.content or ""
        assert "calculator" in question and "19+1" in question and "yes" in question
        messages += [{"role": "assistant", "content": question}, {"role": "user", "content": "yes"}]
        second = client.chat.completions.create(model="rules", messages=messages)  # type: ignore[arg-type]
        assert second.choices[0].message.content == "20"


def test_the_page_approves_and_refuses_with_buttons(page: Page) -> None:  # noqa: F811 - the imported fixture
    page.get_by_test_id("input").fill("compute 9+1")
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("pending")).to_contain_text("The agent wants to run calculator")
    page.get_by_test_id("approve").click()
    expect(page.get_by_test_id("answer")).to_have_text("10")
    expect(page.get_by_test_id("pending")).to_be_hidden()

    page.get_by_test_id("input").fill("compute 99-9")
    page.get_by_test_id("input").press("Enter")
    expect(page.get_by_test_id("refuse")).to_be_visible()
    page.reload()  # the pending approval survives a reload, buttons included
    page.get_by_test_id("input").fill("too many nines")
    page.get_by_test_id("refuse").click()
    expect(page.get_by_test_id("answer").last).to_contain_text("The user refused this call: too many nines.")
    expect(page.get_by_test_id("user").last).to_have_text("no, too many nines")
