"""The text ReAct protocol: prompt packs, the step parser and format corrections.

``parse(text)`` reads one model step and returns an ``Action`` or a ``FinalAnswer``,
or raises ``FormatError`` whose message is the correction shown to the model.
The rules (a contract):

* the first complete step wins: an Action followed by a Final Answer runs the action;
* anything after a model-written ``Observation:`` is discarded;
* labels are matched leniently (case, spaces before the colon, markdown bold, a
  full-width colon); ``Answer:`` counts as a final answer;
* Action Input JSON is repaired where unambiguous (single quotes, trailing commas,
  comments, code fences, surrounding prose); otherwise it stays a string and the
  engine tells the model what is wrong with it;
* ``add (add two numbers)`` or `` `add` `` means ``add``; ``Search[Colorado orogeny]``
  means tool ``Search`` with input ``Colorado orogeny``; a trailing ``PAUSE`` is ignored;
* numbered labels (``Thought 3:``, ``Action 3:``) are labels; ``Finish[answer]`` (and an
  action named ``Final Answer``) is the final answer unless a tool has that name;
* LangChain's JSON blob ``{"action": …, "action_input": …}`` after ``Action:``, after a
  thought or alone (fenced or not) is that action (``"Final Answer"``: the answer);
* ``<think>…</think>`` reasoning is removed first: nothing in it is a thought or an action;
* text with no label and no JSON action blob is a ``FormatError``.

The full contract, with the shapes real models write: ``docs/parser.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Literal

from reactchat.messages import (
    AssistantMessage,
    ImagePart,
    ReactLabels,
    Reply,
    Request,
    SystemMessage,
    ToolInput,
    ToolSpec,
    UserMessage,
)
from reactchat.protocols.base import ELIDE_MIN_CHARS, Call, Decision, FormatError, elision_note
from reactchat.protocols.formats import strip_reasoning
from reactchat.protocols.packs import EN_CORRECTIONS, PromptPack, get_pack


@dataclass(frozen=True)
class Action:
    """The model asks to call ``tool`` with ``input``."""

    tool: str
    input: ToolInput
    thought: str = ""
    #: the step as the model wrote it, up to the end of the Action Input
    raw: str = ""


@dataclass(frozen=True)
class FinalAnswer:
    """The model's final answer to the question."""

    answer: str
    thought: str = ""
    raw: str = ""


# ----------------------------------------------------------------------- parsing

Kind = Literal["thought", "action", "action_input", "observation", "final_answer"]
_ENGLISH_ALIASES: dict[str, tuple[str, ...]] = {
    "final_answer": ("Answer", "Final answer"),
    "action_input": ("Action input", "Input"),
}


@cache
def _label_pattern(pack: PromptPack) -> tuple[re.Pattern[str], dict[str, Kind]]:
    """One regex matching any label of the pack or of English at the start of a line."""
    names: dict[str, Kind] = {}
    for source in (ReactLabels(), pack.labels):
        for kind, label in source.model_dump().items():
            names[label.casefold()] = kind  # type: ignore[assignment]
    for aliases in (_ENGLISH_ALIASES, pack.aliases):
        for kind, spellings in aliases.items():
            for spelling in spellings:
                names.setdefault(spelling.casefold(), kind)  # type: ignore[arg-type]
    # longest first so that "Action Input" wins over "Action"
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    # "Thought 3:" / "Action 3:": the ReAct paper's trajectories number their labels
    pattern = re.compile(
        rf"^([ \t>#*_\-]*(?:\d+\.\s*)?)[*_]*({alternatives})(?:[ \t]*\d{{1,3}})?[*_]*[ \t]*[:：][*_]*[ \t]*",
        re.IGNORECASE | re.MULTILINE,
    )
    return pattern, names


_PAUSE = re.compile(r"(?:\n|^)[ \t]*PAUSE[ \t.]*\s*$", re.IGNORECASE)
#: a list item or a quote before a label: "1. Action: call the bank" inside an answer
_LIST_MARKER = re.compile(r"\d+\.|[-–>]|\*\s")
_BRACKET_CALL = re.compile(r"^([\w.\-]+)\s*\[(.*)\]\s*$", re.DOTALL)
_PAREN_CALL = re.compile(r"^([\w.\-]+)\((.*)\)\s*$", re.DOTALL)
_NAME_AND_NOTE = re.compile(r"^([\w.\-]+)\s+[\(\[—–\-:].*$", re.DOTALL)


