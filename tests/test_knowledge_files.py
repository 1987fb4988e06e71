"""Reading uploaded files: every supported type, type by content, and clear rejections."""

from __future__ import annotations

import io
import itertools
import json
import sys
import zipfile
from pathlib import Path

import pytest

from reactchat.knowledge import FileRejected, Hit, KnowledgeBase, render
from reactchat.knowledge._parse import parse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from tinypdf import make_pdf

SESSION = "s1"


@pytest.fixture
def kb() -> KnowledgeBase:
    return KnowledgeBase("memory:")


async def only_hit(kb: KnowledgeBase, query: str) -> Hit:
    hits = await kb.search(SESSION, query, k=1)
    assert hits, f"nothing found for {query!r}"
    return hits[0]


async def test_markdown_chunks_cite_their_heading_and_lines(kb: KnowledgeBase) -> None:
    text = (
        "# Guide\n\nIntro text.\n\n## Install\n\n```\n# not a heading\npip install thing\n```\n\n"
        "## Usage\n\nRun the frobnicator daily.\n"
    )
    info = await kb.add_file(SESSION, "guide.md", text.encode())
    assert (info.kind, info.pages) == ("markdown", None)
    hit = await only_hit(kb, "frobnicator")
    assert (hit.name, hit.heading, hit.span) == ("guide.md", "Guide > Usage", "line 14")
    assert "§ Guide > Usage" in hit.where
    fenced = await only_hit(kb, "pip install")
    assert fenced.heading == "Guide > Install" and "# not a heading" in fenced.text


async def test_html_keeps_headings_and_drops_scripts(kb: KnowledgeBase) -> None:
    page = (
        "<!DOCTYPE html><html><head><title>t</title><script>var secretcode = 1;</script></head><body>"
        "<h1>Prices</h1><p>A bouquet of roses costs 80.16&nbsp;dollars.</p>"
        "<table><tr><td>tulip</td><td>3</td></tr></table></body></html>"
    )
    info = await kb.add_file(SESSION, "page.html", page.encode())
    assert info.kind == "html"
    hit = await only_hit(kb, "roses bouquet")
    assert hit.heading == "Prices" and "80.16" in hit.text
    assert await kb.search(SESSION, "secretcode") == []
    assert "tulip | 3" in (await only_hit(kb, "tulip")).text


async def test_pdf_pages_and_outline_are_positions(kb: KnowledgeBase) -> None:
    data = make_pdf(
        [["Chapter one text."], ["The quokka lives on Rottnest Island."], ["Chapter two about owls."]],
        outline=[("Animals", 1), ("Birds", 3)],
    )
    # the name says .txt: the content decides
    info = await kb.add_file(SESSION, "scan.txt", data)
    assert (info.kind, info.pages) == ("pdf", 3)
    hit = await only_hit(kb, "quokka")
    assert (hit.page, hit.heading) == (2, "Animals")
    assert hit.where.startswith("page 2 · § Animals")
    assert (await only_hit(kb, "owls")).heading == "Birds"


async def test_docx_headings_and_tables(kb: KnowledgeBase) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Budget", level=1)
    document.add_paragraph("The travel budget is 1200 euros.")
    table = document.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "hotel"
    table.rows[0].cells[1].text = "450"
    buffer = io.BytesIO()
    document.save(buffer)
    info = await kb.add_file(SESSION, "plan.docx", buffer.getvalue())
    assert info.kind == "docx"
    hit = await only_hit(kb, "travel budget")
    assert hit.heading == "Budget" and "1200" in hit.text
    assert "hotel | 450" in (await only_hit(kb, "hotel")).text


async def test_csv_rows_carry_column_names(kb: KnowledgeBase) -> None:
    rows = ["city,population,country"] + [f"town{i},{i * 1000},Nowhere" for i in range(1, 200)] + ["Lyon,522000,France"]
    info = await kb.add_file(SESSION, "cities.csv", "\n".join(rows).encode())
    assert info.kind == "csv" and info.chunks > 1
    hit = await only_hit(kb, "Lyon population")
    assert "city: Lyon; population: 522000" in hit.text
    assert hit.span.startswith("rows ") and hit.span.endswith("-201")


async def test_json_leaves_are_searchable_by_path(kb: KnowledgeBase) -> None:
    data = {"owner": {"name": "Ada", "city": "London"}, "pets": [{"kind": "cat", "name": "Tabby"}]}
    info = await kb.add_file(SESSION, "profile.json", json.dumps(data).encode())
    assert info.kind == "json"
    hit = await only_hit(kb, "Tabby")
    assert hit.heading == "pets" and 'pets[0].name: "Tabby"' in hit.text


async def test_the_extension_picks_among_text_kinds(kb: KnowledgeBase) -> None:
    notes = await kb.add_file(SESSION, "notes.txt", b"# not a heading in a text file\n\nplain words")
    page = await kb.add_file(SESSION, "readme.md", b"# Title\n\n<div>inline html</div> in markdown")
    bare = await kb.add_file(SESSION, "page", b"<p>Hello <b>there</b></p>")
    wide = await kb.add_file(SESSION, "wide.csv", b"a,b\n1,2\n" + b'3,"' + b"x" * 200_000 + b'"\n')
    assert (notes.kind, page.kind, bare.kind, wide.kind) == ("text", "markdown", "html", "text")
    assert (await only_hit(kb, "inline html")).heading == "Title"


