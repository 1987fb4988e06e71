"""An upload whose process is killed half-way (SIGKILL, between two batches of chunks) leaves
chunk rows that no file owns; the next upload, from a process that had the database open
all along, or the next opening of the database deletes them, and the other files stay."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reactchat.knowledge import KnowledgeBase

#: a process that uploads one large text file into session "big" (hundreds of chunk batches)
UPLOADER = """
import asyncio, sys
from reactchat.knowledge import KnowledgeBase
text = "".join(f"Paragraph {n} of the large file about roses and their prices.\\n\\n" for n in range(60000))
kb = KnowledgeBase(sys.argv[1], chunk_chars=120, overlap=0)
asyncio.run(kb.add_file("big", "big.txt", text.encode()))
print("finished", flush=True)
"""


def counts(db: Path) -> tuple[int, int, int]:
    """(chunks no file owns, full-text rows of those, files)."""
    with sqlite3.connect(db) as conn:
        orphans = "SELECT id FROM kb_chunks WHERE file_id NOT IN (SELECT id FROM kb_files)"
        (chunks,) = conn.execute(f"SELECT count(*) FROM ({orphans})").fetchone()
        (fts,) = conn.execute(f"SELECT count(*) FROM kb_fts WHERE rowid IN ({orphans})").fetchone()
        (files,) = conn.execute("SELECT count(*) FROM kb_files").fetchone()
    return chunks, fts, files


def kill_mid_upload(db: Path) -> None:
    """Start the uploader and SIGKILL it once it has written some chunks but not its file."""
    uploader = subprocess.Popen([sys.executable, "-c", UPLOADER, f"sqlite:///{db}"], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and uploader.poll() is None:
            try:
                if counts(db)[0] >= 1000:
                    break
            except sqlite3.OperationalError:  # the tables are not there yet
                pass
            time.sleep(0.01)
        assert uploader.poll() is None, "the upload finished (or failed) before it could be killed"
        os.kill(uploader.pid, signal.SIGKILL)
    finally:
        uploader.kill()
        uploader.wait()
    chunks, fts, files = counts(db)
    assert chunks >= 1000 and fts == chunks and files == 1  # only the small file is whole


@pytest.mark.parametrize("cleaned_by", ["next upload", "next opening"])
async def test_chunks_of_an_upload_killed_half_way_are_deleted(cleaned_by: str, tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    kb = KnowledgeBase(f"sqlite:///{db}")
    try:
        await kb.add_file("small", "notes.txt", b"Tulips cost 3.10 euros a stem.")
        kill_mid_upload(db)
        if cleaned_by == "next upload":  # a server that had the database open meanwhile
            await kb.add_file("small", "more.txt", b"Roses cost 80.16 euros a bunch.")
            assert counts(db) == (0, 0, 2)
        else:  # a process started afterwards
            fresh = KnowledgeBase(f"sqlite:///{db}")
            try:
                assert [f.name for f in await fresh.files("small")] == ["notes.txt"]
                assert counts(db) == (0, 0, 1)
            finally:
                await fresh.close()
        assert await kb.files("big") == []
        hits = await kb.search("small", "tulips stem")
        assert hits and hits[0].name == "notes.txt"
    finally:
        await kb.close()


async def test_an_upload_in_progress_in_another_process_is_left_alone(tmp_path: Path) -> None:
    """Only dead uploads go: one still being written by a live process keeps its chunks."""
    db = tmp_path / "kb.db"
    kb = KnowledgeBase(f"sqlite:///{db}")
    await kb.add_file("small", "notes.txt", b"Tulips cost 3.10 euros a stem.")
    uploader = subprocess.Popen([sys.executable, "-c", UPLOADER, f"sqlite:///{db}"], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while counts(db)[0] < 1000:
            assert time.monotonic() < deadline and uploader.poll() is None, "the upload never got going"
            time.sleep(0.01)
        await kb.add_file("small", "more.txt", b"Roses cost 80.16 euros a bunch.")  # sweeps while it writes
        fresh = KnowledgeBase(f"sqlite:///{db}")
        await fresh.files("small")  # opens (and sweeps) the database
        await fresh.close()
        out, _ = uploader.communicate(timeout=180)
        assert uploader.returncode == 0 and b"finished" in out
    finally:
        uploader.kill()
        uploader.communicate()
        await kb.close()
    assert counts(db)[0] == 0
    reader = KnowledgeBase(f"sqlite:///{db}")
    files = {f.name: f.chunks for f in await reader.files("big")}
    await reader.close()
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT count(*) FROM kb_chunks WHERE session = 'big'").fetchone()
    assert stored == files["big.txt"] > 1000
