"""Hostile uploads for the hardening tests and ``benchmarks/attacks.py``.

Each generator writes a small file that is expensive to read: a .docx of hundreds of
thousands of paragraphs, one that unpacks to hundreds of megabytes of empty
paragraphs, a large JSON array of small objects, long CSV and text files, and a PDF of
many pages that all draw one large content stream. The .docx XML is streamed into the
ZIP, so even the 240 MB one is written without holding it in memory.
"""

from __future__ import annotations

import zlib
from pathlib import Path

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>"
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>'
)
_DOCUMENT_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
)
_DOCUMENT_TAIL = "</w:body></w:document>"


def docx_of_paragraphs(path: Path, count: int, paragraph: str = "<w:p><w:r><w:t>a</w:t></w:r></w:p>") -> Path:
    """A .docx whose body is ``count`` copies of ``paragraph`` (XML), streamed into the ZIP."""
    import zipfile

    batch = paragraph.encode() * 10_000
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        with archive.open("word/document.xml", "w", force_zip64=True) as body:
            body.write(_DOCUMENT_HEAD.encode())
            left = count
            while left >= 10_000:
                body.write(batch)
                left -= 10_000
            body.write(paragraph.encode() * left)
            body.write(_DOCUMENT_TAIL.encode())
    return path


def many_paragraphs_docx(path: Path, count: int = 700_000) -> Path:
    """The issue's 105 KB .docx: 700k one-letter paragraphs (python-docx took minutes)."""
    return docx_of_paragraphs(path, count)


def empty_paragraphs_docx(path: Path, count: int = 40_000_000) -> Path:
    """The issue's 386 KB .docx: 40 million empty paragraphs, 240 MB of XML."""
    return docx_of_paragraphs(path, count, "<w:p/>")


def json_array(path: Path, size: int = 20_000_000) -> Path:
    """A JSON array of small objects, about ``size`` bytes (a 20 MB one peaked at 3 GB)."""
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        written, i = 1, 0
        while written < size:
            item = f'{"," if i else ""}{{"id":{i},"name":"n{i}","tags":["a","b"]}}'
            out.write(item)
            written += len(item)
            i += 1
        out.write("]")
    return path


def csv_rows(path: Path, size: int = 20_000_000, row: bytes = b"1,2,3\n") -> Path:
    """A CSV of ``row`` repeated to about ``size`` bytes (short rows: over the rows limit)."""
    path.write_bytes(b"a,b,c\n" + row * (size // len(row)))
    return path


def csv_records(path: Path, size: int = 20_000_000) -> Path:
    """A CSV of 120-byte records, about ``size`` bytes: a large table within the limits."""
    row = b"%s,Rue Lepic %s,a rose bouquet of twelve stems,80.16,delivered before noon to the second floor\n"
    with path.open("wb") as out:
        out.write(b"id,street,item,price,note\n")
        for n in range(size // 120):
            out.write(row % (b"%07d" % n, b"%05d" % (n % 99999)))
    return path


def text_lines(path: Path, size: int = 20_000_000) -> Path:
    """Plain text of one-word lines with no blank line, about ``size`` bytes: one huge paragraph."""
    path.write_bytes(b"word\n" * (size // 5))
    return path


def text_paragraphs(path: Path, size: int = 20_000_000) -> Path:
    """Plain prose, about ``size`` bytes: paragraphs of five sentences."""
    sentence = "The train to Lyon leaves platform %d at 9:%02d and the rose costs %d euros. "
    with path.open("w", encoding="utf-8") as out:
        written, n = 0, 0
        while written < size:
            para = "".join(sentence % (n % 30, n % 60, n % 97 + k) for k in range(5)) + "\n\n"
            out.write(para)
            written += len(para)
            n += 1
    return path


def shared_stream_pdf(path: Path, pages: int = 90_000, draws: int = 20_000) -> Path:
    """A PDF of ``pages`` pages that all draw one compressed content stream of ``draws`` text draws.

    The file stays small (the stream is stored once), but a reader that extracts text
    page by page decodes and interprets the whole stream for every page.
    """
    draw = b"BT /F1 9 Tf 40 700 Td (All work and no play makes a dull page.) Tj ET\n"
    stream = zlib.compress(draw * draws, 9)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, once the page objects are numbered
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    first = len(objects) + 1
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
        b"/Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    )
    objects.extend([page] * pages)
    kids = b" ".join(b"%d 0 R" % n for n in range(first, first + pages))
    objects[1] = b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages
    with path.open("wb") as out:
        out.write(b"%PDF-1.4\n")
        offsets = []
        position = 9
        for number, body in enumerate(objects, 1):
            offsets.append(position)
            chunk = b"%d 0 obj\n" % number + body + b"\nendobj\n"
            out.write(chunk)
            position += len(chunk)
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
        out.write(b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, position))
    return path


def json_records(path: Path, size: int = 20_000_000) -> Path:
    """A JSON array of 200-byte records, about ``size`` bytes: a large data set within the limits."""
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        written, n = 1, 0
        while written < size:
            item = (
                f'{"," if n else ""}{{"id": {n}, "street": "Rue Lepic {n % 99999}", "price": 80.16, '
                f'"note": "a rose bouquet of twelve stems delivered before noon to the second floor"}}'
            )
            out.write(item)
            written += len(item)
            n += 1
        out.write("]")
    return path
