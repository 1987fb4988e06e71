"""The page with sub-agents and a plan, in a real headless Chromium: each nested run is a
collapsible block under the step that started it, and the plan is a checklist that fills in."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from agents_team import team_app
from server_support import running
from test_page import browser  # noqa: F401  (the module's Chromium fixture)


@pytest.fixture
def page_for(browser: Browser, tmp_path: Path) -> Iterator[object]:  # noqa: F811
    opened: list[tuple[object, object]] = []

    def open_page(team: str, steps: str = "w1,2") -> Page:
        server = running(team_app(f"sqlite:///{tmp_path / team}.db", str(tmp_path / "effects"), team, steps))
        base = server.__enter__()
        context = browser.new_context(base_url=base)
        context.set_default_timeout(15_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("/")
        opened.append((server, context))
        page.errors = errors  # type: ignore[attr-defined]
        return page

    yield open_page
    for server, context in opened:
        context.close()  # type: ignore[attr-defined]
        server.__exit__(None, None, None)  # type: ignore[attr-defined]


def send(page: Page, text: str) -> None:
    page.get_by_test_id("input").fill(text)
    page.get_by_test_id("send").click()


def test_nested_steps_and_the_plan_checklist(page_for, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    page: Page = page_for("plan", "w1,wa2,3")
    send(page, "Bump three times.")
    expect(page.get_by_test_id("pending")).to_contain_text("Where are you?")
    plan = page.get_by_test_id("plan")
    expect(plan.get_by_test_id("plan-step")).to_have_count(3)
    expect(plan.locator('[data-status="done"]')).to_have_count(1)
    blocks = page.locator("details.subrun")
    expect(blocks.first.locator(":scope > summary")).to_have_text("step 1 › worker")
    expect(blocks.first).to_contain_text("bumped 1")
    send(page, "Lyon")
    expect(page.get_by_test_id("answer").last).to_contain_text("bumped 3")
    expect(blocks.nth(1).get_by_test_id("user")).to_have_text("Lyon")  # the reply, inside the run that asked
    expect(plan.locator('[data-status="done"]')).to_have_count(3)
    plan.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "plan.png"), full_page=True)
    if os.environ.get("REACTCHAT_SCREENSHOTS"):
        page.screenshot(path=os.path.join(os.environ["REACTCHAT_SCREENSHOTS"], "plan.png"), full_page=True)
    # reloaded from GET /v1/sessions/{id}: the same blocks and checklist
    page.reload()
    expect(page.get_by_test_id("plan").locator('[data-status="done"]')).to_have_count(3)
    expect(page.locator("details.subrun")).to_have_count(3)
    assert not page.errors  # type: ignore[attr-defined]


def test_a_question_two_levels_down_is_nested_twice(page_for) -> None:  # type: ignore[no-untyped-def]
    page: Page = page_for("deep")
    send(page, "How far?")
    expect(page.get_by_test_id("pending")).to_contain_text("Where are you?")
    inner = page.locator("details.subrun details.subrun")
    expect(inner.first.locator(":scope > summary")).to_have_text("researcher › fetcher")
    send(page, "Lyon")
    expect(page.get_by_test_id("answer").last).to_have_text("boss: found: fetched: Lyon")
    expect(inner.first).to_contain_text("fetched: Lyon")
    assert not page.errors  # type: ignore[attr-defined]
