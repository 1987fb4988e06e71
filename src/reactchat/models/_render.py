"""Prompt text for ``LocalModel``: a request's messages through the GGUF's chat template,
or as plain text for a base model that has none.

A prefilled assistant message (the ReAct scratchpad ending with ``Thought:``) is not
rendered by the template: it is appended after the assistant header with no end-of-turn
token, so the model continues it. Native tool calls are shown to the model as the JSON
object ``{"tool": …, "input": …}`` its grammar makes it write.
"""

from __future__ import annotations

import json
from typing import Any

from reactchat.messages import (
    AssistantMessage,
    Request,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

_ROLE_NAMES = {"user": "User", "assistant": "Assistant"}


def chat_messages(request: Request) -> tuple[list[dict[str, str]], str]:
    """Plain role/content messages for a chat template, and the assistant prefill."""
    chat: list[dict[str, str]] = []
    prefill = ""
    for index, message in enumerate(request.messages):
        if isinstance(message, AssistantMessage) and message.prefill:
            if index != len(request.messages) - 1:
                raise ValueError("a prefilled assistant message must be the last message")
            prefill = message.text
            continue
        _append(chat, *_role_and_content(message))
    if request.tools:
        block = _tools_block(request.tools)
        if chat and chat[0]["role"] == "system":
            chat[0]["content"] += "\n\n" + block
        else:
            chat.insert(0, {"role": "system", "content": block})
    return chat, prefill


def _role_and_content(
    message: SystemMessage | UserMessage | AssistantMessage | ToolResultMessage,
) -> tuple[str, str]:
    if isinstance(message, AssistantMessage):
        pieces = [p.text if isinstance(p, TextPart) else _call_json(p) for p in message.parts]
        return "assistant", "\n".join(piece for piece in pieces if piece)
    if isinstance(message, ToolResultMessage):
        # many chat templates have no "tool" role: a result is shown as a user message
        status = "error" if message.is_error else "result"
        return "user", f"Tool {status} ({message.name}, {message.call_id}): {message.content}"
    return message.role, message.content


def _append(chat: list[dict[str, str]], role: str, content: str) -> None:
    # several templates insist that roles alternate: merge neighbours of one role
    if chat and chat[-1]["role"] == role:
        chat[-1]["content"] += "\n\n" + content
    else:
        chat.append({"role": role, "content": content})


def _call_json(part: ToolCallPart) -> str:
    return json.dumps({"tool": part.name, "input": part.input}, ensure_ascii=False)


def _tools_block(tools: list[ToolSpec]) -> str:
    lines = [
        "You can call tools. To call one, reply with only a JSON object "
        '{"tool": "<tool name>", "input": {<arguments>}}; its result will be given to you. '
        "Otherwise reply with your answer as plain text. Tools:"
    ]
    for spec in tools:
        schema = json.dumps(spec.input_schema.get("properties", {}), ensure_ascii=False)
        lines.append(f"- {spec.name}: {' '.join(spec.description.split())} Input: {schema}")
    return "\n".join(lines)


def render(template: Any, chat: list[dict[str, str]], prefill: str) -> tuple[str, list[str]]:
    """The prompt up to where the model writes (the assistant header, by the model's chat
    template, or plain text for a model without one), and the stop sequences it adds."""
    if template is None:
        return _plain(chat, prefill)
    try:
        return str(template(messages=chat).prompt), []
    except Exception:
        if not chat or chat[0]["role"] != "system":
            raise
    # some templates (Gemma, old Mistral) refuse a system role: fold it into the first turn
    system, rest = chat[0]["content"], chat[1:]
    if rest and rest[0]["role"] == "user":
        rest = [{"role": "user", "content": system + "\n\n" + rest[0]["content"]}, *rest[1:]]
    else:
        rest = [{"role": "user", "content": system}, *rest]
    return str(template(messages=rest).prompt), []


def _plain(chat: list[dict[str, str]], prefill: str) -> tuple[str, list[str]]:
    """A prompt for a base model (no chat template): the text the model continues.

    A text ReAct request (instructions, the question, the scratchpad) reads as one
    document; a conversation gets role names and ends with the assistant's, and the
    next user line stops the reply (a base model would go on writing both sides).
    """
    if prefill:
        return "\n\n".join(m["content"] for m in chat) + "\n", []
    lines = [m["content"] if m["role"] == "system" else f"{_ROLE_NAMES[m['role']]}: {m['content']}" for m in chat]
    return "\n\n".join([*lines, f"{_ROLE_NAMES['assistant']}:"]), [f"\n{_ROLE_NAMES['user']}:"]
