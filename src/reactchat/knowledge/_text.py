"""Readers of the text kinds: plain text, Markdown, HTML, CSV and JSON, each a stream of blocks.

Each reader takes the decoded text and a ``Tally`` and yields ``Block``s as it goes;
none builds a list of every line, row or value, so memory stays within a small
multiple of the text.
"""

from __future__ import annotations

import collections
import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import Any

from reactchat.knowledge._blocks import BLOCK_CHARS, WINDOW, Block, Document, FileRejected, Tally, first_lines, lines

_FENCE = re.compile(r"^\s*(```|~~~)")
_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _parse_text(text: str, tally: Tally) -> Document:
    return Document("text", _lines_blocks(text, "text", tally))


def _parse_markdown(text: str, tally: Tally) -> Document:
    return Document("markdown", _lines_blocks(text, "markdown", tally))


def _lines_blocks(text: str, kind: str, tally: Tally) -> Iterator[Block]:
    """Plain text and Markdown: paragraphs split on blank lines; ATX headings in Markdown."""
    path: list[str] = []
    para: list[str] = []
    size = 0
    start = 1
    fenced = False

    def flush() -> Block:
        nonlocal size
        block = Block("\n".join(para), heading=" > ".join(path), line=start)
        para.clear()
        size = 0
        tally.add("paragraphs")
        return block

    for number, line in enumerate(lines(text), 1):
        if kind == "markdown" and _FENCE.match(line):
            fenced = not fenced
        heading = _ATX.match(line) if kind == "markdown" and not fenced else None
        if heading or (not line.strip() and not fenced) or size > BLOCK_CHARS:
            if para:
                yield flush()
            if heading:
                level = len(heading.group(1))
                path[level - 1 :] = [heading.group(2)]
            if heading or not line.strip():
                continue
        if not para:
            start = number
        para.append(line.rstrip())
        size += len(line)
    if para:
        yield flush()


_SKIP = {"script", "style", "head", "noscript", "template", "svg"}
_BLOCK = {"p", "div", "li", "tr", "br", "pre", "blockquote", "section", "article", "table", "ul", "ol", "dd", "dt"}


class _HTMLText(HTMLParser):
    def __init__(self, tally: Tally) -> None:
        super().__init__(convert_charrefs=True)
        self.tally = tally
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
            self.tally.add("paragraphs")
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


def _parse_html(text: str, tally: Tally) -> Document:
    return Document("html", _html_blocks(text, tally))


def _html_blocks(text: str, tally: Tally) -> Iterator[Block]:
    reader = _HTMLText(tally)
    for start in range(0, len(text), WINDOW // 16):
        reader.feed(text[start : start + WINDOW // 16])
        yield from reader.blocks
        reader.blocks.clear()
    reader.close()
    reader.heading_level = 0
    reader.flush()
    yield from reader.blocks


def _parse_csv(text: str, tally: Tally) -> Document:
    return Document("csv", _csv_blocks(text, tally), unit="rows")


def _csv_blocks(text: str, tally: Tally) -> Iterator[Block]:
    """One block per row, as ``column: value`` pairs so that column names are searchable."""
    try:
        dialect: Any = csv.Sniffer().sniff("\n".join(first_lines(text, 20)))
    except csv.Error:
        dialect = csv.excel
    rows = csv.reader(lines(text, keepends=True), dialect)
    header = [h.strip() for h in next(rows, [])]
    tally.add("rows")
    tally.add("cells", len(header))
    for number, row in enumerate(rows, 2):
        tally.add("rows")
        tally.add("cells", len(row))
        pairs = [
            f"{header[i] if i < len(header) and header[i] else f'column {i + 1}'}: {v.strip()}"
            for i, v in enumerate(row)
        ]
        yield Block("; ".join(p for p in pairs if not p.endswith(": ")), line=number)


#: JSON nested deeper than this is refused (nobody writes it; it only costs)
MAX_DEPTH = 200


def _stream(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode("utf-8", "surrogatepass"))


def _ijson() -> Any:
    """The ijson module, or ``FileRejected`` that names the extra to install."""
    try:
        # optional: the [files] extra
        import ijson  # type: ignore[import-untyped]
    except ImportError:
        raise FileRejected("JSON files need ijson: pip install 'reactchat[files]'", "unsupported") from None
    return ijson


def json_problem(text: str) -> str | None:
    """None if ``text`` is one JSON value, else what is wrong (checked as a stream, in C: nothing is built)."""
    ijson = _ijson()
    try:
        collections.deque(ijson.basic_parse(_stream(text)), maxlen=0)
    except (ijson.JSONError, ValueError) as exc:
        return str(exc).split("\n", 1)[0] or "not JSON"
    return None


def _parse_json(text: str, tally: Tally) -> Document:
    return Document("json", _json_blocks(text, tally), unit="items")


def _json_blocks(text: str, tally: Tally) -> Iterator[Block]:
    """Leaves as ``path: value`` lines; a top-level key is the heading, a top-level array item the
    unit. Top-level items are read one at a time, so only the largest one is ever in memory."""
    ijson = _ijson()
    start = re.search(r"\S", text)
    first = start.group() if start else ""
    try:
        if first == "[":
            for number, item in enumerate(ijson.items(_stream(text), "item", use_float=True)):
                tally.add("rows")
                yield from _leaf_blocks(item, f"[{number}]", tally, Block("", line=number + 1))
        elif first == "{":
            for key, value in ijson.kvitems(_stream(text), "", use_float=True):
                tally.add("rows")
                yield from _leaf_blocks(value, key, tally, Block("", heading=key))
        else:
            for value in ijson.items(_stream(text), "", use_float=True):
                yield Block(json.dumps(value, ensure_ascii=False))
    except FileRejected:
        raise
    except (ijson.JSONError, ValueError) as exc:
        problem = str(exc).split("\n", 1)[0] or "not JSON"
        raise FileRejected(f"{tally.name}: not valid JSON ({problem})") from None
    except MemoryError:  # ijson's C parser gives up on very deep nesting this way
        raise FileRejected(f"{tally.name}: the JSON is nested too deeply or too large to read", "too_large") from None


def _leaf_blocks(value: Any, path: str, tally: Tally, like: Block) -> Iterator[Block]:
    """The leaves of ``value`` under ``path``, in blocks of up to ``BLOCK_CHARS`` placed as ``like``."""
    pending: list[str] = []
    size = 0
    todo: list[tuple[Any, str, int]] = [(value, path, 0)]
    while todo:
        node, where, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise FileRejected(
                f"{tally.name}: the JSON is nested too deeply to read (over {MAX_DEPTH} levels)", "too_large"
            )
        if isinstance(node, dict):
            todo += [(v, f"{where}.{k}", depth + 1) for k, v in reversed(node.items())]
        elif isinstance(node, list):
            todo += [(v, f"{where}[{i}]", depth + 1) for i, v in reversed(list(enumerate(node)))]
        else:
            rendered = str(node) if type(node) is int else json.dumps(node, ensure_ascii=False)
            line = f"{where}: {rendered}"
            pending.append(line)
            size += len(line)
            if size > BLOCK_CHARS:
                tally.add("cells", len(pending))
                yield Block("\n".join(pending), heading=like.heading, line=like.line)
                pending, size = [], 0
    if pending:
        tally.add("cells", len(pending))
        yield Block("\n".join(pending), heading=like.heading, line=like.line)


#: the reader of each text kind
READERS: dict[str, Callable[[str, Tally], Document]] = {
    "text": _parse_text,
    "markdown": _parse_markdown,
    "html": _parse_html,
    "csv": _parse_csv,
    "json": _parse_json,
}