def parse(text: str, pack: PromptPack | str = "en", tool_names: str = "") -> Action | FinalAnswer:
    """Parse one model step (the text written after ``Thought:``).

    Returns an ``Action`` or a ``FinalAnswer``; raises ``FormatError`` whose message is
    the correction to show the model (``tool_names``, comma-separated, is listed in it
    when given, and a tool of that name wins over ``Finish``).
    """
    pack = get_pack(pack)
    names_note = tool_names or "the tools listed above"
    text = strip_reasoning(text)
    pattern, names = _label_pattern(pack)
    segments: list[tuple[Kind | None, str, int]] = []  # (kind, content, end offset of content)
    matches = list(pattern.finditer(text))
    leading = text[: matches[0].start()] if matches else text
    segments.append((None, leading, len(leading)))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        segments.append((names[match.group(2).casefold()], text[match.end() : end], end))

    thought_parts: list[str] = []
    for index, (kind, content, end) in enumerate(segments):
        if kind is None or kind == "thought":
            # a JSON action blob may stand after a thought with no "Action:" label, or alone
            blob = _action_blob(content, strict=True)
            if blob is not None:
                head, name, value = blob
                thought = _join([*thought_parts, head])
                return _step(pack, name, value, thought, text[:end].rstrip(), tool_names)
            if content.strip():
                thought_parts.append(content.strip())
        elif kind == "observation":
            break  # the model imagined a result: everything after it is discarded
        elif kind == "final_answer":
            end = _answer_end(matches, index, names, text)
            answer = _strip_pause(text[matches[index - 1].end() : end]).strip()
            if not answer:
                raise _format_error(pack, "empty_answer", names_note)
            return FinalAnswer(answer=answer, thought=_join(thought_parts), raw=text[:end].rstrip())
        elif kind == "action":
            if _is_no_action(content) and any(k == "final_answer" for k, _, _ in segments[index:]):
                continue  # "Action: None" followed by a final answer
            return _action(pack, segments, index, _join(thought_parts), text, tool_names)
        # an input without an action is ignored: the action is what matters
    if len(segments) > 1 and thought_parts:
        raise _format_error(pack, "no_decision", names_note)
    raise _format_error(pack, "no_label", names_note)


def _answer_end(matches: list[re.Match[str]], index: int, names: dict[str, Kind], text: str) -> int:
    """Where the final answer whose label is ``matches[index - 1]`` ends.

    An answer may hold lines that look like labels ("1. Action: call the bank", "Input:
    your PIN"): only a plain Thought, Action, Observation or Final Answer line, not a list
    item or a quote, starts a new step.
    """
    for match in matches[index:]:
        kind = names[match.group(2).casefold()]
        if kind != "action_input" and not _LIST_MARKER.search(match.group(1)):
            return match.start()
    return len(text)


def _is_no_action(content: str) -> bool:
    return content.strip().strip("`'\".").casefold() in {"", "none", "n/a", "no action", "null"}


def _action(
    pack: PromptPack,
    segments: list[tuple[Kind | None, str, int]],
    index: int,
    thought: str,
    text: str,
    tool_names: str,
) -> Action | FinalAnswer:
    _, content, end = segments[index]
    name_text = _strip_pause(content).strip()
    if name_text.startswith(("{", "`")) and (blob := _action_blob(name_text, strict=False)):
        _, name, value = blob  # LangChain's "Action:" and a JSON blob {"action", "action_input"}
        return _step(pack, name, value, thought, text[:end].rstrip(), tool_names)
    first_line, _, rest_of_line = name_text.partition("\n")
    name, inline_input = _tool_name(first_line.strip())
    if not name:
        raise _format_error(pack, "no_tool", tool_names or "the tools listed above")
    if index + 1 < len(segments) and segments[index + 1][0] == "action_input":
        _, raw_input, end = segments[index + 1]
        return _step(pack, name, parse_input(raw_input), thought, text[:end].rstrip(), tool_names)
    if inline_input is not None:
        return _step(pack, name, parse_input(inline_input), thought, text[:end].rstrip(), tool_names)
    # some models put the JSON on the lines right after the tool name
    if rest_of_line.strip():
        return _step(pack, name, parse_input(rest_of_line), thought, text[:end].rstrip(), tool_names)
    raise _format_error(pack, "no_input", tool_names or "the tools listed above", tool=name)


