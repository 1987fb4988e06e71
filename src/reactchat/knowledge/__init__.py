"""Chat with uploaded files: a temporary knowledge base per session.

    from reactchat import Agent
    from reactchat.knowledge import attach

    agent = Agent(model="local", store="sqlite:///chat.db")
    kb = attach(agent, retention=3)               # search_files + a round counter
    info = await kb.add_file(session, "report.pdf", data)
    result = await agent.arun("What does the report say about costs?", session)

Each uploaded file starts at round 0; every finished turn of the session adds one and
the file is deleted (chunks, index entries and bytes) when its rounds reach its
retention, or at once on ``kb.clear(session)``: a file uploaded with ``retention=3``
is searchable in the next three turns. A turn that waits on an ask_user question
counts once, when it ends. Files are stored in the session
store's own database, in ``kb_*`` tables: SQLite FTS5 (BM25) or PostgreSQL full-text
search, fused with dense retrieval when ``embeddings=True`` (extra ``embeddings``).
Supported: .txt .md .html .pdf .docx .csv .json, recognised by content (PDF and JSON
need the ``files`` extra). Files are read in parser processes under ``Limits`` (pages,
paragraphs, rows, cells, characters, CPU seconds, memory): a file over one is refused
with ``FileRejected`` and nothing is stored.
"""

from __future__ import annotations

from reactchat.knowledge._blocks import FileRejected, Limits
from reactchat.knowledge._kb import FileInfo, Hit, KnowledgeBase, fuse
from reactchat.knowledge._tool import attach, render, search_files_tool

__all__ = [
    "FileInfo",
    "FileRejected",
    "Hit",
    "KnowledgeBase",
    "Limits",
    "attach",
    "fuse",
    "render",
    "search_files_tool",
]
