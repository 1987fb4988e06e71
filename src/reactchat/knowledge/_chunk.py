"""Chunking: blocks packed into passages of about ``size`` characters, with overlap.

A chunk never crosses a page or a heading, so each one cites one place. Inside a
section, consecutive chunks share ``overlap`` characters (whole sentences or words
where possible) so that a fact cut at a boundary is still found whole in one chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reactchat.knowledge._parse import Block, Document


@dataclass
class Chunk:
    """A passage of a file with its position."""

    text: str
    page: int | None
    heading: str
    #: e.g. "lines 12-20", "rows 2-31"; empty when the kind has no such unit
    span: str


_SENTENCE = re.compile(r"(?<=[.!?。！？;:])\s+")


def _pieces(block: Block, size: int) -> list[tuple[str, int | None]]:
    """A block cut into pieces of at most ``size`` characters: lines, sentences, then words."""
    if len(block.text) <= size:
        return [(block.text, block.line)]
    pieces: list[tuple[str, int | None]] = []
    for offset, text in enumerate(block.text.split("\n")):
        line = None if block.line is None else block.line + offset
        for sentence in _SENTENCE.split(text):
            current = ""
            for word in sentence.split():
                while len(word) > size:  # a run without spaces (a URL, base64): cut it hard
                    pieces.append((word[:size], line))
                    word = word[size:]
                if current and len(current) + 1 + len(word) > size:
                    pieces.append((current, line))
                    current = ""
                current = f"{current} {word}" if current else word
            if current:
                pieces.append((current, line))
    return pieces


def chunk(doc: Document, size: int = 1000, overlap: int = 150) -> list[Chunk]:
    """Pack a document's blocks into chunks."""
    if overlap >= size:
        raise ValueError("overlap must be smaller than the chunk size")
    chunks: list[Chunk] = []
    group: list[Block] = []

    def flush() -> None:
        if group:
            chunks.extend(_pack(group, size, overlap, doc.unit))
            group.clear()

    for block in doc.blocks:
        if group and (block.page, block.heading) != (group[0].page, group[0].heading):
            flush()
        group.append(block)
    flush()
    return chunks


def _pack(blocks: list[Block], size: int, overlap: int, unit: str) -> list[Chunk]:
    pieces = [piece for block in blocks for piece in _pieces(block, size)]
    out: list[Chunk] = []
    current: list[tuple[str, int | None]] = []
    length = 0
    fresh = 0  # pieces in ``current`` that no earlier chunk holds
    for text, line in pieces:
        if current and length + len(text) + 1 > size:
            out.append(_make(current, blocks[0], unit))
            current, length = _tail(current, overlap, size - len(text) - 1)
            fresh = 0
        current.append((text, line))
        length += len(text) + 1
        fresh += 1
    if current and fresh:
        out.append(_make(current, blocks[0], unit))
    return out


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
