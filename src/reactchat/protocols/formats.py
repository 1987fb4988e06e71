"""The formats real models write around their steps: reasoning blocks and tool calls in text.

* ``strip_reasoning(text)`` removes ``<think>…</think>`` blocks (and ``<thinking>``), the
  reasoning that R1-style models write before they answer. A block whose opening tag the
  chat template already wrote (the text starts inside it) ends at ``</think>``; a block
  that never closes (the model ran out of tokens) runs to the end. What is inside is
  neither a thought nor an action: nothing in it is ever parsed.
* ``calls_in_text(text, tool_names)`` finds the tool calls an open-weight model wrote as
  text because the server that ran it had no tool-call parser (Ollama, vLLM or llama.cpp
  without one), so that the native protocol still runs them:

  - Hermes / Qwen: ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``, one or more;
  - Mistral: ``[TOOL_CALLS][{"name": …, "arguments": {…}}, …]`` and the newer
    ``[TOOL_CALLS]name[ARGS]{…}`` (optionally ``[CALL_ID]id`` before ``[ARGS]``);
  - Llama 3.1: ``<function=name>{…}</function>``;
  - Llama 3.x JSON: ``{"name": …, "parameters": {…}}``, alone or after ``<|python_tag|>``,
    several separated by ``;``;
  - Llama 3.2+ pythonic: ``[name(arg="value", n=2)]``;
  - reactchat's local model: ``{"tool": …, "input": {…}}``.

  Tagged forms are calls whatever name they carry (an unknown name then gets the
  engine's unknown-tool correction). An untagged reply is a call only when it is
  nothing but call objects, each with a name and its arguments and no other field
  (pythonic calls must also name one of ``tool_names``): an answer that merely contains
  JSON stays an answer. Every call gets a fresh call id: ids a model makes up may repeat.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from reactchat.messages import Reply, ToolInput
from reactchat.protocols.base import Call

# ------------------------------------------------------------------ reasoning

_OPEN = re.compile(r"<(think|thinking)>", re.IGNORECASE)
_CLOSE = re.compile(r"</(think|thinking)>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """``text`` without its reasoning blocks (``<think>…</think>``); see the module doc."""
    if "</think" not in text.casefold() and "<think" not in text.casefold():
        return text
    first_close, first_open = _CLOSE.search(text), _OPEN.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        text = text[first_close.end() :]  # the template opened the block: the reply starts in it
    out: list[str] = []
    position = 0
    for opening in _OPEN.finditer(text):
        if opening.start() < position:
            continue  # inside a block already dropped
        out.append(text[position : opening.start()])
        closing = re.compile(rf"</{opening.group(1)}>", re.IGNORECASE).search(text, opening.end())
        position = closing.end() if closing else len(text)
    out.append(text[position:])
    return "".join(out).strip("\n")


# ------------------------------------------------------------------ tool calls in text


@dataclass
class InTextCalls:
    """The tool calls found in a reply's text, and the text around them."""

    #: the calls, in order, each with a fresh call id
    calls: list[Call] = field(default_factory=list)
    #: the text that is not call markup (often empty, sometimes a sentence before the calls)
    text: str = ""


