"""PDF (pypdf, imported only when a PDF arrives) and Word .docx (read straight from its XML).

A .docx is read as a stream: the ZIP member ``word/document.xml`` is decompressed a
piece at a time into expat, paragraphs are counted as they close, and no tree is
built, so a document of millions of (empty) paragraphs is refused after reading only
as many as the limit allows. No DTD or entity is accepted (no "billion laughs").
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from typing import Any
from xml.parsers import expat

from reactchat.knowledge._blocks import Block, Document, FileRejected, Report, Tally


def parse_pdf(data: bytes, name: str, tally: Tally, report: Report | None) -> Document:
    """Text per page; the outline's (bookmarks') titles become headings."""
    try:
        # optional: the [files] extra
        from pypdf import PdfReader
    except ImportError:
        raise FileRejected("PDF files need pypdf: pip install 'reactchat[files]'", "unsupported") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileRejected(f"{name}: the PDF is password-protected; upload a copy without a password")
        root: Any = reader.trailer["/Root"]
        declared = root["/Pages"].get("/Count", 0)
        if isinstance(declared, int):
            tally.check("pages", declared)  # refused before a page tree of 90,000 pages is walked
        pages = list(reader.pages)
    except FileRejected:
        raise
    except Exception as exc:  # pypdf raises many types on broken files; none must escape as a crash
        raise FileRejected(f"{name}: the PDF could not be read ({type(exc).__name__}: {exc})") from None
    tally.add("pages", len(pages))
    return Document("pdf", _pdf_blocks(reader, pages, name, report), pages=len(pages), unit="lines")


def _pdf_blocks(reader: Any, pages: list[Any], name: str, report: Report | None) -> Iterator[Block]:
    headings = _pdf_outline(reader)
    heading = ""
    for number, page in enumerate(pages, 1):
        heading = headings.get(number, heading)
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # one damaged page is reported, not silently skipped
            raise FileRejected(f"{name}: page {number} could not be read ({type(exc).__name__}: {exc})") from None
        for para in re.split(r"\n\s*\n", text):
            if para.strip():
                yield Block(para.strip(), page=number, heading=heading)
        if report is not None:
            report(number, len(pages))


def _pdf_outline(reader: Any) -> dict[int, str]:
    """Page number → the title of the outline entry (bookmark) starting there."""
    found: dict[int, str] = {}

    def walk(items: Any) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
                continue
            try:
                found.setdefault(reader.get_destination_page_number(item) + 1, str(item.title))
            except Exception:
                continue  # a dangling bookmark only loses a heading

    try:
        walk(reader.outline)
    except Exception:
        return {}
    return found


_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
#: pieces of decompressed XML handed to expat at a time
_PIECE = 1 << 16
#: styles.xml larger than this is ignored (headings are then found by style id only)
_MAX_STYLES = 8 << 20


def parse_docx(data: bytes, name: str, tally: Tally) -> Document:
    """Paragraphs and table rows in order; Heading N and Title styles become headings."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        styles = _style_names(archive)
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise FileRejected(f"{name}: the Word document could not be read ({type(exc).__name__}: {exc})") from None
    return Document("docx", _docx_blocks(archive, styles, name, tally), unit="paragraphs")


def _parser(start: Any, end: Any, text: Any) -> Any:
    """An expat parser with namespaces that refuses any DTD or entity declaration."""
    parser = expat.ParserCreate(namespace_separator=" ")

    def refuse(*_: object) -> None:
        raise FileRejected("the document declares a DTD or entities, which Word documents never do")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    return parser


def _style_names(archive: zipfile.ZipFile) -> dict[str, str]:
    """Style id → style name (``Heading1`` → ``heading 1``), from ``word/styles.xml`` if any."""
    try:
        info = archive.getinfo("word/styles.xml")
    except KeyError:
        return {}
    if info.file_size > _MAX_STYLES:
        return {}
    names: dict[str, str] = {}
    current: list[str] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag == f"{_W} style":
            current[:] = [attrs.get(f"{_W} styleId", "")]
        elif tag == f"{_W} name" and current:
            names[current[0]] = attrs.get(f"{_W} val", "")

    _parser(start, lambda tag: None, lambda text: None).Parse(archive.read(info), True)
    return names


