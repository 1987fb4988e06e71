"""Which facts match a message: BM25 over the scope's facts, fused with embeddings when
the ``embeddings`` extra is on (the knowledge base's query terms, encoder and fusion).

A scope holds few facts (hundreds), so they are ranked in the process from the rows the
store returns: the same code on every store, and a forgotten fact, deleted from the table
with its vector, cannot be found again.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from reactchat.knowledge._index import terms
from reactchat.knowledge._kb import fuse
from reactchat.store._facts import Fact

#: BM25's usual constants
K1, B = 1.2, 0.75


def stem(word: str) -> str:
    """``word`` without a plural or third-person ``s`` ("cycles" finds "cycle"): facts are
    short, so a missed inflection is often the only word they share with a question."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def words(text: str) -> list[str]:
    """The lower-case, stemmed words of ``text``, as ``terms`` splits a query."""
    return [stem(w) for w in re.findall(r"[^\W_]+", text.lower())]


def bm25(query: str, facts: Sequence[Fact]) -> list[tuple[int, float]]:
    """``(index in facts, score)`` of the facts sharing a word with ``query``, best first."""
    wanted = list(dict.fromkeys(stem(t) for t in terms(query)))
    docs = [Counter(words(f.text)) for f in facts]
    if not wanted or not docs:
        return []
    average = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    scored = []
    for i, doc in enumerate(docs):
        length = sum(doc.values())
        score = 0.0
        for term in wanted:
            tf = doc.get(term, 0)
            if tf:
                having = sum(1 for d in docs if term in d)
                idf = math.log(1 + (len(docs) - having + 0.5) / (having + 0.5))
                score += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
        if score > 0:
            scored.append((i, score))
    return sorted(scored, key=lambda pair: -pair[1])


def rank(query: str, facts: Sequence[Fact], dense: list[tuple[int, float]] | None = None) -> list[Fact]:
    """The facts that match ``query``, best first: BM25, fused with ``dense`` (``(index,
    cosine)`` best first) when given."""
    keyword = bm25(query, facts)
    ranked = fuse([keyword, dense]) if dense else keyword
    return [facts[i] for i, _ in ranked]


__all__ = ["bm25", "rank", "words"]
