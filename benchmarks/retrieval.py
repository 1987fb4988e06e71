"""Retrieval benchmark for the uploaded-file knowledge base.

    python benchmarks/retrieval.py [--postgres URL] [--no-dense] [--json OUT]

Measures, on the Python Language Reference topics (benchmarks/data/pyref, 79 files)
and 48 questions written for it (benchmarks/data/questions.json):

- recall@5 and MRR@5 of keyword search (SQLite FTS5 BM25; PostgreSQL ts_rank when a
  server is given or REACTCHAT_TEST_POSTGRES is set), dense search alone (MiniLM) and
  the hybrid (reciprocal rank fusion of the two);
- search latency (p50 / p95) for each;
- ingestion speed of a 100-page PDF built from the same text (pages/s), with and
  without embeddings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from reactchat.knowledge import KnowledgeBase  # noqa: E402
from tinypdf import make_pdf  # noqa: E402

DATA = HERE / "data"
K = 5


def corpus() -> dict[str, bytes]:
    """File name → bytes of the reference topics."""
    return {p.name: p.read_bytes() for p in sorted((DATA / "pyref").glob("*.txt"))}


def questions() -> list[dict[str, Any]]:
    """The question set: ``{"q": text, "expect": [topic, ...]}``."""
    loaded: list[dict[str, Any]] = json.loads((DATA / "questions.json").read_text(encoding="utf-8"))
    return loaded


def hundred_page_pdf() -> bytes:
    """A 100-page PDF of the reference text, 50 lines of at most 95 characters a page."""
    lines: list[str] = []
    for data in corpus().values():
        for paragraph in data.decode().split("\n\n"):
            lines.extend([*textwrap.wrap(" ".join(paragraph.split()), 95), ""])
    pages = [lines[i * 50 : (i + 1) * 50] for i in range(100)]
    return make_pdf(pages, outline=[(f"Part {n // 10 + 1}", n + 1) for n in range(0, 100, 10)])


async def ingest(kb: KnowledgeBase, session: str) -> float:
    """Upload the corpus into ``session``; seconds taken."""
    started = time.perf_counter()
    for name, data in corpus().items():
        await kb.add_file(session, name, data)
    return time.perf_counter() - started


async def evaluate(search: Any, label: str) -> dict[str, Any]:
    """recall@K, MRR@K and latency of ``search(question) -> list of file names``."""
    found = 0
    reciprocal = 0.0
    latencies = []
    misses = []
    for item in questions():
        started = time.perf_counter()
        names = await search(item["q"])
        latencies.append((time.perf_counter() - started) * 1000)
        expected = {f"{t}.txt" for t in item["expect"]}
        rank = next((i for i, n in enumerate(names[:K], 1) if n in expected), None)
        if rank:
            found += 1
            reciprocal += 1 / rank
        else:
            misses.append(item["q"])
    n = len(questions())
    latencies.sort()
    return {
        "method": label,
        "recall@5": round(found / n, 3),
        "mrr@5": round(reciprocal / n, 3),
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
        "misses": misses,
    }


async def retrieval(url: str, dense: bool, backend: str) -> list[dict[str, Any]]:
    """Ingest the corpus into ``url`` and evaluate each method."""
    rows = []
    keyword = KnowledgeBase(url, max_files=200)
    session = f"bench-{backend}-{os.getpid()}-{time.time_ns()}"
    seconds = await ingest(keyword, session)
    print(f"[{backend}] ingested {len(corpus())} files in {seconds:.2f} s (keyword index only)", file=sys.stderr)

    async def by_keyword(q: str) -> list[str]:
        return [h.name for h in await keyword.search(session, q, K)]

    rows.append(await evaluate(by_keyword, f"{backend} keyword"))
    if dense:
        from reactchat.knowledge._embed import default_embedder, nearest

        hybrid = KnowledgeBase(url, max_files=200, embeddings=True)
        dense_session = session + "-dense"
        seconds = await ingest(hybrid, dense_session)
        print(f"[{backend}] ingested with embeddings in {seconds:.2f} s", file=sys.stderr)
        index = hybrid._open()

        async def by_dense(q: str) -> list[str]:
            ranked = nearest(default_embedder(), q, index.vectors(dense_session), K)
            chunks = index.chunks([cid for cid, _ in ranked])
            return [chunks[cid].name for cid, _ in ranked]

        async def by_hybrid(q: str) -> list[str]:
            return [h.name for h in await hybrid.search(dense_session, q, K)]

        rows.append(await evaluate(by_dense, f"{backend} dense (MiniLM)"))
        rows.append(await evaluate(by_hybrid, f"{backend} hybrid (RRF)"))
        await hybrid.clear(dense_session)
        await hybrid.close()
    await keyword.clear(session)
    await keyword.close()
    return rows


async def pdf_speed(url: str, dense: bool) -> list[dict[str, Any]]:
    """Pages per second for ingesting the 100-page PDF."""
    data = hundred_page_pdf()
    rows = []
    for label, embeddings in [("keyword index", False), ("with embeddings", True)][: 2 if dense else 1]:
        kb = KnowledgeBase(url, embeddings=embeddings, max_bytes=50_000_000)
        if embeddings:
            kb._encoder()  # load the model first: its start-up is not ingestion
        session = f"pdf-{label}-{time.time_ns()}"
        started = time.perf_counter()
        info = await kb.add_file(session, "reference.pdf", data)
        seconds = time.perf_counter() - started
        rows.append(
            {
                "ingest": f"100-page PDF, {label}",
                "bytes": len(data),
                "pages": info.pages,
                "chunks": info.chunks,
                "seconds": round(seconds, 2),
                "pages_per_s": round((info.pages or 0) / seconds, 1),
            }
        )
        await kb.clear(session)
        await kb.close()
    return rows


def table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """A plain-text table."""
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths, strict=True)) for r in rows]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default=os.environ.get("REACTCHAT_TEST_POSTGRES"), help="a PostgreSQL URL")
    parser.add_argument("--no-dense", action="store_true", help="skip the embedding model")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    dense = not args.no_dense
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{Path(tmp) / 'bench.db'}"
        results = await retrieval(sqlite, dense, "sqlite")
        if args.postgres:
            results += await retrieval(args.postgres, dense, "postgres")
        speed = await pdf_speed(sqlite, dense)
    n = len(questions())
    print(f"\nRetrieval on {len(corpus())} files, {n} questions (a hit: an expected file in the top {K})\n")
    print(table(results, ["method", "recall@5", "mrr@5", "p50_ms", "p95_ms"]))
    print("\nIngestion (SQLite)\n")
    print(table(speed, ["ingest", "bytes", "pages", "chunks", "seconds", "pages_per_s"]))
    for row in results:
        if row["misses"]:
            print(f"\n{row['method']} missed {len(row['misses'])}: " + "; ".join(row["misses"][:6]))
    if args.json:
        args.json.write_text(json.dumps({"retrieval": results, "ingestion": speed}, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