def _step(
    pack: PromptPack, name: str, value: ToolInput, thought: str, raw: str, tool_names: str
) -> Action | FinalAnswer:
    """An action, or the final answer when the action is the ReAct paper's ``Finish[…]``
    (or LangChain's ``"Final Answer"``) and no tool has that name."""
    if name.casefold() in _finishing(pack, tool_names):
        answer = _answer_text(value)
        if not answer:
            raise _format_error(pack, "empty_answer", tool_names or "the tools listed above")
        return FinalAnswer(answer=answer, thought=thought, raw=raw)
    return Action(tool=name, input=value, thought=thought, raw=raw)


@lru_cache(maxsize=256)
def _finishing(pack: PromptPack, tool_names: str) -> frozenset[str]:
    """The action names that mean the final answer, unless a tool has that name (casefolded)."""
    finishing = {"finish", "final answer", "final_answer", pack.labels.final_answer.casefold()}
    return frozenset(finishing - {n.strip().casefold() for n in tool_names.split(",")})


def _answer_text(value: ToolInput) -> str:
    """The answer given as a Finish input: the text, or a one-field object's value."""
    if isinstance(value, str):
        return value.strip()
    texts = [v for v in value.values() if isinstance(v, str)]
    return texts[0].strip() if len(value) == 1 and texts else json.dumps(value, ensure_ascii=False)