def _heading_level(style: str) -> int:
    """1-9 for a heading style, 1 for Title, 0 otherwise."""
    level = re.fullmatch(r"heading\s*(\d)", style.strip(), re.IGNORECASE)
    if level:
        return int(level.group(1))
    return 1 if style.strip().lower() == "title" else 0


class _Body:
    """Expat handlers that turn ``document.xml`` into blocks, collected in ``ready``."""

    def __init__(self, styles: dict[str, str], tally: Tally) -> None:
        self.styles = styles
        self.tally = tally
        self.ready: list[Block] = []
        self.path: list[str] = []  # the headings above
        self.item = 0  # body-level paragraphs and tables, 1-based
        self.tables = 0  # depth of table nesting
        self.text: list[str] | None = None  # the current paragraph's text
        self.in_text = False
        self.style = ""
        self.rows: list[list[list[str]]] = []  # the open table rows (nested tables), each a list of cells

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        local = tag.rsplit(" ", 1)[-1] if tag.startswith(_W) else ""
        if local == "p":
            self.tally.add("paragraphs")
            self.text, self.style = [], ""
            if not self.tables:
                self.item += 1
        elif local == "t" and self.text is not None:
            self.in_text = True
        elif local == "tab" and self.text is not None:
            self.text.append("\t")
        elif local in ("br", "cr") and self.text is not None:
            self.text.append("\n")
        elif local == "pStyle":
            self.style = attrs.get(f"{_W} val", "")
        elif local == "tbl":
            if not self.tables:
                self.item += 1
            self.tables += 1
        elif local == "tr":
            self.tally.add("rows")
            self.rows.append([])
        elif local == "tc" and self.rows:
            self.tally.add("cells")
            self.rows[-1].append([])

    def end(self, tag: str) -> None:
        local = tag.rsplit(" ", 1)[-1] if tag.startswith(_W) else ""
        if local == "t":
            self.in_text = False
        elif local == "p" and self.text is not None:
            self._paragraph("".join(self.text).strip())
            self.text = None
        elif local == "tr" and self.rows:
            row = " | ".join("\n".join(cell).strip() for cell in self.rows.pop())
            self.ready.append(Block(row, heading=" > ".join(self.path), line=self.item))
        elif local == "tbl":
            self.tables -= 1

    def _paragraph(self, text: str) -> None:
        if self.tables:
            if self.rows and self.rows[-1]:
                self.rows[-1][-1].append(text)
            return
        level = _heading_level(self.styles.get(self.style, self.style))
        if text and level:
            self.path[level - 1 :] = [text]
        else:
            self.ready.append(Block(text, heading=" > ".join(self.path), line=self.item))

    def chars(self, data: str) -> None:
        if self.in_text and self.text is not None:
            self.text.append(data)


def _docx_blocks(archive: zipfile.ZipFile, styles: dict[str, str], name: str, tally: Tally) -> Iterator[Block]:
    body = _Body(styles, tally)
    parser = _parser(body.start, body.end, body.chars)
    try:
        with archive.open("word/document.xml") as xml:
            while piece := xml.read(_PIECE):
                parser.Parse(piece, False)
                yield from body.ready
                body.ready.clear()
            parser.Parse(b"", True)
    except FileRejected as exc:
        if exc.reason == "too_large":
            raise
        raise FileRejected(f"{name}: {exc}") from None
    except (expat.ExpatError, zipfile.BadZipFile, KeyError, OSError, EOFError) as exc:
        raise FileRejected(f"{name}: the Word document could not be read ({type(exc).__name__}: {exc})") from None
    yield from body.ready
