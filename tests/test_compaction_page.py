"""The page shows a compaction as an expandable "Earlier turns summarised" line, live and
after a reload (a real Chromium against a real uvicorn)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, expect

from reactchat import Agent
from reactchat.server import ServerConfig, create_app
from server_support import running
from test_compaction import Oracle, value
from test_page import browser  # noqa: F401  (the module's Chromium fixture)

PADDING = " and so on" * 40  # about 100 tokens a turn: a 1,200-token window compacts within a few turns


def test_the_page_shows_earlier_turns_summarised_and_expands_the_summary(browser: Browser, tmp_path: Path) -> None:  # noqa: F811
    def agent(store: object) -> Agent:
        return Agent(Oracle(), store=store, compact_at=0.8, context_tokens=1200, ask_user=False)  # type: ignore[arg-type]

    with running(create_app(agent, config=ServerConfig(store=f"sqlite:///{tmp_path / 'p.db'}"))) as base:
        context = browser.new_context(base_url=base)
        context.set_default_timeout(15_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("/")
        summarised = page.get_by_test_id("step").filter(has_text="Earlier turns summarised")
        for n in range(1, 9):
            page.get_by_test_id("input").fill(f"remember code {n} is {value(n)}{PADDING}")
            page.get_by_test_id("send").click()
            expect(page.get_by_test_id("answer")).to_have_count(n)
        expect(summarised.first).to_be_visible()
        title = summarised.first.locator("summary").inner_text()
        assert title.startswith("Earlier turns summarised (1–"), title
        assert not summarised.first.get_attribute("open"), "the summary starts collapsed"
        summarised.first.locator("summary").click()
        expect(summarised.first.locator("pre")).to_contain_text(f"1={value(1)} 2={value(2)}")
        shown = summarised.count()
        page.reload()  # the session is read back from GET /v1/sessions/{id}
        expect(page.get_by_test_id("answer")).to_have_count(8)
        expect(page.get_by_test_id("step").filter(has_text="Earlier turns summarised")).to_have_count(shown)
        assert errors == []
        context.close()
