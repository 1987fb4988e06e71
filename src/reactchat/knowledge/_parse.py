"""Reading uploaded files: the type from the content, then the text with its structure.

Every parser returns ``Block``s: a paragraph (or a table row, a JSON leaf) with where
it sits (page, heading, line/row). The chunker packs blocks into chunks without
crossing a page or a heading, so a citation always names one place. pypdf and
python-docx are imported only when such a file arrives.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

#: progress(done, total), called from the parsing thread
Report = Callable[[int, int], None]

#: a .docx is a ZIP: refuse one that would unpack to more than this (a "zip bomb")
MAX_UNZIPPED = 256 * 2**20

KINDS = ("text", "markdown", "html", "pdf", "docx", "csv", "json")

_BINARY_MAGIC = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"\x7fELF": "an executable",
    b"MZ": "a Windows executable",
    b"\x1f\x8b": "a gzip archive",
    b"Rar!": "a RAR archive",
    b"7z\xbc\xaf": "a 7-Zip archive",
    b"\xd0\xcf\x11\xe0": "an old Office document (.doc/.xls: save it as .docx or PDF)",
}


class FileRejected(ValueError):
    """An uploaded file cannot be used; the message says why and what to do. Nothing was stored."""


@dataclass
class Block:
    """A unit of a document's structure: a paragraph, a table row, a JSON value."""

    text: str
    page: int | None = None
    heading: str = ""
    #: the first line (text), row (CSV) or item (JSON array) of the block, 1-based
    line: int | None = None


@dataclass
class Document:
    """What a parser read: the kind, the blocks, the page count (PDF) and the unit of ``Block.line``."""

    kind: str
    blocks: list[Block]
    pages: int | None = None
    unit: str = "lines"


