"""Artifacts: kept by every store, bounded, deleted with their session, served safely over HTTP."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reactchat import Agent, ScriptedModel
from reactchat.server import create_app
from reactchat.store import SessionNotFound, resolve_store
from reactchat.store._artifacts import MAX_ARTIFACTS, ArtifactStore, content_type, safe_name
from reactchat.toolbox import run_python
from server_support import running

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


async def test_every_store_keeps_replaces_bounds_and_deletes_artifacts(store_url: str) -> None:
    store = resolve_store(store_url)
    assert isinstance(store, ArtifactStore)
    session = await store.create_session()
    kept = await store.put_artifact(session, "plot.png", PNG, at=1.0)
    assert (kept.name, kept.content_type, kept.size) == ("plot.png", "image/png", len(PNG))
    await store.put_artifact(session, "notes.txt", b"first", at=2.0)
    await store.put_artifact(session, "notes.txt", b"second", at=3.0)
    read = await store.artifact(session, "notes.txt")
    assert read is not None and read.data == b"second" and read.content_type == "text/plain; charset=utf-8"
    assert [(a.name, a.size, a.data) for a in await store.artifacts(session)] == [
        ("plot.png", len(PNG), b""),
        ("notes.txt", 6, b""),
    ]
    for n in range(MAX_ARTIFACTS):
        await store.put_artifact(session, f"{n}.txt", b"x", at=10.0 + n)
    names = [a.name for a in await store.artifacts(session)]
    assert len(names) == MAX_ARTIFACTS and "plot.png" not in names and "notes.txt" not in names
    assert await store.artifact(session, "missing.txt") is None
    with pytest.raises(SessionNotFound):
        await store.put_artifact("no-such-session", "a.txt", b"x", at=1.0)
    assert await store.delete_session(session)
    assert await store.artifact(session, "0.txt") is None
    assert await store.artifacts(session) == []
    await store.close()


def test_names_are_one_plain_path_component() -> None:
    assert safe_name("../../etc/passwd") == "passwd"
    assert safe_name("a\\b\\c.txt") == "c.txt"
    assert safe_name("..") == "file"
    assert safe_name("/") == "file"
    assert safe_name(".bashrc") == "bashrc"
    assert safe_name("x\x00y\nz.txt") == "x_y_z.txt"
    assert safe_name('q"<script>.png') == "q_script_.png"
    long = safe_name("a" * 500 + ".png")
    assert len(long) == 120 and long.endswith(".png")


def test_content_types_come_from_name_and_bytes_together() -> None:
    assert content_type("plot.png", PNG) == "image/png"
    assert content_type("plot.png", b"<html><script>alert(1)</script>") == "application/octet-stream"
    assert content_type("page.html", b"<html>") == "application/octet-stream"
    assert content_type("image.svg", b"<svg onload=alert(1)>") == "application/octet-stream"
    assert content_type("data.csv", b"a,b\n") == "text/plain; charset=utf-8"
    assert content_type("data.csv", b"\xff\xfe") == "application/octet-stream"
    assert content_type("photo.jpg", b"\xff\xd8\xff\xe0") == "image/jpeg"


CODE = """
print(open("/data/table.csv").read().strip())
open("/out/plot.png", "wb").write(PNG)
open("/out/page.html", "w").write("<script>alert(document.cookie)</script>")
open("/out/fake.png", "w").write("<html><script>alert(1)</script>")
""".replace("PNG", repr(PNG))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    call = json.dumps({"code": CODE})
    model = ScriptedModel([f" I run it.\nAction: run_python\nAction Input: {call}", " Done.\nFinal Answer: drawn"])
    agent = Agent(model=model, tools=[run_python], store=f"sqlite:///{tmp_path / 'a.db'}")
    with running(create_app(agent)) as url:
        yield url


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/setup.sh)")
def test_files_the_code_wrote_are_served_with_safe_types(served: str) -> None:
    with httpx.Client(base_url=served, timeout=60) as client:
        session = client.post("/v1/sessions").json()["session"]
        upload = client.post(f"/v1/sessions/{session}/files", files={"file": ("table.csv", b"a,b\n1,2\n")})
        assert upload.status_code in (200, 201), upload.text
        turn = client.post(f"/v1/sessions/{session}/messages", json={"message": "draw it", "stream": False})
        assert turn.status_code == 200, turn.text
        listing = client.get(f"/v1/sessions/{session}/artifacts").json()["artifacts"]
        assert sorted(a["name"] for a in listing) == ["fake.png", "page.html", "plot.png"]

        image = client.get(f"/v1/sessions/{session}/artifacts/plot.png")
        assert image.status_code == 200 and image.content == PNG
        assert image.headers["content-type"] == "image/png"
        assert image.headers["x-content-type-options"] == "nosniff"
        assert image.headers["content-disposition"].startswith('inline; filename="plot.png"')
        for name in ("page.html", "fake.png"):
            page = client.get(f"/v1/sessions/{session}/artifacts/{name}")
            assert page.headers["content-type"] == "application/octet-stream"
            assert page.headers["content-disposition"].startswith("attachment;")
            assert "sandbox" in page.headers["content-security-policy"]

        # (a bare ".." the client resolves itself: the URL is then the session's own)
        for bad in ("..%2F..%2Fetc%2Fpasswd", "%2e%2e", "a%00b", "nothing.png"):
            assert client.get(f"/v1/sessions/{session}/artifacts/{bad}").status_code == 404, bad
        assert client.get("/v1/sessions/no-such/artifacts/plot.png").status_code == 404
        assert client.get("/v1/sessions/no-such/artifacts").status_code == 404


PLOT = """
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
plt.savefig("/out/squares.png")
open("/out/numbers.csv", "w").write("x,y\\n1,1\\n2,4\\n3,9\\n")
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/setup.sh)")
def test_the_page_shows_the_plot_the_code_drew(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the python extra is not installed: pip install 'reactchat[python]'")
    from playwright.sync_api import expect, sync_playwright

    from test_page import ARGS, CHROMIUM

    call = json.dumps({"code": PLOT})
    model = ScriptedModel([f" I draw it.\nAction: run_python\nAction Input: {call}", " Done.\nFinal Answer: drawn"])
    agent = Agent(model=model, tools=[run_python], store=f"sqlite:///{tmp_path / 'p.db'}")
    with running(create_app(agent)) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(base_url=url)
        page.set_default_timeout(60_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("/")
        page.get_by_test_id("input").fill("plot the squares")
        page.get_by_test_id("input").press("Enter")
        image = page.get_by_test_id("artifact-image")
        # matplotlib builds its font cache in each fresh sandbox: seconds on a busy machine
        expect(image).to_have_attribute("alt", "squares.png", timeout=60_000)
        # drawn, not a broken image: the browser decoded the PNG matplotlib wrote
        width = page.wait_for_function("() => document.querySelector('[data-testid=artifact-image]').naturalWidth")
        assert width.json_value() > 100
        expect(page.get_by_test_id("artifact-link")).to_have_text("numbers.csv (16 B)")
        page.reload()  # a stored session shows them again, once
        expect(page.get_by_test_id("artifact-image")).to_have_count(1, timeout=20_000)
        browser.close()
        assert not errors, errors
