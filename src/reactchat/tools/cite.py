"""Numbered citations that fit a budget: what search tools show the model."""

from __future__ import annotations


def cited(intro: str, entries: list[tuple[str, str]], budget: int) -> str:
    """``intro``, then each ``(citation, text)``; the texts are trimmed evenly (at a word)
    so that every citation fits in ``budget`` characters."""
    room = budget - len(intro) - sum(len(head) + 3 for head, _ in entries)
    share = max(80, room // max(1, len(entries)))
    parts = [intro]
    for head, text in entries:
        text = " ".join(text.split())
        if len(text) > share:
            text = text[: share - 1].rsplit(" ", 1)[0] + "…"
        parts.append(f"{head}\n{text}" if text else head)
    return "\n".join(parts)