def _action_blob(content: str, strict: bool) -> tuple[str, str, ToolInput] | None:
    """``(text before it, tool, input)`` from a JSON object ``{"action": …, "action_input":
    …}`` in ``content`` (fenced or not); ``strict`` also requires ``action_input``."""
    start = content.find("{")
    if start < 0 or "action" not in content:
        return None
    value = parse_input(content[start:])
    if not (isinstance(value, dict) and isinstance(value.get("action"), str) and value["action"].strip()):
        return None
    if strict and "action_input" not in value:
        return None
    fence = content.rfind("```", 0, start)
    head = content[: fence if fence >= 0 else start].strip()
    arguments = value.get("action_input", {})
    if not isinstance(arguments, dict | str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return head, value["action"].strip(), arguments if isinstance(arguments, dict) else str(arguments)


def _tool_name(text: str) -> tuple[str, str | None]:
    """Tool name and, for ``Search[query]`` or ``f(x)`` forms, the inline input."""
    text = text.strip().strip("`'\"*").strip()
    if text.isidentifier():
        return text, None  # the common case, without the regexes below
    if match := _BRACKET_CALL.match(text):
        return match.group(1), match.group(2)
    if match := _PAREN_CALL.match(text):
        return match.group(1), match.group(2)
    if match := _NAME_AND_NOTE.match(text):
        return match.group(1), None
    return text.strip("`'\".,;").strip(), None


def _join(parts: list[str]) -> str:
    return "\n".join(p for p in parts if p)


def _strip_pause(text: str) -> str:
    return _PAUSE.sub("", text) if "pause" in text.casefold() else text


def _format_error(pack: PromptPack, kind: str, tool_names: str, tool: str = "") -> FormatError:
    template = pack.corrections.get(kind) or EN_CORRECTIONS[kind]
    values = pack.labels.model_dump()
    return FormatError(template.format(tool=tool, tool_names=tool_names, **values), kind=kind)


# -------------------------------------------------------------- input repair

_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```", re.DOTALL)
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def parse_input(raw: str) -> ToolInput:
    """The Action Input as JSON where it is (or can unambiguously be repaired into)
    a JSON object; otherwise the stripped text."""
    text = _strip_pause(raw).strip()
    if fence := _FENCE.match(text):
        text = fence.group(1).strip()
    start, stop = text.find("{"), text.rfind("}")
    if start < 0:
        return _unwrap_string(text)
    if stop < start:
        return text  # an opening brace and no closing one: broken, let the tool say so
    candidate = text[start : stop + 1]
    for repair in (False, True):
        try:
            value = json.loads(_repair(candidate) if repair else candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return candidate if start == 0 or not text[:start].strip() else text


def _unwrap_string(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return text
        return value if isinstance(value, str) else text
    return text


def _repair(text: str) -> str:
    """Fix the JSON slips models make when the fix is unambiguous: 'single quotes',
    trailing commas, // and /* */ comments, Python's True/False/None. One scan that
    knows where strings are, so nothing inside a string is touched ("7 // 2" stays)."""
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if quote:
            if char == "\\" and i + 1 < n:
                # \' is an escaped quote in a single-quoted string; JSON does not need it escaped
                out.append(text[i + 1] if quote == "'" and text[i + 1] == "'" else text[i : i + 2])
                i += 2
                continue
            if char == quote:
                quote = None
                out.append('"')
            elif quote == "'" and char == '"':
                out.append('\\"')
            else:
                out.append(char)
            i += 1
            continue
        if char in "'\"":
            quote = char
            out.append('"')
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif char == "," and text[i + 1 :].lstrip()[:1] in ("}", "]"):
            pass  # a trailing comma
        elif char.isalpha() or char == "_":
            word = re.match(r"\w+", text[i:])
            assert word is not None
            token = word.group(0)
            out.append(_PY_LITERALS.get(token, token))
            i += len(token)
            continue
        else:
            out.append(char)
        i += 1
    return "".join(out)


def input_json(value: Any) -> str:
    """An Action Input as the canonical JSON the scratchpad shows."""
    if isinstance(value, str):
        return value
    return _INPUT_JSON.encode(value)


#: ``json.dumps(value, ensure_ascii=False)``, without building an encoder per call (once per step)
_INPUT_JSON = json.JSONEncoder(ensure_ascii=False)


# ------------------------------------------------------------------ the protocol


class ReactTranscript:
    """The text ReAct prompt of one turn, kept append-only.

    The system message holds the instructions and tools, the user message the
    history and the question, and a prefilled assistant message the scratchpad that
    the model continues after ``Thought:``. Steps only ever append to the scratchpad,
    so a model with a prefix cache evaluates only what is new.
    """

    def __init__(
        self,
        pack: PromptPack,
        tools: list[ToolSpec],
        history: list[tuple[str, str]],
        question: str,
        system: str | None = None,
        few_shot: bool = False,
        summary: str = "",
        images: tuple[ImagePart, ...] = (),
    ) -> None:
        self.pack = pack
        self.tools = tools
        self.tool_names = ", ".join(t.name for t in tools)
        labels = pack.labels
        self._thought = f"{labels.thought}:"
        self._observation = f"{labels.observation}:"
        instructions = _instructions(_ToolSet(pack, tools, few_shot))
        # text made here: not validated again
        content = f"{system}\n\n{instructions}" if system else instructions
        self.system = SystemMessage(content=content)
        self.user = UserMessage(content=_question_block(pack, history, question, summary), images=images)
        self.stop = [f"\n{labels.observation}:", f"\n{labels.observation} :"]
        self._chunks: list[str] = []
        #: observations that may still be elided: call id (or correction key) → chunk index
        self._elidable: dict[str, int] = {}
        self._size = len(self.system.content) + len(self.user.content)
        self._append(self._thought)
        #: the chunk index where each step not yet summarised begins, and how many were
        self._marks: list[int] = []
        self.folded = 0
        #: the calls of this turn, ``(tool, input JSON)`` by call id, and those that succeeded
        self._calls: dict[str, tuple[str, str]] = {}
        self._succeeded: set[tuple[str, str]] = set()
        #: a call that had succeeded was asked for again and refused: the model has its
        #: result, so the next step answers (a local model's grammar then offers no tool)
        self._answer_next = False

    @property
    def size(self) -> int:
        """Characters in the prompt (system, user and scratchpad)."""
        return self._size

    @property
    def images(self) -> bool:
        """Whether the question's message carries images (its own, and the observations')."""
        return bool(self.user.images)

    def _append(self, chunk: str) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)

    def add_step(self, raw: str, thought: str, calls: Sequence[Call]) -> None:
        """Record what the model wrote for one step."""
        self._marks.append(len(self._chunks))
        raw = raw.rstrip()
        if raw.lstrip().startswith(self._thought):
            raw = raw.lstrip()[len(self._thought) :]
        if not raw:
            # rebuilt from structured events (e.g. a run begun with another protocol)
            raw = f" {thought}"
            for _, tool, value in calls:
                labels = self.pack.labels
                raw += f"\n{labels.action}: {tool}\n{labels.action_input}: {input_json(value)}"
        elif not raw[0].isspace():
            raw = " " + raw
        self._append(raw)
        for call_id, tool, value in calls:
            self._calls[call_id] = (tool, input_json(value))

    def add_observation(
        self, call_id: str, text: str, is_error: bool = False, images: tuple[ImagePart, ...] = ()
    ) -> None:
        """Append an observation and the next ``Thought:`` (an error reads like any other result).

        A failed call that had already succeeded in this turn (a repeat the guard refused)
        makes the next step the answer: the request offers no tool. Its images go with the
        user's message (the scratchpad, the model's own message, is text only), and the
        observation names them.
        """
        key = self._calls.get(call_id)
        if key is not None and not is_error:
            self._succeeded.add(key)
        elif key in self._succeeded:
            self._answer_next = True
        self._append(f"\n{self._observation} ")
        self._elidable[call_id] = len(self._chunks)
        self._append(text)
        if images:
            self.user = self.user.model_copy(update={"images": (*self.user.images, *images)})
            self._append("".join(f"\n[image {image.name}: shown with the question]" for image in images))
        self._append(f"\n{self._thought}")

    def add_correction(self, raw: str, correction: str) -> None:
        """A step that could not be parsed, then the correction as its observation."""
        self.add_step(raw, "", [])
        self._append(f"\n{self._observation} {correction}\n{self._thought}")

    def elide_oldest(self) -> bool:
        """Replace the oldest remaining long observation with a note; False if none is left."""
        for call_id, index in self._elidable.items():
            text = self._chunks[index]
            if len(text) > ELIDE_MIN_CHARS:
                note = elision_note(len(text))
                self._chunks[index] = note
                self._size += len(note) - len(text)
                del self._elidable[call_id]
                return True
        return False

    @property
    def steps(self) -> int:
        """Steps recorded (corrections included), summarised or not."""
        return self.folded + len(self._marks)

    def steps_text(self, through: int) -> str:
        """The scratchpad of steps 1 to ``through`` (a summary of the earliest among them
        in its place), or ``""`` when they are summarised already or no later step remains."""
        count = through - self.folded
        if count <= 0 or count >= len(self._marks):
            return ""
        return "".join(self._chunks[: self._marks[count]])

    def fold(self, through: int, summary: str) -> bool:
        """Put ``summary`` in place of steps 1 to ``through``; False when it cannot (a later
        step must remain: the one the model goes on from)."""
        count = through - self.folded
        if count <= 0 or count >= len(self._marks):
            return False
        end = self._marks[count]
        note = f"({self.pack.steps_header}: {summary})\n{self._thought}"
        self._size += len(note) - sum(len(chunk) for chunk in self._chunks[:end])
        self._chunks[:end] = [note]
        shift = end - 1
        self._marks = [mark - shift for mark in self._marks[count:]]
        self._elidable = {key: index - shift for key, index in self._elidable.items() if index >= end}
        self.folded = through
        return True

    def request(self, final: bool = False) -> Request:
        """The request for the next step; ``final`` asks for the best answer now."""
        scratchpad = "".join(self._chunks)
        react: ReactLabels | None = self.pack.labels
        if final:
            labels = self.pack.labels
            # the note is the engine's, in brackets after the last observation: written as the
            # model's own thought, a small model copied it as its answer
            scratchpad = scratchpad.removesuffix(f"\n{self._thought}")
            scratchpad += f"\n({self.pack.budget_note})\n{labels.final_answer}:"
            react = None  # free text: the answer itself
        prefill = AssistantMessage.prefilled(scratchpad)
        return Request.built(
            [self.system, self.user, prefill],
            stop=self.stop,
            react=react,
            react_tools=self.tools if react and not self._answer_next else [],
        )

    def read(self, reply: Reply) -> Decision:
        """Parse a reply into the next decision; raises ``FormatError``."""
        step = parse(reply.text, self.pack, self.tool_names)
        if isinstance(step, FinalAnswer):
            return Decision(step.thought, step.raw, [], step.answer)
        return Decision(step.thought, step.raw, [Call("", step.tool, step.input)])

    def read_final(self, reply: Reply) -> str:
        """The answer from a reply to ``request(final=True)``."""
        text = strip_reasoning(reply.text).strip()
        try:
            decision = parse(text, self.pack)
        except FormatError:
            return text
        return decision.answer if isinstance(decision, FinalAnswer) else text


class _ToolSet:
    """What the instructions are made of: a pack, the tools' specs and ``few_shot``.

    Equal to another when the pack is the same object and each tool has the same name,
    description and schema object: a tool whose name, description or schema was replaced
    has a new spec (``Tool.spec``), so a new key. The key keeps its schemas alive, so their
    ids in it name no other object while it is cached.
    """

    __slots__ = ("few_shot", "key", "pack", "tools")

    def __init__(self, pack: PromptPack, tools: list[ToolSpec], few_shot: bool) -> None:
        self.pack, self.tools, self.few_shot = pack, tuple(tools), few_shot
        self.key = (id(pack), few_shot, *[(t.name, t.description, id(t.input_schema)) for t in tools])

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ToolSet) and self.key == other.key


@lru_cache(maxsize=128)
def _instructions(tool_set: _ToolSet) -> str:
    """The system prompt's instructions and tool list (made once per tool set: every turn asks)."""
    pack, lines = tool_set.pack, []
    for spec in tool_set.tools:
        description = " ".join(spec.description.split())
        lines.append(f"{spec.name}: {description}\n  {_input_lines(spec.input_schema)}")
    tool_names = ", ".join(t.name for t in tool_set.tools)
    example = pack.example_block() if tool_set.few_shot else ""
    return pack.instructions.format(
        tools="\n".join(lines), tool_names=tool_names, example=example, **pack.labels.model_dump()
    )


def _input_lines(schema: dict[str, Any]) -> str:
    """A tool's input as the model should write it, ``{"country": string, "field": "capital"
    | "currency"}``, then one line per described argument. The descriptions stay out of
    the JSON: small models copy a quoted description as the argument's value."""
    properties: dict[str, Any] = schema.get("properties", {})
    fields = ", ".join(f"{json.dumps(name)}: {_value_shape(value)}" for name, value in properties.items())
    notes = [
        f"  {name}: {' '.join(str(value['description']).split())}"
        for name, value in properties.items()
        if isinstance(value, dict) and value.get("description")
    ]
    return "\n".join([f"input: {{{fields}}}", *notes])


def _value_shape(schema: Any) -> str:
    """``string``, ``integer from 1 to 30``, ``"km" | "mi"``, or the JSON schema itself."""
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    kind = schema.get("type")
    if kind in ("string", "number", "integer", "boolean"):
        low, high = schema.get("minimum"), schema.get("maximum")
        return f"{kind} from {low} to {high}" if low is not None and high is not None else str(kind)
    rest = {k: v for k, v in schema.items() if k not in ("description", "title")}
    return json.dumps(rest, ensure_ascii=False)


def _question_block(pack: PromptPack, history: list[tuple[str, str]], question: str, summary: str = "") -> str:
    parts = []
    if summary:
        parts += [pack.summary_header, summary, ""]
    if history:
        parts.append(pack.history_header)
        for asked, answered in history:
            parts.append(f"{pack.user}: {asked}\n{pack.assistant}: {answered}")
        parts.append("")
    parts.append(f"{pack.question}: {question}")
    return "\n".join(parts)
