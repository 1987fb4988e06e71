"""Which facts match a message: BM25 over the scope's facts, fused with embeddings when
the ``embeddings`` extra is on (the knowledge base's query terms, encoder and fusion).

A scope holds few facts (hundreds), so they are ranked in the process from the rows the
store returns: the same code on every store, and a forgotten fact, deleted from the table
with its vector, cannot be found again.
"""

from __future__ import annotations

from collections.abc import Sequence

from reactchat.engine.recall import bm25 as score_texts
from reactchat.engine.recall import stem, words
from reactchat.knowledge._index import terms
from reactchat.knowledge._kb import fuse
from reactchat.store._facts import Fact


def bm25(query: str, facts: Sequence[Fact]) -> list[tuple[int, float]]:
    """``(index in facts, score)`` of the facts sharing a word with ``query`` (its words but
    the question words), best first."""
    return score_texts(list(dict.fromkeys(stem(t) for t in terms(query))), [f.text for f in facts])


def rank(query: str, facts: Sequence[Fact], dense: list[tuple[int, float]] | None = None) -> list[Fact]:
    """The facts that match ``query``, best first: BM25, fused with ``dense`` (``(index,
    cosine)`` best first) when given."""
    keyword = bm25(query, facts)
    ranked = fuse([keyword, dense]) if dense else keyword
    return [facts[i] for i, _ in ranked]


__all__ = ["bm25", "rank", "words"]
