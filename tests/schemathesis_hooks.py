"""Schemathesis hooks of ``tests/test_api_contract.py`` (``SCHEMATHESIS_HOOKS``): what a file
of each text type the upload route declares looks like, so that the files it generates as
valid are documents the server can read (some words of printable text). The binary types
(PDF, .docx) get no strategy: Schemathesis then picks among the text ones."""

from __future__ import annotations

import schemathesis
from hypothesis import strategies as st

#: printable text: letters, digits, punctuation, spaces and line breaks, with a word in it
TEXT = st.builds(
    lambda before, word, after: f"{before}{word}{after}",
    st.text(st.characters(categories=["L", "N", "P", "Zs"], include_characters="\n"), max_size=200),
    st.text(st.characters(categories=["L"]), min_size=1, max_size=20),
    st.text(st.characters(categories=["L", "N", "P", "Zs"], include_characters="\n"), max_size=200),
).map(lambda text: text.encode("utf-8"))

for media_type in ("text/plain", "text/markdown", "text/csv"):
    schemathesis.openapi.media_type(media_type, TEXT)