def sniff(data: bytes, name: str) -> str:
    """The file's kind, from its bytes; the name's extension only picks among text kinds."""
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if b"%PDF-" in data[:1024]:
        return "pdf"
    if data[:4] == b"PK\x03\x04":
        try:
            members = zipfile.ZipFile(io.BytesIO(data)).infolist()
        except zipfile.BadZipFile:
            raise FileRejected(f"{name}: a damaged ZIP archive, not a readable Word document") from None
        if any(m.filename == "word/document.xml" for m in members):
            if sum(m.file_size for m in members) > MAX_UNZIPPED:
                raise FileRejected(f"{name}: the document unpacks to more than {MAX_UNZIPPED // 2**20} MB")
            return "docx"
        raise FileRejected(f"{name}: a ZIP archive that is not a Word .docx document; upload its files one by one")
    for magic, what in _BINARY_MAGIC.items():
        if data.startswith(magic):
            raise FileRejected(f"{name}: {what} is not a supported type (txt, md, html, pdf, docx, csv, json)")
    if ext == "pdf":
        raise FileRejected(f"{name}: named .pdf but it is not a PDF (it does not start with %PDF-)")
    if ext == "docx":
        raise FileRejected(f"{name}: named .docx but it is not a Word document")
    text = decode(data, name)
    head = text.lstrip()[:1024].lower()
    if head[:1] in ("{", "[") or ext == "json":
        try:
            json.loads(text)
            return "json"
        except json.JSONDecodeError as exc:
            if ext == "json":
                raise FileRejected(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise FileRejected(f"{name}: the JSON is nested too deeply to read") from None
    # the extension decides among text kinds; content decides when it says nothing
    if ext in ("md", "markdown"):
        return "markdown"
    if ext in ("html", "htm") or head.startswith(("<!doctype html", "<html")):
        return "html"
    if ext not in ("txt", "text", "csv", "tsv") and re.search(r"<(body|p|div|h[1-6])[\s>]", head):
        return "html"
    if ext not in ("txt", "text", "csv", "tsv") and re.search(r"(?m)^#{1,6} \S", text[:4096]):
        return "markdown"
    if ext in ("csv", "tsv") and _looks_tabular(text):
        return "csv"
    return "text"


def decode(data: bytes, name: str) -> str:
    """Text from bytes (UTF-8, UTF-16 with a BOM, or Windows-1252), or ``FileRejected`` for binary data."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    elif b"\x00" not in data[:8192]:
        for encoding in ("utf-8-sig", "cp1252"):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError:
                continue
            sample = text[:8192]
            controls = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f")
            if controls <= len(sample) // 100:
                return text
    raise FileRejected(f"{name}: binary data of an unknown type; supported: txt, md, html, pdf, docx, csv, json")


def _looks_tabular(text: str) -> bool:
    lines = [line for line in text.splitlines()[:20] if line.strip()]
    if len(lines) < 2:
        return False
    try:
        dialect = csv.Sniffer().sniff("\n".join(lines))
    except csv.Error:
        return False
    try:
        widths = {len(row) for row in csv.reader(lines, dialect)}
    except csv.Error:  # e.g. a field over the csv module's limit: read it as plain text
        return False
    return len(widths) == 1 and widths.pop() > 1


def parse(data: bytes, name: str, report: Report | None = None) -> Document:
    """Read a file into blocks. Raises ``FileRejected`` for anything unreadable."""
    kind = sniff(data, name)
    try:
        if kind in ("pdf", "docx"):
            from reactchat.knowledge._office import parse_docx, parse_pdf

            doc = parse_pdf(data, name, report) if kind == "pdf" else parse_docx(data, name)
        else:
            text = decode(data, name)
            readers: dict[str, Callable[[str], Document]] = {
                "text": lambda t: _parse_lines(t, "text"),
                "markdown": lambda t: _parse_lines(t, "markdown"),
                "html": _parse_html,
                "csv": _parse_csv,
                "json": _parse_json,
            }
            doc = readers[kind](text)
    except FileRejected:
        raise
    except Exception as exc:  # odd input (a huge CSV field, JSON nested too deep...)
        raise FileRejected(f"{name}: could not be read as {kind} ({type(exc).__name__}: {exc})") from None
    for block in doc.blocks:
        # NUL cannot be stored in PostgreSQL text, and no reader needs it
        block.text = block.text.replace("\x00", "")
        block.heading = block.heading.replace("\x00", "")
    doc.blocks = [b for b in doc.blocks if b.text.strip()]
    if not doc.blocks:
        hint = " (a scanned PDF has no text layer: run it through OCR first)" if kind == "pdf" else ""
        raise FileRejected(f"{name}: no text could be read from this {kind} file{hint}")
    return doc


_FENCE = re.compile(r"^\s*(```|~~~)")
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _parse_lines(text: str, kind: str) -> Document:
    """Plain text and Markdown: paragraphs split on blank lines; ATX headings in Markdown."""
    blocks: list[Block] = []
    path: list[str] = []
    para: list[str] = []
    start = 1
    fenced = False

    def flush() -> None:
        if para:
            blocks.append(Block("\n".join(para), heading=" > ".join(path), line=start))
            para.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if kind == "markdown" and _FENCE.match(line):
            fenced = not fenced
        heading = _ATX.match(line) if kind == "markdown" and not fenced else None
        if heading:
            flush()
            level = len(heading.group(1))
            path[level - 1 :] = [heading.group(2)]
            continue
        if not line.strip() and not fenced:
            flush()
            continue
        if not para:
            start = number
        para.append(line.rstrip())
    flush()
    return Document(kind, blocks)


_SKIP = {"script", "style", "head", "noscript", "template", "svg"}
_BLOCK = {"p", "div", "li", "tr", "br", "pre", "blockquote", "section", "article", "table", "ul", "ol", "dd", "dt"}


class _HTMLText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.path: list[str] = []
        self.parts: list[str] = []
        self.skip = 0
        self.heading_level = 0

    def flush(self) -> None:
        text = " ".join("".join(self.parts).split())
        self.parts.clear()
        if not text:
            return
        if self.heading_level:
            self.path[self.heading_level - 1 :] = [text]
        else:
            self.blocks.append(Block(text, heading=" > ".join(self.path), line=self.getpos()[0]))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.flush()
            self.heading_level = int(tag[1])
        elif tag in _BLOCK:
            self.flush()
        elif tag in ("td", "th"):
            self.parts.append(" | ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self.flush()
            self.heading_level = 0
        elif tag in _BLOCK:
            self.flush()

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def _parse_html(text: str) -> Document:
    reader = _HTMLText()
    reader.feed(text)
    reader.close()
    reader.heading_level = 0
    reader.flush()
    return Document("html", reader.blocks)


def _parse_csv(text: str) -> Document:
    """One block per row, as ``column: value`` pairs so that column names are searchable."""
    sample = "\n".join(text.splitlines()[:20])
    try:
        dialect: Any = csv.Sniffer().sniff(sample)
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        return Document("csv", [], unit="rows")
    header = [h.strip() for h in rows[0]]
    blocks = []
    for number, row in enumerate(rows[1:], 2):
        pairs = [
            f"{header[i] if i < len(header) and header[i] else f'column {i + 1}'}: {v.strip()}"
            for i, v in enumerate(row)
        ]
        blocks.append(Block("; ".join(p for p in pairs if not p.endswith(": ")), line=number))
    return Document("csv", blocks, unit="rows")


def _parse_json(text: str) -> Document:
    """Leaves as ``path: value`` lines; a top-level key is the heading, a top-level array item the unit."""
    root = json.loads(text)
    blocks: list[Block] = []

    def leaves(value: Any, path: str) -> list[str]:
        if isinstance(value, dict):
            return [line for k, v in value.items() for line in leaves(v, f"{path}.{k}")]
        if isinstance(value, list):
            return [line for i, v in enumerate(value) for line in leaves(v, f"{path}[{i}]")]
        return [f"{path.lstrip('.')}: {json.dumps(value, ensure_ascii=False)}"]

    if isinstance(root, list):
        for i, item in enumerate(root):
            blocks.append(Block("\n".join(leaves(item, f"[{i}]")), line=i + 1))
        return Document("json", blocks, unit="items")
    if isinstance(root, dict):
        for key, value in root.items():
            blocks.append(Block("\n".join(leaves(value, str(key))), heading=str(key)))
        return Document("json", blocks, unit="items")
    return Document("json", [Block(json.dumps(root, ensure_ascii=False))], unit="items")
