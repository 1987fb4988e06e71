"""Chunking: blocks packed into passages of about ``size`` characters, with overlap.

It streams: blocks are consumed as a parser yields them and chunks come out as they
fill, so a long document never has all its pieces in memory at once.

A chunk never crosses a page or a heading, so each one cites one place. Inside a
section, consecutive chunks share ``overlap`` characters (whole sentences or words
where possible) so that a fact cut at a boundary is still found whole in one chunk.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from reactchat.knowledge._blocks import Block, Document


@dataclass
class Chunk:
    """A passage of a file with its position."""

    text: str
    page: int | None
    heading: str
    #: e.g. "lines 12-20", "rows 2-31"; empty when the kind has no such unit
    span: str


_SENTENCE = re.compile(r"(?<=[.!?。！？;:])\s+")


def _pieces(block: Block, size: int) -> Iterator[tuple[str, int | None]]:
    """A block cut into pieces of at most ``size`` characters: lines, sentences, then words."""
    if len(block.text) <= size:
        yield block.text, block.line
        return
    for offset, text in enumerate(block.text.split("\n")):
        line = None if block.line is None else block.line + offset
        for sentence in _SENTENCE.split(text):
            if len(sentence) <= size:  # the common case, as the loop below would join it
                if words := " ".join(sentence.split()):
                    yield words, line
                continue
            current = ""
            for word in sentence.split():
                while len(word) > size:  # a run without spaces (a URL, base64): cut it hard
                    yield word[:size], line
                    word = word[size:]
                if current and len(current) + 1 + len(word) > size:
                    yield current, line
                    current = ""
                current = f"{current} {word}" if current else word
            if current:
                yield current, line


def chunk(doc: Document, size: int = 1000, overlap: int = 150) -> Iterator[Chunk]:
    """Pack a document's blocks into chunks, as the blocks are read."""
    if overlap >= size:
        raise ValueError("overlap must be smaller than the chunk size")
    for _, group in itertools.groupby(doc.blocks, key=lambda block: (block.page, block.heading)):
        blocks = iter(group)
        first = next(blocks)
        pieces = (piece for block in itertools.chain([first], blocks) for piece in _pieces(block, size))
        yield from _pack(pieces, first, size, overlap, doc.unit)


def _pack(
    pieces: Iterable[tuple[str, int | None]], first: Block, size: int, overlap: int, unit: str
) -> Iterator[Chunk]:
    current: list[tuple[str, int | None]] = []
    length = 0
    fresh = 0  # pieces in ``current`` that no earlier chunk holds
    for text, line in pieces:
        if current and length + len(text) + 1 > size:
            yield _make(current, first, unit)
            current, length = _tail(current, overlap, size - len(text) - 1)
            fresh = 0
        current.append((text, line))
        length += len(text) + 1
        fresh += 1
    if current and fresh:
        yield _make(current, first, unit)


def _tail(pieces: list[tuple[str, int | None]], overlap: int, room: int) -> tuple[list[tuple[str, int | None]], int]:
    """The last pieces of a chunk, up to ``overlap`` characters, to open the next one."""
    kept: list[tuple[str, int | None]] = []
    length = 0
    limit = min(overlap, room)
    for text, line in reversed(pieces):
        if length + len(text) + 1 > limit:
            if not kept and limit > 40:
                # one long piece: keep its last words rather than no overlap at all
                cut = text[-limit:]
                cut = cut[cut.find(" ") + 1 :] if " " in cut else cut
                kept.append((cut, line))
                length = len(cut) + 1
            break
        kept.append((text, line))
        length += len(text) + 1
    kept.reverse()
    return kept, length


def _make(pieces: list[tuple[str, int | None]], first: Block, unit: str) -> Chunk:
    lines = [line for _, line in pieces if line is not None]
    span = ""
    if lines:
        low, high = min(lines), max(lines)
        name = unit if low != high else unit.rstrip("s")
        span = f"{name} {low}" if low == high else f"{name} {low}-{high}"
    joiner = "\n" if unit in ("rows", "items") else " "
    text = joiner.join(text for text, _ in pieces)
    return Chunk(text=text, page=first.page, heading=first.heading, span=span)
