"""Reading uploaded files: the type from the content, then the text with its structure.

Every parser yields ``Block``s (``_blocks``): a paragraph (or a table row, a JSON leaf
group) with where it sits (page, heading, line/row). The chunker packs blocks into chunks
without crossing a page or a heading, so a citation always names one place.

Parsers stream: they yield blocks as they read, and the chunker consumes them as they
come, so memory stays within a small multiple of the file's size. Every parser counts
what it reads against ``Limits`` (pages, paragraphs, rows, cells, characters) and stops
with ``FileRejected`` at the first one exceeded. They run in a parser process
(``_worker``, started by ``_isolate``), which also bounds CPU time and memory. pypdf and
ijson (the ``files`` extra) are imported only when such a file arrives.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Iterator

from reactchat.knowledge._blocks import Block, Document, FileRejected, Limits, Report, Tally, first_lines
from reactchat.knowledge._office import parse_docx, parse_pdf
from reactchat.knowledge._text import READERS, json_problem

#: a .docx is a ZIP: refuse one that would unpack to more than this (a "zip bomb")
MAX_UNZIPPED = 256 * 2**20

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
                raise FileRejected(f"{name}: the document unpacks to more than {MAX_UNZIPPED // 2**20} MB", "too_large")
            return "docx"
        raise FileRejected(
            f"{name}: a ZIP archive that is not a Word .docx document; upload its files one by one", "unsupported"
        )
    for magic, what in _BINARY_MAGIC.items():
        if data.startswith(magic):
            raise FileRejected(
                f"{name}: {what} is not a supported type (txt, md, html, pdf, docx, csv, json)", "unsupported"
            )
    if ext == "pdf":
        raise FileRejected(f"{name}: named .pdf but it is not a PDF (it does not start with %PDF-)", "unsupported")
    if ext == "docx":
        raise FileRejected(f"{name}: named .docx but it is not a Word document", "unsupported")
    text = decode(data, name)
    head = text[:4096].lstrip()[:1024].lower()
    if ext == "json":
        return "json"  # read as it streams: an error there is "not valid JSON"
    if head[:1] in ("{", "[") and json_problem(text) is None:
        return "json"
    # the extension decides among text kinds; content decides when it says nothing
    if ext in ("md", "markdown"):
        return "markdown"
    if ext in ("html", "htm") or head.startswith(("<!doctype html", "<html")):
        return "html"
    if ext not in ("txt", "text", "csv", "tsv") and re.search(r"<(body|p|div|h[1-6])[\s>]", head):
        return "html"
    if ext not in ("txt", "text", "csv", "tsv") and re.search(r"(?m)^#{1,6} \S", text[:4096]):
        return "markdown"
    if ext in ("csv", "tsv") and _looks_tabular(first_lines(text, 20)):
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
    raise FileRejected(
        f"{name}: binary data of an unknown type; supported: txt, md, html, pdf, docx, csv, json", "unsupported"
    )


def _looks_tabular(sample: list[str]) -> bool:
    if len(sample) < 2:
        return False
    try:
        dialect = csv.Sniffer().sniff("\n".join(sample))
    except csv.Error:
        return False
    try:
        widths = {len(row) for row in csv.reader(sample, dialect)}
    except csv.Error:  # e.g. a field over the csv module's limit: read it as plain text
        return False
    return len(widths) == 1 and widths.pop() > 1


def parse(data: bytes, name: str, limits: Limits | None = None, report: Report | None = None) -> Document:
    """Read a file into blocks, read as they are consumed. Raises ``FileRejected`` for anything
    unreadable or over ``limits``, when sniffing or while the blocks are read."""
    kind = sniff(data, name)
    tally = Tally(limits or Limits(), name)
    if kind in ("pdf", "docx"):
        doc = parse_pdf(data, name, tally, report) if kind == "pdf" else parse_docx(data, name, tally)
    else:
        doc = READERS[kind](decode(data, name), tally)
    doc.blocks = _clean(doc.blocks, doc.kind, name, tally)
    return doc


#: NUL cannot be stored in PostgreSQL text; a lone surrogate (JSON's "\ud800") cannot be encoded
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(text: str) -> str:
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def _clean(blocks: Iterable[Block], kind: str, name: str, tally: Tally) -> Iterator[Block]:
    """Blocks with text, storable anywhere, counted; ``FileRejected`` at the end if there were none."""
    found = False
    try:
        for block in blocks:
            if _UNSTORABLE.search(block.text):
                block.text = _storable(block.text)
            if block.heading and _UNSTORABLE.search(block.heading):
                block.heading = _storable(block.heading)
            if block.text.strip():
                tally.add("chars", len(block.text))
                found = True
                yield block
    except (FileRejected, MemoryError):
        raise
    except Exception as exc:  # odd input (a huge CSV field, a broken page...): a clear rejection
        raise FileRejected(f"{name}: could not be read as {kind} ({type(exc).__name__}: {exc})") from None
    if not found:
        hint = " (a scanned PDF has no text layer: run it through OCR first)" if kind == "pdf" else ""
        raise FileRejected(f"{name}: no text could be read from this {kind} file{hint}")
