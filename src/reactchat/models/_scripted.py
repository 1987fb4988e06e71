"""``ScriptedModel``: a model that replies from a script, for tests and demos."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from reactchat.messages import Reply, Request, TextPart, ToolCallPart, Usage
from reactchat.models._base import ModelError

ScriptItem = str | Reply | Callable[[Request], str | Reply]


class ScriptedModel:
    """Replies in order, one per call.

    Each item is the text of a reply (for the text ReAct protocol), a ``Reply``
    (e.g. with ``ToolCallPart`` parts for the native protocol) or a function of the
    request returning either. ``.requests`` holds every request received.
    Like a real model, a text reply is cut at the request's first stop sequence.
    """

    supports_tools = True
    context_tokens: int | None = None

    def __init__(
        self,
        replies: Iterable[ScriptItem],
        *,
        name: str = "scripted",
        delay: float = 0.0,
        honor_stop: bool = True,
        supports_images: bool = False,
    ) -> None:
        self.replies: list[ScriptItem] = list(replies)
        #: whether its requests carry images (True) or notes in their place (False)
        self.supports_images = supports_images
        self.requests: list[Request] = []
        self.name = name
        self.delay = delay
        self.honor_stop = honor_stop

    async def complete(self, request: Request) -> Reply:
        """Return the next scripted reply."""
        index = len(self.requests)
        self.requests.append(request)
        if index >= len(self.replies):
            raise ModelError(
                f"ScriptedModel has no reply left: it was called {index + 1} times "
                f"but scripted with {len(self.replies)} replies"
            )
        if self.delay:
            await asyncio.sleep(self.delay)
        item = self.replies[index]
        if callable(item):
            item = item(request)
        if isinstance(item, Reply):
            return item
        text = item
        stop_reason: str = "end"
        if self.honor_stop:
            for stop in request.stop:
                cut = text.find(stop)
                if cut >= 0:
                    text, stop_reason = text[:cut], "stop_sequence"
        return Reply(
            parts=[TextPart(text=text)],
            stop_reason=stop_reason,  # type: ignore[arg-type]
            usage=Usage(input_tokens=0, output_tokens=len(text.split())),
        )

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self.replies) - len(self.requests)

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` unless every scripted reply was used."""
        if self.remaining:
            raise AssertionError(f"ScriptedModel: {self.remaining} scripted replies were never requested")


def tool_call(name: str, input: dict[str, object] | str, id: str | None = None, text: str = "") -> Reply:
    """A native reply asking for one tool call (a shortcut for scripts)."""
    return tool_calls([(name, input)], text=text, ids=[id] if id else None)


def tool_calls(
    calls: list[tuple[str, dict[str, object] | str]], *, text: str = "", ids: list[str] | None = None
) -> Reply:
    """A native reply asking for several tool calls at once."""
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    for i, (name, input) in enumerate(calls):
        call_id = ids[i] if ids else f"call_{name}_{i}"
        parts.append(ToolCallPart(id=call_id, name=name, input=input))
    return Reply(parts=parts, stop_reason="tool_use")


def from_spec(rest: str) -> ScriptedModel:
    """``scripted:FILE``: replies from a file.

    A ``.json`` file holds a list of reply texts; any other file holds reply texts
    separated by lines that contain only ``---``.
    """
    if not rest:
        raise ValueError("scripted model needs a file: --model scripted:replies.txt")
    path = Path(rest)
    try:
        content = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the scripted replies file {path}: {exc.strerror}") from exc
    if path.suffix == ".json":
        try:
            data = json.loads(content)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise ValueError(f"{path} must hold a JSON list of reply strings")
        replies: list[ScriptItem] = list(data)
    else:
        blocks: list[list[str]] = [[]]
        for line in content.splitlines():
            if line.strip() == "---":
                blocks.append([])
            else:
                blocks[-1].append(line)
        replies = ["\n".join(b).strip() for b in blocks if "\n".join(b).strip()]
    return ScriptedModel(replies, name=f"scripted:{path.name}")
