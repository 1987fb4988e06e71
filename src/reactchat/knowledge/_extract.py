"""The main text of a fetched web page, as Markdown (trafilatura), for ``fetch_url``.

It runs in a parser process (``_isolate.ParserPool.extract``) under the same CPU and
memory limits as an uploaded file: a page of enormous or pathological markup ends that
process, not the server. trafilatura is imported only here (the ``web`` extra).
"""

from __future__ import annotations

from reactchat.knowledge._blocks import FileRejected


def extract_page(html: bytes, url: str) -> tuple[str, str]:
    """``(title, Markdown of the main text)`` of an HTML page; ``FileRejected`` when there is no text."""
    try:
        # optional: the [web] extra
        import trafilatura
    except ImportError:
        raise FileRejected("reading web pages needs trafilatura: pip install 'reactchat[web]'", "unsupported") from None
    page = html.decode("utf-8", errors="replace")
    text = trafilatura.extract(
        page, url=url, output_format="markdown", include_tables=True, include_links=False, favor_recall=True
    )
    if not text or not text.strip():
        raise FileRejected(f"{url}: no readable text was found on the page", "unreadable")
    metadata = trafilatura.extract_metadata(page, default_url=url)
    title = (metadata.title if metadata is not None else None) or ""
    return title, text
