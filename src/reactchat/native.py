"""The native tool-calling protocol: the ``stop_reason`` loop of seed 001.

The conversation runs user → assistant (tool requests) → tool results → assistant
(final answer). Every tool call gets exactly one result message, in the order of the
calls, even when several calls come in one reply.
"""

from __future__ import annotations

from typing import Any

from reactchat.messages import (
    AssistantMessage,
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
from reactchat.packs import PromptPack
from reactchat.react import Decision, FormatError

SYSTEM = (
    "You are a helpful assistant. Use the tools when they help; answer directly when they "
    "do not. If a fact that only the user knows is missing, call ask_user instead of guessing."
)


class NativeTranscript:
    """The message list of one turn for a model with native tool calling."""

    native = True

    def __init__(
        self,
        pack: PromptPack,
        tools: list[ToolSpec],
        history: list[tuple[str, str]],
        question: str,
        system: str | None = None,
    ) -> None:
        self.pack = pack
        self.tools = tools
        self.messages: list[Message] = [SystemMessage(content=system or SYSTEM)]
        for asked, answered in history:
            self.messages.append(UserMessage(content=asked))
            self.messages.append(AssistantMessage(parts=[TextPart(text=answered)]))
        self.messages.append(UserMessage(content=question))
        #: characters in the prompt, for the context budget
        self.size = sum(len(getattr(m, "content", "") or getattr(m, "text", "")) for m in self.messages)
        self.size += sum(len(t.description) + len(str(t.input_schema)) for t in tools)
        self._call_names: dict[str, str] = {}

    def add_step(self, raw: str, thought: str, calls: list[tuple[str, str, Any]]) -> None:
        """Record the assistant's message: its text and its tool calls."""
        parts: list[TextPart | ToolCallPart] = []
        text = thought or raw
        if text:
            parts.append(TextPart(text=text))
        for call_id, tool, value in calls:
            self._call_names[call_id] = tool
            parts.append(ToolCallPart(id=call_id, name=tool, input=value))
        self.messages.append(AssistantMessage(parts=parts))
        self.size += len(text) + sum(len(str(value)) + len(tool) for _, tool, value in calls)

    def add_observation(self, call_id: str, text: str) -> None:
        """A tool result for a call, or a correction sent as a user message.

        Results are kept in the order of the calls even when one arrives late (the
        answer to an ask_user question comes after the other calls of its step).
        """
        self.size += len(text)
        name = self._call_names.get(call_id)
        if name is None:
            self.messages.append(UserMessage(content=text))
            return
        result = ToolResultMessage(call_id=call_id, name=name, content=text)
        index = len(self.messages)
        while index > 0 and isinstance(self.messages[index - 1], ToolResultMessage):
            index -= 1
        owner = self.messages[index - 1]
        order = (
            [p.id for p in owner.parts if isinstance(p, ToolCallPart)] if isinstance(owner, AssistantMessage) else []
        )
        if call_id in order:
            position = order.index(call_id)
            while (
                index < len(self.messages)
                and isinstance(self.messages[index], ToolResultMessage)
                and order.index(self.messages[index].call_id) < position  # type: ignore[union-attr]
            ):
                index += 1
            self.messages.insert(index, result)
        else:
            self.messages.append(result)

    def elide_oldest(self) -> bool:
        """Shorten the oldest long tool result; False if none is left."""
        for index, message in enumerate(self.messages):
            if isinstance(message, ToolResultMessage) and len(message.content) > 200:
                note = f"[{len(message.content)} characters elided to fit the context budget]"
                self.messages[index] = message.model_copy(update={"content": note})
                self.size += len(note) - len(message.content)
                return True
        return False

    def request(self, final: bool = False) -> Request:
        """The request for the next step; ``final`` asks for an answer without tools."""
        if final:
            messages = [*self.messages, UserMessage(content=self.pack.budget_note)]
            return Request.model_construct(
                messages=messages, tools=[], stop=[], react=None, react_tools=[], max_tokens=None
            )
        return Request.model_construct(
            messages=list(self.messages),
            tools=self.tools,
            stop=[],
            react=None,
            react_tools=[],
            max_tokens=None,
        )

    def read(self, reply: Reply) -> Decision:
        """The reply's tool calls, or its text as the final answer."""
        text = reply.text
        calls = reply.tool_calls
        if calls:
            return Decision(text, text, [(c.id, c.name, c.input) for c in calls])
        if not text.strip():
            raise FormatError("Your reply was empty: call a tool or write the answer.", kind="empty")
        return Decision("", text, [], text.strip())

    def read_final(self, reply: Reply) -> str:
        """The answer from a reply to ``request(final=True)``."""
        return reply.text.strip()
