"""Requests as a record keeps them, and how two of them differ.

A store keeps what a model replied, not what it was sent. To compare prompts, a session is
recorded through a ``Recorder``, which keeps every request it passes on to the real model;
``export_lines(..., requests=recorder.requests)`` writes them into the exported file and
``replay(..., strict=True)`` compares today's requests with them, one by one.
"""

from __future__ import annotations

from typing import Any

from reactchat.messages import Reply, Request
from reactchat.models import Model, resolve_model

#: characters of a message shown on each side of the first one that differs
CONTEXT = 60


class Recorder:
    """A model that passes every request on to ``model`` and keeps it (``.requests``, as JSON).

    It has the model's name, context window and ``few_shot``, so the agent builds the same
    prompts as with the model itself; it counts tokens as a model without a tokenizer of
    its own does, as the replay's model will (the two agree where a prompt nears the
    window). Keep one recorder per recorded session: the requests of several sessions run
    at once would interleave."""

    def __init__(self, model: str | Model) -> None:
        self.model = resolve_model(model)
        self.name = self.model.name
        self.supports_tools = self.model.supports_tools
        #: the agent shows the prompt pack's worked example when the model asks for it
        self.few_shot: bool = bool(getattr(self.model, "few_shot", False))
        self.requests: list[dict[str, Any]] = []

    @property
    def context_tokens(self) -> int | None:
        """The model's context window."""
        return self.model.context_tokens

    async def complete(self, request: Request) -> Reply:
        """Keep the request, then let the model answer it."""
        self.requests.append(request_json(request))
        return await self.model.complete(request)


def request_json(request: Request) -> dict[str, Any]:
    """A request as the exported file holds it (every field but the streaming callback)."""
    return request.model_dump(mode="json")


def difference(expected: dict[str, Any], got: dict[str, Any]) -> tuple[str, str] | None:
    """Where two requests first differ, as (expected, got) for people; None when they are the same.

    The messages come first (a prompt change shows where the text changes), then the
    other fields (tools, stop sequences, labels, limits, the output schema)."""
    want, have = expected.get("messages", []), got.get("messages", [])
    for i in range(max(len(want), len(have))):
        a = want[i] if i < len(want) else None
        b = have[i] if i < len(have) else None
        if a != b:
            return _message(i, a, b), _message(i, b, a)
    for key in sorted((expected.keys() | got.keys()) - {"messages"}):
        if expected.get(key) != got.get(key):
            return f"{key} {_short(expected.get(key))}", f"{key} {_short(got.get(key))}"
    return None


def _message(index: int, message: dict[str, Any] | None, other: dict[str, Any] | None) -> str:
    """``message`` near where it differs from ``other``."""
    if message is None:
        return f"no message {index + 1}"
    text, versus = _text(message), _text(other) if other is not None else ""
    at = next((i for i, (a, b) in enumerate(zip(text, versus, strict=False)) if a != b), min(len(text), len(versus)))
    start = max(0, at - CONTEXT)
    shown = ("…" if start else "") + text[start : at + CONTEXT] + ("…" if at + CONTEXT < len(text) else "")
    fields = {k: v for k, v in message.items() if k not in ("role", "content", "parts")}
    extra = f" {_short(fields)}" if other is not None and _text(other) == text else ""
    return f"message {index + 1} ({message.get('role', '?')}){extra}: {shown!r}"


def _text(message: dict[str, Any]) -> str:
    """What a message says: its content, or its parts' text and tool calls."""
    if isinstance(message.get("content"), str):
        return str(message["content"])
    said = []
    for part in message.get("parts", []):
        said.append(part.get("text", "") if part.get("kind") == "text" else f"[{part.get('name')} {part.get('input')}]")
    return "".join(said)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 2 * CONTEXT else text[: 2 * CONTEXT] + "…"
