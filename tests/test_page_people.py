"""The page for people, in a real Chromium at 1100 and 390 px against a real uvicorn: the
first view, a header that fits, uploads by button and by drop, copy, edit, regenerate."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from reactchat import Agent
from reactchat.messages import Reply, Request, TextPart
from reactchat.server import ServerConfig, create_app
from reactchat.toolbox import calculator
from server_support import RuleModel, _question, running

CHROMIUM = os.environ.get("REACTCHAT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
NOTES = b"# Notes\n\nThe rose costs 80.16 euros at the florist on Rue Lepic.\n" * 40
UNREADABLE = "I would rather chat about roses than follow any format " * 6
#: where the screenshots go: $REACTCHAT_SCREENSHOTS (benchmarks/screenshots.py sets docs/), else nowhere
SHOTS = os.environ.get("REACTCHAT_SCREENSHOTS")


class PeopleModel(RuleModel):
    """The rule model, with one reply that cannot be read for a "garble" question."""

    def __init__(self) -> None:
        super().__init__()
        self.garbled = False

    async def complete(self, request: Request) -> Reply:
        if "garble" in _question(request).lower() and not self.garbled:
            self.garbled = True
            return Reply(parts=[TextPart(text=UNREADABLE)])
        return await super().complete(request)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("people") / "page.db"
    model = PeopleModel()
    app = create_app(
        lambda store: Agent(model=model, tools=[calculator], store=store),
        config=ServerConfig(model="rules", store=f"sqlite:///{db}"),
    )
    with running(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the page tests need Chromium at {CHROMIUM}: apt-get install chromium (or set REACTCHAT_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def open_page(browser: Browser, base: str, width: int) -> tuple[Page, Any]:
    context = browser.new_context(base_url=base, viewport={"width": width, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/")
    return page, (context, errors)


@pytest.fixture(params=[1100, 390], ids=["wide", "narrow"])
def page(request: pytest.FixtureRequest, browser: Browser, base: str) -> Iterator[Page]:
    page, (context, errors) = open_page(browser, base, request.param)
    yield page
    context.close()
    assert not errors, f"the page raised: {errors}"


def shoot(page: Page, name: str) -> None:
    if SHOTS:
        width = page.viewport_size["width"] if page.viewport_size else 0
        page.screenshot(path=str(Path(SHOTS) / f"page-{name}-{width}.png"))


def send(page: Page, text: str) -> None:
    """Type and send ``text`` once the last turn has ended (while one runs, Enter keeps the
    text in the composer and sends nothing)."""
    expect(page.get_by_test_id("send")).to_be_visible()
    page.get_by_test_id("input").fill(text)
    page.get_by_test_id("input").press("Enter")


def test_the_first_view_says_what_the_agent_does_and_an_example_runs(page: Page) -> None:
    first = page.get_by_test_id("welcome")
    expect(first).to_contain_text("calculator")
    expect(first).to_contain_text("ask_user: Ask the user a question and wait for the answer.")
    expect(first).to_contain_text("It reads files you upload")
    shoot(page, "first-view")
    page.get_by_test_id("example").first.click()
    expect(page.get_by_test_id("answer")).to_have_count(1)
    expect(page.get_by_test_id("welcome")).to_have_count(0)
    assert page.locator("link[rel=icon]").count() == 1


def test_nothing_scrolls_sideways(page: Page) -> None:
    expect(page.get_by_test_id("welcome")).to_be_visible()
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " document.querySelector('header').scrollWidth, document.querySelector('header').clientWidth]"
    )
    assert widths[0] <= widths[1] and widths[2] <= widths[3], widths
    for name in ("Sessions", "Clear context", "New chat"):
        box = page.get_by_role("button", name=name).bounding_box()
        assert box is not None and box["x"] + box["width"] <= widths[1], (name, box)


def test_an_upload_by_button_keeps_one_true_note_and_the_observation_is_for_people(page: Page) -> None:
    with page.expect_file_chooser() as chooser:
        page.get_by_test_id("pick").click()
    chooser.value.set_files(files=[{"name": "notes.md", "mimeType": "text/markdown", "buffer": NOTES}])
    expect(page.get_by_test_id("upload-note")).to_contain_text("notes.md: read")
    expect(page.get_by_test_id("files")).to_have_text("notes.md · 5 rounds left")
    send(page, "files: rose florist")
    expect(page.get_by_test_id("answer")).to_contain_text("80.16 euros")
    expect(page.get_by_test_id("files")).to_have_text("notes.md · 4 rounds left")
    expect(page.get_by_test_id("upload-note")).not_to_contain_text("rounds left")
    observation = page.get_by_test_id("step").nth(2)
    expect(observation).to_contain_text("from the uploaded files")
    observation.locator("summary").click()
    expect(observation).not_to_contain_text("cite them")
    shoot(page, "upload")


def test_a_file_dropped_on_the_page_is_uploaded(page: Page) -> None:
    expect(page.get_by_test_id("welcome")).to_be_visible()
    page.evaluate(
        """() => {
        const data = new DataTransfer();
        data.items.add(new File(["# Tulips\\n\\nTulips cost 3.10 euros."], "tulips.md", { type: "text/markdown" }));
        document.body.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, bubbles: true }));
        document.querySelector("main").dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true }));
      }"""
    )
    expect(page.get_by_test_id("files")).to_have_text("tulips.md · 5 rounds left")


def test_copy_an_answer_and_its_code(page: Page) -> None:
    send(page, "markdown please")
    expect(page.get_by_test_id("answer").locator("table")).to_be_visible()
    page.get_by_test_id("copy-code").click()
    assert page.evaluate("navigator.clipboard.readText()") == "print(80.16 * 1.15)\n"
    page.get_by_test_id("copy").click()
    assert page.evaluate("navigator.clipboard.readText()").startswith("Prices:\n\n- **rose**: 80.16")
    shoot(page, "copy")


def test_regenerate_and_edit_answer_again_in_a_fork_of_the_session(page: Page) -> None:
    send(page, "compute 6 * 7")
    expect(page.get_by_test_id("answer")).to_have_text("42")
    send(page, "compute 2 * 2")
    expect(page.get_by_test_id("answer")).to_have_count(2)
    original = page.evaluate("localStorage.getItem('reactchat.session')")
    # the second turn, answered again in a fork (the button waits for the first turn to end)
    page.get_by_test_id("regenerate").last.click()
    page.wait_for_function("was => localStorage.getItem('reactchat.session') !== was", arg=original)
    expect(page.get_by_test_id("status")).to_have_text("")
    expect(page.get_by_test_id("answer")).to_have_text(["42", "4"])
    expect(page.get_by_test_id("user")).to_have_text(["compute 6 * 7", "compute 2 * 2"])
    regenerated = page.evaluate("localStorage.getItem('reactchat.session')")
    assert regenerated != original
    page.get_by_test_id("edit").first.click()
    expect(page.get_by_test_id("input")).to_have_value("compute 6 * 7")
    send(page, "compute 6 * 8")
    expect(page.get_by_test_id("answer")).to_have_text(["48"])
    expect(page.get_by_test_id("user")).to_have_text(["compute 6 * 8"])
    shoot(page, "edit-regenerate")
    edited = page.evaluate("localStorage.getItem('reactchat.session')")
    assert len({original, regenerated, edited}) == 3
    page.evaluate(f"localStorage.setItem('reactchat.session', {original!r})")
    page.reload()  # the original is as it was
    expect(page.get_by_test_id("answer")).to_have_text(["42", "4"])


def test_the_current_empty_chat_is_not_listed(page: Page) -> None:
    send(page, "hello there")
    expect(page.get_by_test_id("answer")).to_contain_text("echo: hello there")
    page.get_by_role("button", name="New chat").click()
    expect(page.get_by_test_id("welcome")).to_be_visible()
    page.get_by_role("button", name="Sessions").click()
    expect(page.get_by_test_id("session").first).to_be_visible()
    assert page.locator("button.session[aria-current]").count() == 0
    expect(page.get_by_test_id("session").first).to_have_text(re.compile(r"^\s*hello there"))


def test_an_unreadable_reply_is_shown_beside_its_correction(browser: Browser, base: str) -> None:
    page, (context, errors) = open_page(browser, base, 1100)
    send(page, "garble then echo")
    expect(page.get_by_test_id("answer")).to_have_count(1)
    summary = page.get_by_test_id("step").filter(has_text="Format error").locator("summary")
    shown = " ".join(UNREADABLE.split())[:199] + "…"
    expect(summary).to_have_text(f"Format error, correction sent — the model wrote: {shown}")
    shoot(page, "format-error")
    context.close()
    assert not errors


def test_the_usage_line_is_the_same_live_and_after_a_reload(page: Page) -> None:
    send(page, "how far is Paris?")
    expect(page.get_by_test_id("question")).to_have_text("Where are you?")
    send(page, "Lyon")
    expect(page.get_by_test_id("answer")).to_contain_text("Paris is 400 km away")
    # The usage line comes with the turn's end, a moment after its answer.
    expect(page.get_by_test_id("turn-usage")).not_to_have_count(0)
    live = page.get_by_test_id("turn-usage").all_inner_texts()
    page.reload()
    expect(page.get_by_test_id("answer")).to_contain_text("Paris is 400 km away")
    assert page.get_by_test_id("turn-usage").all_inner_texts() == live
