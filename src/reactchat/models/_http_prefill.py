"""The text ReAct scratchpad for chat APIs: how it is sent, and how the reply is read.

A text ReAct request ends with a prefilled assistant message (the scratchpad, ending
in ``Thought:``) that the model must *continue*. Anthropic continues an assistant
message natively; most OpenAI-compatible chat servers do not (they open a new
assistant turn after it), so there the scratchpad is appended to the last user
message, the way LangChain's ReAct prompt does it (``Question: …\\nThought:``).

Either way the reply must be just the continuation, so ``continuation`` removes what
chat models add around it: a ``<think>`` block, the scratchpad repeated from its
start, the ``Thought:`` label written again; and ``cut_at_stop`` applies the stop
sequences for servers that ignore them.
"""

from __future__ import annotations

import re

from reactchat.messages import AssistantMessage, Message, Reply, StopReason, TextPart, UserMessage

_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)


def split_prefill(messages: list[Message]) -> tuple[list[Message], str | None]:
    """The messages without a trailing prefilled assistant message, and its text."""
    if messages and isinstance(messages[-1], AssistantMessage) and messages[-1].prefill:
        return list(messages[:-1]), messages[-1].text
    return list(messages), None


def prefill_as_user(messages: list[Message], scratchpad: str) -> list[Message]:
    """Append the scratchpad to the last user message (or add one), for chat servers
    that cannot continue an assistant message."""
    if messages and isinstance(messages[-1], UserMessage):
        last = messages[-1]
        # a copy, so that the message keeps its images
        return [*messages[:-1], last.model_copy(update={"content": f"{last.content}\n{scratchpad}"})]
    return [*messages, UserMessage(content=scratchpad)]


def continuation(text: str, scratchpad: str) -> str:
    """The part of a reply that continues ``scratchpad``, without echoes of it."""
    text = _THINK.sub("", text, count=1)
    body = scratchpad.rstrip()
    last_label = body.rsplit("\n", 1)[-1].strip()  # "Thought:" (or "Final Answer:")
    done = body[: len(body) - len(last_label)] if body.endswith(last_label) else body
    if done.strip():
        first_label = done.lstrip().split(" ", 1)[0]  # the models that repeat it may drop it
        for prefix in (done, done.lstrip()[len(first_label) :]):
            end = _match_ignoring_space(text, prefix)
            if end is not None and prefix.strip():
                text = text[end:]
                break
    stripped = text.lstrip()
    if last_label and stripped[: len(last_label)].casefold() == last_label.casefold():
        text = " " + stripped[len(last_label) :].lstrip(" ")
    return text


def _match_ignoring_space(text: str, prefix: str) -> int | None:
    """Where ``text`` ends a copy of ``prefix`` at its start, whitespace aside; else None."""
    i = 0
    for char in prefix:
        if char.isspace():
            continue
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text) or text[i] != char:
            return None
        i += 1
    return i


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """``text`` up to its first stop sequence, and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    if not cuts:
        return text, False
    return text[: min(cuts)], True


def finish_scratchpad(reply: Reply, scratchpad: str, stop: list[str]) -> Reply:
    """A chat reply to a prefilled scratchpad as the model's continuation of it: echoes
    removed, cut at the first stop sequence (for servers that ignore them)."""
    text, cut = cut_at_stop(continuation(reply.text, scratchpad), stop)
    stop_reason: StopReason = "stop_sequence" if cut else reply.stop_reason
    return Reply(parts=[TextPart(text=text)], stop_reason=stop_reason, usage=reply.usage)