async def test_text_in_windows_1252_and_utf16(kb: KnowledgeBase) -> None:
    await kb.add_file(SESSION, "a.txt", "Crème brûlée recipe".encode("cp1252"))
    await kb.add_file(SESSION, "b.txt", "Gâteau au chocolat".encode("utf-16"))
    assert "brûlée" in (await only_hit(kb, "creme brulee")).text
    assert (await only_hit(kb, "chocolat")).name == "b.txt"


async def test_long_text_chunks_overlap_and_cover_everything() -> None:
    kb = KnowledgeBase("memory:", chunk_chars=300, overlap=80)
    sentences = [f"Sentence number {i} mentions token{i}." for i in range(120)]
    info = await kb.add_file(SESSION, "long.txt", " ".join(sentences).encode())
    assert info.chunks > 10
    for i in range(0, 120, 7):
        hit = await only_hit(kb, f"token{i}")
        assert f"token{i}." in hit.text and len(hit.text) <= 300
    # consecutive chunks overlap: each one starts with the last sentence of the one before
    chunks = await kb.search(SESSION, "sentence", k=info.chunks)
    assert len(chunks) == info.chunks
    ordered = sorted((c.text for c in chunks), key=lambda t: int(t.split("token")[1].split(".")[0]))
    for before, after in itertools.pairwise(ordered):
        opening = after.split(".")[0] + "."
        assert opening in before, (before, after)
    covered = set(" ".join(ordered).split())
    assert all(f"token{i}." in covered for i in range(120))


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("../etc/passwd", b"root:x:0:0", "without folders"),
        ("a/b.txt", b"hello", "without folders"),
        ("..", b"hello", "without folders"),
        ("empty.txt", b"", "is empty"),
        ("fake.pdf", b"just text", "not a PDF"),
        ("fake.docx", b"just text", "not a Word document"),
        ("image.txt", b"\x89PNG\r\n\x1a\n" + bytes(100), "PNG image"),
        ("blob.bin", bytes(range(256)) * 10, "binary data"),
        ("program.txt", b"\x7fELF\x02\x01\x01" + bytes(200), "an executable"),
        ("broken.json", b'{"a": 1,', "not valid JSON"),
        ("broken.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage", "could not be read"),
        ("blank.pdf", make_pdf([[], []]), "no text could be read"),
        ("blank.md", b"\n\n   \n", "no text could be read"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
async def test_bad_files_are_rejected_and_nothing_is_stored(
    kb: KnowledgeBase, name: str, data: bytes, message: str
) -> None:
    with pytest.raises(FileRejected, match=message):
        await kb.add_file(SESSION, name, data)
    assert await kb.files(SESSION) == []


async def test_zip_that_is_not_a_word_document_is_rejected(kb: KnowledgeBase) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(FileRejected, match=r"not a Word \.docx"):
        await kb.add_file(SESSION, "sheet.docx", buffer.getvalue())


async def test_password_protected_pdf_is_rejected(kb: KnowledgeBase) -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(make_pdf([["secret plans"]]))).pages:
        writer.add_page(page)
    writer.encrypt("hunter2", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(FileRejected, match="password-protected"):
        await kb.add_file(SESSION, "locked.pdf", buffer.getvalue())
    assert await kb.files(SESSION) == []


async def test_size_limit_and_file_count_limit() -> None:
    kb = KnowledgeBase("memory:", max_bytes=1000, max_files=2)
    with pytest.raises(FileRejected, match="over the"):
        await kb.add_file(SESSION, "big.txt", b"x " * 600)
    await kb.add_file(SESSION, "one.txt", b"one")
    await kb.add_file(SESSION, "two.txt", b"two")
    with pytest.raises(FileRejected, match="already has 2 files"):
        await kb.add_file(SESSION, "three.txt", b"three")
    assert [f.name for f in await kb.files(SESSION)] == ["one.txt", "two.txt"]


def test_render_keeps_every_citation_within_the_budget() -> None:
    hits = [Hit(f"f{i}", f"file{i}.pdf", "word " * 2000, i + 1, "Intro", "", 1.0) for i in range(5)]
    text = render("word", hits, budget=1500)
    assert len(text) <= 1500
    for i in range(5):
        assert f"[{i + 1}] file{i}.pdf · page {i + 1} · § Intro" in text
    assert "No passage" in render("nothing", [], budget=1500)


@pytest.mark.parametrize(("name", "data"), [("data.json", b'{"a": 1}'), ("notes.txt", b'["looks", "like", "JSON"]')])
def test_json_without_the_files_extra_is_refused_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, name: str, data: bytes
) -> None:
    monkeypatch.setitem(sys.modules, "ijson", None)  # what an absent package looks like to import
    with pytest.raises(FileRejected, match=r"pip install 'reactchat\[files\]'") as info:
        list(parse(data, name).blocks)
    assert info.value.reason == "unsupported"
