"""Write the retrieval benchmark's corpus: the Python language reference topics, one file each.

The text is ``pydoc_data.topics`` from the local Python installation (Python Software
Foundation License, a permissive licence: see README.md); nothing is downloaded.
Run once: ``python benchmarks/data/make_corpus.py``; the files are committed.
"""

from __future__ import annotations

from pathlib import Path
from pydoc_data.topics import topics

OUT = Path(__file__).resolve().parent / "pyref"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, text in sorted(topics.items()):
        (OUT / f"{name}.txt").write_text(text.strip() + "\n", encoding="utf-8")
    print(f"wrote {len(topics)} files to {OUT}")


if __name__ == "__main__":
    main()
