"""An image uploaded on the page goes with the next message (real Chromium, real uvicorn)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from fixtures.pictures import png
from server_support import make_app, running
from test_page import browser, page, send

__all__ = ["browser", "page"]  # the fixtures of test_page, used here as they are there


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("page") / "page.db"
    with running(make_app(store=f"sqlite:///{db}")) as url:
        yield url


def test_an_uploaded_image_goes_with_the_next_message(page: Page, browser: Browser) -> None:
    page.get_by_test_id("file").set_input_files(
        files=[{"name": "chart.png", "mimeType": "image/png", "buffer": png(5, 2)}]
    )
    expect(page.get_by_test_id("upload-note")).to_have_text("chart.png: goes with your next message")
    send(page, "what is in the picture?")
    # the rule model reads text only: it was told what the image is, and echoes its question
    expect(page.get_by_test_id("answer")).to_contain_text("[image chart.png: PNG, 5x2")
    expect(page.get_by_test_id("answer")).to_contain_text("this model cannot see images]")
    send(page, "and now?")
    expect(page.get_by_test_id("answer").nth(1)).not_to_contain_text("chart.png")  # one message only