_NAME_KEYS = ("name", "tool", "action", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "input", "args", "action_input")
_EXTRA_KEYS = {"type", "id"}
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
_FUNCTION_TAG = re.compile(r"<function=([\w.\-]+)>\s*(.*?)\s*(?:</function>|$)", re.DOTALL)
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_NAMED = re.compile(r"\s*([\w.\-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?(?:\[ARGS\])?\s*")
_PYTHON_TAG = "<|python_tag|>"
_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def calls_in_text(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    """The tool calls written in ``text``, or None when it holds none (see the module doc)."""
    text = strip_reasoning(text)
    for reader in (_hermes, _mistral, _function_tags, _python_tag, _bare_json, _pythonic):
        found = reader(text, tool_names)
        if found is not None and found.calls:
            return found
    return None


def reply_calls(reply: Reply, tool_names: Collection[str]) -> tuple[str, list[Call]]:
    """A native-protocol reply's text (reasoning and call markup removed) and its tool
    calls: the provider's own, else those the model wrote in its text."""
    text = strip_reasoning(reply.text)
    calls = [Call(c.id, c.name, c.input) for c in reply.tool_calls]
    if not calls and (found := calls_in_text(text, tool_names)):
        text, calls = found.text, found.calls
    return text, calls


def _call(name: str, arguments: Any) -> Call:
    return Call(f"call_{uuid.uuid4().hex[:12]}", name, _arguments(arguments))


def _arguments(value: Any) -> ToolInput:
    """Arguments as the engine takes them: a dict, or the raw text for it to explain."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        return decoded if isinstance(decoded, dict) else value
    return value if isinstance(value, dict) else json.dumps(value, ensure_ascii=False)


def _call_object(value: Any, strict: bool) -> Call | None:
    """A call from a JSON object naming a tool and its arguments (OpenAI's nested
    ``{"function": {"name", "arguments"}}`` too). ``strict``: no other keys allowed."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        value = value["function"]
    name_key = next((k for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if name_key is None:
        return None
    argument_key = next((k for k in _ARGUMENT_KEYS if k in value), None)
    if strict and (argument_key is None or set(value) - {name_key, argument_key} - _EXTRA_KEYS):
        return None
    return _call(value[name_key].strip(), value.get(argument_key) if argument_key else None)


def _json_values(text: str) -> list[Any] | None:
    """Every JSON value in ``text`` separated only by whitespace, ``;`` or ``,``; None
    if anything else is there."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\r\n;,":
            position += 1
        if position == len(text):
            return values
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return None
        values.append(value)


def _objects(values: list[Any]) -> list[Any]:
    """JSON values with lists flattened one level (``[{call}, {call}]``)."""
    flat: list[Any] = []
    for value in values:
        flat.extend(value if isinstance(value, list) else [value])
    return flat


def _tagged_calls(values: list[Any] | None) -> list[Call]:
    """The calls among the JSON values found after a call tag (any extra field allowed)."""
    calls = [_call_object(value, strict=False) for value in _objects(values or [])]
    return [call for call in calls if call is not None]


def _hermes(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    if "<tool_call>" not in text.casefold():
        return None
    found = InTextCalls(text=_HERMES.sub("", text).strip())
    for body in _HERMES.findall(text):
        found.calls += _tagged_calls(_json_values(_unfence(body)))
    return found


def _mistral(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    if _MISTRAL not in text:
        return None
    before, *chunks = text.split(_MISTRAL)
    found = InTextCalls(text=before.strip())
    for chunk in chunks:
        values = _json_values(chunk.strip())
        if values is not None:  # [TOOL_CALLS][{...}, {...}]
            found.calls += _tagged_calls(values)
            continue
        named = _MISTRAL_NAMED.match(chunk)  # [TOOL_CALLS]name[ARGS]{...}
        if named:
            arguments = _json_values(chunk[named.end() :].strip())
            if arguments and len(arguments) == 1:
                found.calls.append(_call(named.group(1), arguments[0]))
    return found


def _function_tags(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    if "<function=" not in text:
        return None
    calls = [_call(name, body.strip() or None) for name, body in _FUNCTION_TAG.findall(text)]
    return InTextCalls(calls, _FUNCTION_TAG.sub("", text).strip())


def _python_tag(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    if _PYTHON_TAG not in text:
        return None
    before, _, after = text.partition(_PYTHON_TAG)
    return InTextCalls(_tagged_calls(_json_values(after.strip())), before.strip())


def _bare_json(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    """Llama 3.x JSON and reactchat's own: the reply is nothing but call objects, perhaps fenced."""
    body = _unfence(text.strip())
    if not body.startswith(("{", "[")):
        return None
    values = _json_values(body)
    if not values:
        return None
    calls = [_call_object(value, strict=True) for value in _objects(values)]
    if not calls or None in calls:
        return None
    return InTextCalls([c for c in calls if c is not None])


def _pythonic(text: str, tool_names: Collection[str]) -> InTextCalls | None:
    """Llama 3.2's ``[name(arg=value), …]``: literal keyword arguments, known tools only."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith(")]")):
        return None
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    found = InTextCalls()
    for node in tree.elts:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args):
            return None
        if node.func.id not in tool_names:
            return None
        try:
            arguments = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        except ValueError:
            return None
        found.calls.append(_call(node.func.id, arguments))
    return found


def _unfence(text: str) -> str:
    match = _FENCE.match(text.strip())
    return match.group(1).strip() if match else text


__all__ = ["InTextCalls", "calls_in_text", "reply_calls", "strip_reasoning"]
