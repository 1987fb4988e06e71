"""PDF (pypdf) and Word (python-docx) files, imported only when such a file arrives."""

from __future__ import annotations

import io
import re
from typing import Any

from reactchat.knowledge._parse import Block, Document, FileRejected, Report


def parse_pdf(data: bytes, name: str, report: Report | None) -> Document:
    """Text per page; the outline's (bookmarks') titles become headings."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError:
        raise FileRejected("PDF files need pypdf: pip install 'reactchat[files]'") from None
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FileRejected(f"{name}: the PDF is password-protected; upload a copy without a password")
        pages = list(reader.pages)
    except FileRejected:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError, NotImplementedError) as exc:
        raise FileRejected(f"{name}: the PDF could not be read ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # pypdf raises many types on broken files; none must escape as a crash
        raise FileRejected(f"{name}: the PDF could not be read ({type(exc).__name__}: {exc})") from None
    headings = _pdf_outline(reader)
    blocks: list[Block] = []
    heading = ""
    for number, page in enumerate(pages, 1):
        heading = headings.get(number, heading)
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # one damaged page is reported, not silently skipped
            raise FileRejected(f"{name}: page {number} could not be read ({type(exc).__name__}: {exc})") from None
        for para in re.split(r"\n\s*\n", text):
            if para.strip():
                blocks.append(Block(para.strip(), page=number, heading=heading))
        if report is not None:
            report(number, len(pages))
    return Document("pdf", blocks, pages=len(pages), unit="lines")


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


def parse_docx(data: bytes, name: str) -> Document:
    """Paragraphs and table rows in order; Heading N and Title styles become headings."""
    try:
        import docx
    except ImportError:
        raise FileRejected("Word files need python-docx: pip install 'reactchat[files]'") from None
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:
        raise FileRejected(f"{name}: the Word document could not be read ({type(exc).__name__}: {exc})") from None
    blocks: list[Block] = []
    path: list[str] = []
    for number, item in enumerate(document.iter_inner_content(), 1):
        if hasattr(item, "rows"):
            for row in item.rows:
                cells = " | ".join(cell.text.strip() for cell in row.cells)
                blocks.append(Block(cells, heading=" > ".join(path), line=number))
            continue
        style = (item.style.name if item.style is not None else "") or ""
        text = item.text.strip()
        level = re.fullmatch(r"Heading (\d)", style)
        if text and (level or style == "Title"):
            depth = int(level.group(1)) if level else 1
            path[depth - 1 :] = [text]
        else:
            blocks.append(Block(text, heading=" > ".join(path), line=number))
    return Document("docx", blocks, unit="paragraphs")
