"""Which earlier turns a new message recalls: BM25 over their words.

A summary keeps what its model thought worth keeping, and a small model keeps little. The
turns a summary covers are still in the store, so with compaction on, the few covered
turns whose words best match the new message are carried word for word beside the summary
(``recalled``, within ``RECALL_SHARE`` of the prompt's budget). The ranking is also what
``reactchat.memory`` ranks facts with.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

#: BM25's usual constants
K1, B = 1.2, 0.75
#: recalled turns take at most this share of the prompt's budget, and at most ``RECALLED`` of them
RECALL_SHARE = 0.1
RECALLED = 2


def stem(word: str) -> str:
    """``word`` without a plural or third-person ``s`` ("cycles" finds "cycle"): facts are
    short, so a missed inflection is often the only word they share with a question."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def words(text: str) -> list[str]:
    """The lower-case, stemmed words of ``text``."""
    return [stem(w) for w in re.findall(r"[^\W_]+", text.lower())]


def bm25(wanted: Sequence[str], texts: Sequence[str]) -> list[tuple[int, float]]:
    """``(index in texts, score)`` of the texts sharing a word with ``wanted``, best first."""
    docs = [Counter(words(text)) for text in texts]
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


def recalled(message: str, turns: Sequence[tuple[str, str]], budget: int) -> list[tuple[str, str]]:
    """The turns (question, answer) whose words best match ``message``, at most ``RECALLED``
    within ``budget`` characters, in the order they were said."""
    wanted = list(dict.fromkeys(words(message)))
    picked: list[int] = []
    for index, _ in bm25(wanted, [f"{q}\n{a}" for q, a in turns])[:RECALLED]:
        cost = len(turns[index][0]) + len(turns[index][1])
        if cost <= budget:
            picked.append(index)
            budget -= cost
    return [turns[i] for i in sorted(picked)]


__all__ = ["RECALLED", "RECALL_SHARE", "bm25", "recalled", "stem", "words"]
