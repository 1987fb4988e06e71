"""What every parser of an uploaded file yields, and what it counts as it reads.

A ``Block`` is a paragraph (or a table row, a JSON leaf group) with where it sits (page,
heading, line/row); a ``Document`` is a file's kind and its blocks, read as they are
consumed. A ``Tally`` counts what a parser reads against ``Limits`` and stops it with
``FileRejected`` at the first one exceeded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

#: progress(done, total), called from the parsing thread
Report = Callable[[int, int], None]

#: text is cut into windows of this many characters, so no list of all its lines is built
WINDOW = 1 << 20
#: a paragraph (or a JSON item) longer than this is passed on in several blocks
BLOCK_CHARS = 1 << 16


class FileRejected(ValueError):
    """An uploaded file cannot be used; the message says why and what to do. Nothing was stored.

    ``reason`` says what kind of problem it is: ``unreadable`` (damaged, empty, bad
    name), ``unsupported`` (a type that is not read), ``too_large`` (over a size or
    content limit: bytes, pages, paragraphs, rows, cells, characters, CPU time or
    memory) or ``full`` (the session has as many files as it may).
    """

    def __init__(self, message: str, reason: str = "unreadable") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    """What reading one file may take; a file over any of them is refused as ``too_large``.

    ``seconds`` is CPU time and ``memory`` the address space of the parser process.
    """

    pages: int = 2_000
    paragraphs: int = 100_000
    rows: int = 200_000
    cells: int = 2_000_000
    chars: int = 25_000_000
    seconds: float = 60.0
    memory: int = 1 << 30


class Tally:
    """What a parser has read so far, checked against ``Limits`` as it goes."""

    NOUNS: ClassVar[dict[str, str]] = {
        "pages": "pages",
        "paragraphs": "paragraphs",
        "rows": "rows",
        "cells": "cells",
        "chars": "characters",
    }

    def __init__(self, limits: Limits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.counts = dict.fromkeys(self.NOUNS, 0)

    def add(self, what: str, n: int = 1) -> None:
        """Count ``n`` more of ``what``; ``FileRejected`` once over the limit."""
        self.counts[what] += n
        self.check(what, self.counts[what])

    def check(self, what: str, count: int) -> None:
        """``FileRejected`` if ``count`` of ``what`` is over the limit."""
        limit: int = getattr(self.limits, what)
        if count > limit:
            raise FileRejected(
                f"{self.name}: more than {limit:,} {self.NOUNS[what]}; split the file or upload the part you need",
                "too_large",
            )


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
    """What a parser reads: the kind, the blocks (read as they are consumed), the PDF page count,
    and the unit of ``Block.line``."""

    kind: str
    blocks: Iterable[Block]
    pages: int | None = None
    unit: str = "lines"


def lines(text: str, keepends: bool = False) -> Iterator[str]:
    """The lines of ``text`` (as ``str.splitlines``), a window at a time: no list of every line."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + WINDOW)
        end = len(text) if end < 0 else end + 1
        yield from text[start:end].splitlines(keepends)
        start = end


def first_lines(text: str, count: int) -> list[str]:
    """The first ``count`` non-blank lines of ``text``."""
    found = []
    for line in lines(text):
        if line.strip():
            found.append(line)
            if len(found) == count:
                break
    return found
