"""The web page in a real headless Chromium (Playwright), against a real uvicorn.

Needs the Debian ``chromium`` package (``/usr/bin/chromium``, or ``REACTCHAT_CHROMIUM``)
and ``pip install playwright`` (no ``playwright install``: the system browser is used).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from reactchat import Agent
from reactchat.server import ServerConfig, create_app
from reactchat.toolbox import read_links_in_messages
from server_support import make_agent, make_app, running

CHROMIUM = os.environ.get("REACTCHAT_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"the page tests need Chromium at {CHROMIUM}: apt-get install chromium (or set REACTCHAT_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("page") / "page.db"
    with running(make_app(store=f"sqlite:///{db}")) as url:
        yield url


@pytest.fixture
def page(browser: Browser, base: str) -> Iterator[Page]:
    context = browser.new_context(base_url=base)
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/")
    yield page
    context.close()
    assert not errors, f"the page raised: {errors}"


def send(page: Page, text: str) -> None:
    expect(page.get_by_test_id("send")).to_be_visible()  # the last turn has ended
    page.get_by_test_id("input").fill(text)
    page.get_by_test_id("input").press("Enter")


def test_steps_stream_in_collapsed_and_the_answer_follows(page: Page) -> None:
    send(page, "slow compute 80.16 * 1.15")
    expect(page.get_by_test_id("step").first).to_be_visible()
    # the first step shows while the second (one second) model call still runs
    assert page.get_by_test_id("answer").count() == 0
    expect(page.get_by_test_id("status")).to_have_text("The agent is working…")
    expect(page.get_by_test_id("answer")).to_have_text("92.184")
    steps = page.get_by_test_id("step")
    expect(steps).to_have_count(4)
    expect(steps.nth(1)).to_contain_text("Action: calculator")
    assert not steps.nth(2).get_attribute("open"), "steps start collapsed"
    expect(steps.nth(2).locator("pre")).to_be_hidden()
    steps.nth(2).locator("summary").click()
    expect(steps.nth(2).locator("pre")).to_have_text("92.184")
    expect(page.get_by_test_id("status")).to_have_text("")


def test_a_streaming_model_s_words_show_before_the_step(page: Page) -> None:
    send(page, "stream compute 3*5")
    expect(page.get_by_test_id("live")).to_contain_text("Use the")
    expect(page.get_by_test_id("answer")).to_have_text("15")
    expect(page.get_by_test_id("live")).to_have_count(0)
    expect(page.get_by_test_id("step").first).to_contain_text("Thought: Use the calculator.")


def test_a_question_is_shown_as_a_question_and_survives_a_reload(page: Page) -> None:
    send(page, "How far is Paris?")
    expect(page.get_by_test_id("question")).to_have_text("Where are you?")
    expect(page.get_by_test_id("pending")).to_have_text("The agent asks: Where are you?")
    session = page.evaluate("localStorage.getItem('reactchat.session')")

    page.reload()
    expect(page.get_by_test_id("question")).to_have_text("Where are you?")
    expect(page.get_by_test_id("pending")).to_be_visible()
    assert page.evaluate("localStorage.getItem('reactchat.session')") == session

    send(page, "Lyon")
    expect(page.get_by_test_id("answer")).to_have_text("From Lyon, Paris is 400 km away.")
    expect(page.get_by_test_id("pending")).to_be_hidden()
    expect(page.get_by_test_id("user")).to_have_text(["How far is Paris?", "Lyon"])

    page.reload()
    expect(page.get_by_test_id("user")).to_have_text(["How far is Paris?", "Lyon"])
    expect(page.get_by_test_id("answer")).to_have_text("From Lyon, Paris is 400 km away.")


def test_a_reload_during_a_turn_follows_it_to_its_end(page: Page) -> None:
    send(page, "slow compute 7*6")
    expect(page.get_by_test_id("step").first).to_be_visible()
    page.reload()
    expect(page.get_by_test_id("status")).to_have_text("The agent is working…")
    expect(page.get_by_test_id("answer")).to_have_text("42", timeout=15_000)
    expect(page.get_by_test_id("status")).to_have_text("")


def test_new_chat_starts_an_empty_session(page: Page) -> None:
    send(page, "hello there")
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello there")
    before = page.evaluate("localStorage.getItem('reactchat.session')")
    page.get_by_role("button", name="New chat").click()
    expect(page.get_by_test_id("answer")).to_have_count(0)
    assert page.evaluate("localStorage.getItem('reactchat.session')") != before


def test_errors_are_shown_not_swallowed(page: Page) -> None:
    send(page, "please fail")
    expect(page.get_by_test_id("error")).to_contain_text("told to fail")
    expect(page.get_by_test_id("status")).to_contain_text("interrupted")
    page.reload()
    expect(page.get_by_test_id("status")).to_contain_text("The last turn was interrupted")


def test_the_page_asks_for_the_token(browser: Browser) -> None:
    with running(make_app(token="page-token")) as url:
        context = browser.new_context(base_url=url)
        page = context.new_page()
        page.goto("/")
        page.locator("#token").fill("page-token")
        page.locator("#token-form button").click()
        send(page, "hello token")
        expect(page.get_by_test_id("answer")).to_have_text("echo: hello token")
        context.close()


def test_a_link_of_the_message_that_was_not_read_is_said_so(browser: Browser, tmp_path: Path) -> None:
    def agent(store: Any) -> Agent:
        made = make_agent(store)
        read_links_in_messages(made)
        return made

    config = ServerConfig(model="rules", store=f"sqlite:///{tmp_path}/links.db")
    with running(create_app(agent, config=config)) as url:
        context = browser.new_context(base_url=url)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("/")
        send(page, "hello http://0177.0.0.1/")
        expect(page.get_by_test_id("answer")).to_have_text("echo: hello http://0177.0.0.1/")
        said = re.compile(r"^The link http://0177\.0\.0\.1/ was not read: .*is not a valid URL")
        expect(page.get_by_test_id("link-skipped")).to_have_text(said)  # streamed
        page.reload()
        expect(page.get_by_test_id("link-skipped")).to_have_text(said)  # stored
        context.close()
        assert not errors, f"the page raised: {errors}"


def test_files_upload_with_progress_count_down_and_clear(page: Page) -> None:
    notes = b"# Notes\n\nThe rose costs 80.16 euros at the florist on Rue Lepic.\n" * 40
    page.get_by_test_id("file").set_input_files(
        files=[{"name": "notes.md", "mimeType": "text/markdown", "buffer": notes}]
    )
    expect(page.get_by_test_id("upload-note")).to_contain_text("notes.md:")
    expect(page.get_by_test_id("upload-note")).to_contain_text("passages")  # the rounds left are on the chip
    expect(page.get_by_test_id("progress")).to_have_js_property("value", 100)
    expect(page.get_by_test_id("files")).to_have_text("notes.md · 5 rounds left")

    send(page, "files: rose florist")
    expect(page.get_by_test_id("answer")).to_contain_text("80.16 euros")
    expect(page.get_by_test_id("files")).to_have_text("notes.md · 4 rounds left")
    expect(page.get_by_test_id("step").nth(1)).to_contain_text("Action: search_files")

    page.reload()
    expect(page.get_by_test_id("files")).to_have_text("notes.md · 4 rounds left")
    page.get_by_role("button", name="Clear context").click()
    expect(page.get_by_test_id("files")).to_have_text("")
    expect(page.get_by_test_id("note")).to_contain_text("Context cleared")


def test_a_rejected_upload_says_why(page: Page) -> None:
    blob = bytes(range(256)) * 8
    page.get_by_test_id("file").set_input_files(
        files=[{"name": "blob.bin", "mimeType": "application/octet-stream", "buffer": blob}]
    )
    expect(page.get_by_test_id("upload-note")).to_contain_text("unknown type; supported: txt")
    expect(page.get_by_test_id("files")).to_have_text("")


def test_the_progress_bar_moves_through_upload_and_reading(page: Page) -> None:
    page.evaluate(
        """() => {
        window.barValues = [];
        const bar = document.getElementById("progress");
        setInterval(() => { if (!bar.hidden) window.barValues.push(bar.value); }, 2);
    }"""
    )
    big = b"".join(b"Line %d: the rose costs 80.16 euros at the florist on Rue Lepic.\n" % i for i in range(40_000))
    page.get_by_test_id("file").set_input_files(files=[{"name": "big.txt", "mimeType": "text/plain", "buffer": big}])
    expect(page.get_by_test_id("upload-note")).to_contain_text("big.txt:", timeout=30_000)
    values = page.evaluate("window.barValues")
    assert values[-1] == 100
    assert any(0 < v < 100 for v in values), f"no intermediate progress among {sorted(set(values))}"


# ----------------------------------------------------------------- answers and turns


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $REACTCHAT_SCREENSHOTS (to look at them), else a temporary folder."""
    folder = os.environ.get("REACTCHAT_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_answers_are_markdown_and_html_in_them_never_runs(page: Page, shots: Path) -> None:
    send(page, "markdown please")
    answer = page.get_by_test_id("answer")
    expect(answer.locator("li")).to_have_text(["rose: 80.16", "tulip: 3.10"])
    expect(answer.locator("li strong")).to_have_text("rose")
    expect(answer.locator("table td")).to_have_text(["rose", "80.16"])
    expect(answer.locator("pre code")).to_have_text("print(80.16 * 1.15)")
    link = answer.get_by_role("link", name="the florist")
    expect(link).to_have_attribute("href", "https://example.org/florist")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    # the model's HTML is shown as text, and nothing of it ran
    expect(answer).to_contain_text('<img src=x onerror="window.pwned=1">')
    expect(answer).to_contain_text("<script>window.pwned=2</script>")
    assert answer.locator("img, script").count() == 0
    for anchor in answer.locator("a").all():
        assert not (anchor.get_attribute("href") or "").startswith("javascript:")
    page.screenshot(path=str(shots / "markdown-answer.png"), full_page=True)
    assert page.evaluate("window.pwned === undefined")


def test_an_action_shows_its_input_and_a_turn_its_usage(page: Page) -> None:
    send(page, "compute 80.16 * 1.15")
    expect(page.get_by_test_id("answer")).to_have_text("92.184")
    expect(page.get_by_test_id("step").nth(1).locator("summary")).to_have_text(
        'Action: calculator(expression="80.16 * 1.15")'
    )
    usage = page.get_by_test_id("turn-usage")
    # two model calls of the rule model, which no price table knows
    expect(usage).to_contain_text("2 model calls")
    expect(usage).to_contain_text("tokens")
    expect(usage).to_contain_text("estimated")
    expect(usage).to_contain_text("cost unknown")
    shown = usage.inner_text()
    page.reload()
    expect(page.get_by_test_id("turn-usage")).to_have_text(shown)


def test_citations_become_footnotes_that_open_the_passage(page: Page, shots: Path) -> None:
    notes = (
        b"# Roses\n\nThe rose costs 80.16 euros at the florist on Rue Lepic.\n\n"
        b"# Tulips\n\nTulips cost 3.10 euros, and the florist closes at noon.\n"
    )
    page.get_by_test_id("file").set_input_files(
        files=[{"name": "florist.md", "mimeType": "text/markdown", "buffer": notes}]
    )
    expect(page.get_by_test_id("files")).to_contain_text("florist.md")
    send(page, "files cite: florist euros")
    answer = page.get_by_test_id("answer")
    expect(answer).to_contain_text("The rose costs 80.16 euros")
    cites = answer.get_by_test_id("cite")
    expect(cites).to_have_text(["[1]", "[2]"])
    sources = answer.get_by_test_id("source")
    expect(sources).to_have_count(2)
    expect(sources.nth(0).locator("summary")).to_contain_text("florist.md")
    expect(sources.nth(0).locator("blockquote")).to_be_hidden()
    cites.nth(1).click()
    expect(sources.nth(1).locator("blockquote")).to_be_visible()
    expect(sources.nth(1).locator("blockquote")).to_contain_text("euros")
    page.screenshot(path=str(shots / "citations.png"), full_page=True)


def test_past_sessions_are_listed_and_reopen(page: Page, shots: Path) -> None:
    send(page, "hello first session")
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello first session")
    first = page.evaluate("localStorage.getItem('reactchat.session')")
    page.get_by_role("button", name="New chat").click()
    send(page, "hello second session")
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello second session")

    page.get_by_role("button", name="Sessions").click()
    listed = page.get_by_test_id("session")
    expect(listed.first).to_contain_text("hello second session")
    page.screenshot(path=str(shots / "sessions.png"), full_page=True)
    listed.filter(has_text="hello first session").click()
    expect(page.get_by_test_id("sessions")).to_be_hidden()
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello first session")
    assert page.evaluate("localStorage.getItem('reactchat.session')") == first
    page.reload()
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello first session")


def test_the_stop_button_cancels_the_turn_and_the_next_message_starts_afresh(page: Page, shots: Path) -> None:
    send(page, "slow compute 6 * 7")
    stop = page.get_by_test_id("stop")
    expect(stop).to_be_visible()
    expect(page.get_by_test_id("send")).to_be_hidden()
    expect(page.get_by_test_id("user")).to_have_text("slow compute 6 * 7")
    page.screenshot(path=str(shots / "stop-button.png"), full_page=True)
    stop.click()
    expect(page.get_by_test_id("note")).to_have_text("Stopped: the turn was cancelled.")
    expect(page.get_by_test_id("status")).to_have_text("The last turn was stopped.")
    expect(page.get_by_test_id("send")).to_be_visible()
    assert page.get_by_test_id("answer").count() == 0
    send(page, "hello again")
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello again")
    page.reload()
    expect(page.get_by_test_id("note")).to_have_text("Stopped: the turn was cancelled.")
    expect(page.get_by_test_id("answer")).to_have_text("echo: hello again")
