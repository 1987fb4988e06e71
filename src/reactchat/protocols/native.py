"""The native tool-calling protocol: the model asks for tools in its reply and the loop goes on while it does.

The conversation runs user → assistant (tool requests) → tool results → assistant
(final answer). Every tool call gets exactly one result message, in the order of the
calls, even when several calls come in one reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from reactchat.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    Reply,
    Request,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from reactchat.protocols.base import ELIDE_MIN_CHARS, Call, Decision, FormatError, elision_note
from reactchat.protocols.formats import reply_calls, strip_reasoning
from reactchat.protocols.packs import PromptPack

SYSTEM = (
    "You are a helpful assistant. Use the tools when they help; answer directly when they "
    "do not. If a fact that only the user knows is missing, call ask_user instead of guessing."
)


class NativeTranscript:
    """The message list of one turn for a model with native tool calling."""

    def __init__(
        self,
        pack: PromptPack,
        tools: list[ToolSpec],
        history: list[tuple[str, str]],
        question: str,
        system: str | None = None,
        summary: str = "",
        images: tuple[ImagePart, ...] = (),
    ) -> None:
        self.pack = pack
        self.tools = tools
        self.messages: list[Message] = []
        self._images = bool(images)
        self._tools_size = sum(len(t.name) + len(t.description) + len(json.dumps(t.input_schema)) for t in tools)
        self._size = self._tools_size
        system = system or SYSTEM
        self._append(SystemMessage(content=f"{system}\n\n{pack.summary_header}\n{summary}" if summary else system))
        for asked, answered in history:
            self._append(UserMessage(content=asked))
            self._append(AssistantMessage(parts=[TextPart(text=answered)]))
        self.question = question
        self._append(UserMessage(content=question, images=images))
        #: where the question is, where each step not yet summarised begins, how many were
        self._asked = len(self.messages) - 1
        self._marks: list[int] = []
        self.folded = 0
        self._call_names: dict[str, str] = {}

    @property
    def size(self) -> int:
        """Characters in the prompt: every message's content and the tools' schemas."""
        return self._size

    @property
    def images(self) -> bool:
        """Whether a message carries images (the question's, a tool result's)."""
        return self._images

    def _append(self, message: Message, index: int | None = None) -> None:
        if index is None:
            self.messages.append(message)
        else:
            self.messages.insert(index, message)
        self._size += message_size(message)

    def add_step(self, raw: str, thought: str, calls: Sequence[Call]) -> None:
        """Record the assistant's message: its text and its tool calls."""
        self._marks.append(len(self.messages))
        parts: list[TextPart | ToolCallPart] = []
        text = thought or raw
        if text:
            parts.append(TextPart(text=text))
        for call_id, tool, value in calls:
            self._call_names[call_id] = tool
            parts.append(ToolCallPart(id=call_id, name=tool, input=value))
        self._append(AssistantMessage(parts=parts))

    def add_observation(
        self, call_id: str, text: str, is_error: bool = False, images: tuple[ImagePart, ...] = ()
    ) -> None:
        """The result of a call, kept in the order of the calls even when one arrives late
        (the answer to an ask_user question comes after the other calls of its step)."""
        name = self._call_names[call_id]
        result = ToolResultMessage(call_id=call_id, name=name, content=text, is_error=is_error, images=images)
        self._images = self._images or bool(images)
        index = len(self.messages)
        while index > 0 and isinstance(self.messages[index - 1], ToolResultMessage):
            index -= 1
        owner = self.messages[index - 1]
        order = (
            [p.id for p in owner.parts if isinstance(p, ToolCallPart)] if isinstance(owner, AssistantMessage) else []
        )
        if call_id not in order:
            self._append(result)
            return
        position = order.index(call_id)
        while (
            index < len(self.messages)
            and isinstance(self.messages[index], ToolResultMessage)
            and order.index(self.messages[index].call_id) < position  # type: ignore[union-attr]
        ):
            index += 1
        self._append(result, index)

    def add_correction(self, raw: str, correction: str) -> None:
        """A reply that could not be read, then the correction as a user message."""
        self._marks.append(len(self.messages))
        self._append(AssistantMessage(parts=[TextPart(text=raw)] if raw else []))
        self._append(UserMessage(content=correction))

    def elide_oldest(self) -> bool:
        """Shorten the oldest long tool result; False if none is left."""
        for index, message in enumerate(self.messages):
            if isinstance(message, ToolResultMessage) and len(message.content) > ELIDE_MIN_CHARS:
                shorter = message.model_copy(update={"content": elision_note(len(message.content))})
                self.messages[index] = shorter
                self._size += message_size(shorter) - message_size(message)
                return True
        return False

    @property
    def steps(self) -> int:
        """Steps recorded (corrections included), summarised or not."""
        return self.folded + len(self._marks)

    def steps_text(self, through: int) -> str:
        """Steps 1 to ``through`` as text (a summary of the earliest among them in its place),
        or ``""`` when they are summarised already or no later step remains."""
        count = through - self.folded
        if count <= 0 or count >= len(self._marks):
            return ""
        shown = self.messages[self._asked : self._marks[count]]
        return "\n".join(_shown(message) for message in shown)

    def fold(self, through: int, summary: str) -> bool:
        """Put ``summary`` in place of steps 1 to ``through``, in the question's message (the
        steps' tool calls go with their results: a step begins with its assistant message)."""
        count = through - self.folded
        if count <= 0 or count >= len(self._marks):
            return False
        end = self._marks[count]
        images = self.messages[self._asked].images  # type: ignore[union-attr]
        asked = UserMessage(content=f"{self.question}\n\n({self.pack.steps_header}: {summary})", images=images)
        self.messages[self._asked : end] = [asked]
        shift = end - self._asked - 1
        self._marks = [mark - shift for mark in self._marks[count:]]
        self._size = self._tools_size + sum(message_size(m) for m in self.messages)
        self.folded = through
        return True

    def request(self, final: bool = False) -> Request:
        """The request for the next step; ``final`` asks for an answer without tools."""
        if final:
            messages = [*self.messages, UserMessage(content=self.pack.budget_note)]
            return Request.built(messages)
        return Request.built(list(self.messages), tools=self.tools)

    def read(self, reply: Reply) -> Decision:
        """The reply's tool calls, or its text as the final answer."""
        text, calls = reply_calls(reply, [t.name for t in self.tools])  # calls written in the text too
        if calls:
            return Decision(text, text, calls)
        if not text.strip():
            raise FormatError("Your reply was empty: call a tool or write the answer.", kind="empty")
        return Decision("", text, [], text.strip())

    def read_final(self, reply: Reply) -> str:
        """The answer from a reply to ``request(final=True)``."""
        return strip_reasoning(reply.text).strip()


def message_size(message: Message) -> int:
    """A message's length in characters: its text, and its tool calls' names and arguments."""
    if isinstance(message, AssistantMessage):
        size = 0
        for part in message.parts:
            if isinstance(part, TextPart):
                size += len(part.text)
            else:
                size += len(part.name) + len(part.input if isinstance(part.input, str) else json.dumps(part.input))
        return size
    return len(message.content)


def _shown(message: Message) -> str:
    """A message as a summariser reads it: who says what, tool calls as ``name(arguments)``."""
    if isinstance(message, AssistantMessage):
        return "assistant: " + " ".join(
            part.text if isinstance(part, TextPart) else f"{part.name}({json.dumps(part.input)})"
            for part in message.parts
        )
    if isinstance(message, ToolResultMessage):
        return f"{message.name} result: {message.content}"
    return f"{message.role}: {message.content}"
