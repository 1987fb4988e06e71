"""GBNF grammars that make a local model write only valid steps.

Two grammars, both built from the tools of the current request:

* ``react_step_grammar``: the continuation of a text ReAct scratchpad that ends with
  the Thought label: `` <thought>\\n<Action>: <tool>\\n<Action Input>: <json>`` where
  the JSON matches *that* tool's input schema, or `` <thought>\\n<Final Answer>: <text>``.
  The labels come from the active prompt pack (``ReactLabels``).
* ``tool_call_grammar``: a native tool call ``{"tool": "<name>", "input": <json>}``
  (input matching that tool's schema) or a plain-text answer that does not start with
  ``{``.

JSON schemas are converted with llama.cpp's own converter (``SchemaConverter`` from
``llama_cpp.llama_grammar``, pure Python), extended here for integer ``minimum`` /
``maximum`` bounds, which that converter ignores. The grammar text is plain GBNF, so
it also works with a llama.cpp server's ``grammar`` field.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from reactchat.messages import ReactLabels, ToolSpec

# the converter caps integers at 16 digits; bounds beyond that are not worth a rule
_MAX_DIGITS = 16
# string schemas that already constrain their length or shape
_STRING_CONSTRAINTS = {"maxLength", "pattern", "format", "enum", "const"}


def gbnf_literal(text: str) -> str:
    """Quote ``text`` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _rule_name(text: str) -> str:
    """A GBNF rule name (letters, digits, dashes) derived from a tool name."""
    return re.sub(r"[^a-zA-Z0-9-]+", "-", text).strip("-").lower() or "tool"


# ----------------------------------------------------------------- integer ranges


def _digit_range_alternatives(low: str, high: str) -> list[str]:
    """GBNF sequences matching every decimal string from ``low`` to ``high``.

    Both have the same number of digits. The classic split: fix the common prefix,
    then branch on the first differing digit (low's tail up to 9..9, the digits
    strictly between, high's tail down from 0..0).
    """
    if not low:
        return [""]
    if low[0] == high[0]:
        return [f'"{low[0]}" {alt}'.strip() for alt in _digit_range_alternatives(low[1:], high[1:])]
    rest = len(low) - 1
    out: list[str] = []
    if low[1:] == "0" * rest and high[1:] == "9" * rest:
        return [f"[{low[0]}-{high[0]}]" + " [0-9]" * rest]
    out += [f'"{low[0]}" {alt}'.strip() for alt in _digit_range_alternatives(low[1:], "9" * rest)]
    if int(high[0]) - int(low[0]) > 1:
        out.append(f"[{int(low[0]) + 1}-{int(high[0]) - 1}]" + " [0-9]" * rest)
    out += [f'"{high[0]}" {alt}'.strip() for alt in _digit_range_alternatives("0" * rest, high[1:])]
    return out


def _natural_range(low: int, high: int | None) -> list[str]:
    """Alternatives for the integers ``low <= n <= high`` (``high=None``: no bound), n >= 0."""
    out: list[str] = []
    width = len(str(low))
    top = high if high is not None else 10**_MAX_DIGITS - 1
    while low <= top:
        block_end = min(top, 10**width - 1)
        lo = str(low)
        out += _digit_range_alternatives(lo, str(block_end).rjust(len(lo), "0"))
        low, width = block_end + 1, width + 1
        if high is None and width > 1:
            # every longer number qualifies: one rule instead of a block per width
            out.append("[1-9]" + f" [0-9]{{{width - 1},{_MAX_DIGITS - 1}}}")
            break
    return out


def integer_range_rule(minimum: int | None, maximum: int | None) -> str:
    """A GBNF expression for the JSON integers in ``[minimum, maximum]`` (None: unbounded)."""
    alternatives: list[str] = []
    if minimum is None or minimum < 0:
        # negative part: -n for n in [max(1, -maximum), -minimum]
        neg_low = 1 if maximum is None or maximum >= 0 else -maximum
        neg_high = None if minimum is None else -minimum
        alternatives += [f'"-" {alt}' for alt in _natural_range(neg_low, neg_high)]
    if maximum is None or maximum >= 0:
        alternatives += _natural_range(max(0, minimum or 0), maximum)
    if not alternatives or (minimum is not None and maximum is not None and minimum > maximum):
        raise ValueError(f"empty integer range [{minimum}, {maximum}]")
    return "(" + " | ".join(f"({alt})" for alt in alternatives) + ") space"


def _integer_bounds(schema: dict[str, Any]) -> tuple[int | None, int | None]:
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(schema.get("exclusiveMinimum"), int | float):
        low = schema["exclusiveMinimum"] + 1
    if isinstance(schema.get("exclusiveMaximum"), int | float):
        high = schema["exclusiveMaximum"] - 1
    return (None if low is None else int(low)), (None if high is None else int(high))


# ----------------------------------------------------------------- string patterns

# "^[chars]{m,n}$" and its "+" / "*" forms: one character class, repeated
_CLASS_PATTERN = re.compile(r"^\^?(\[\^?(?:[^\]\\\"]|\\[\]\-^\\])+\])(?:\{(\d+)(?:,(\d*))?\}|([+*]))\$?$")


def pattern_rule(schema: dict[str, Any], default_max: int) -> str | None:
    """A GBNF rule for a JSON string whose ``pattern`` is one repeated character class
    (``^[0-9+*/ ().]{1,120}$``), bounded by the pattern, ``maxLength`` or ``default_max``;
    None for other patterns (llama.cpp's converter takes those).

    llama.cpp's converter unrolls ``{1,120}`` into 120 nested optional groups; GBNF has
    bounded repetition of its own. A class that admits a quote or a backslash is left to
    the converter: inside JSON those need escapes.
    """
    match = _CLASS_PATTERN.match(str(schema.get("pattern", "")))
    if match is None:
        return None
    char_class, low, high, plus_or_star = match.groups()
    if char_class.startswith("[^") or "\\\\" in char_class:
        return None  # a negated class admits quotes and control characters; a backslash needs escaping
    minimum = int(low) if low else (1 if plus_or_star == "+" else 0)
    maximum = int(high) if high else (minimum if low and high is None else default_max)
    if isinstance(schema.get("maxLength"), int):
        maximum = min(maximum, schema["maxLength"])
    minimum = max(minimum, int(schema.get("minLength", 0)))
    if minimum > maximum:
        return None
    return f'"\\"" {char_class}{{{minimum},{maximum}}} "\\"" space'


# ----------------------------------------------------------------- schema rules


@dataclass(frozen=True)
class Limits:
    """Character caps on the free-text parts of a step.

    A greedy small model can loop inside a string or a thought until it runs out of
    tokens, and a step cut off there does not parse. Capping each part makes every step
    end well within ``LocalModel.max_tokens``; the caps are generous for real thoughts
    and arguments, and a schema's own ``maxLength`` wins over ``string``.
    """

    thought: int = 200
    answer: int = 400
    string: int = 160


def _schema_converter(limits: Limits) -> Any:
    """llama.cpp's JSON-schema converter, with integer bounds and string caps enforced."""
    try:
        # through importlib: typing must not depend on whether the extra is installed
        grammar_module: Any = importlib.import_module("llama_cpp.llama_grammar")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "grammar-constrained decoding needs llama-cpp-python: pip install 'reactchat[local]'"
        ) from exc

    # JSON forbids raw control characters in strings; llama-cpp-python's rule allows them,
    # and a raw newline inside an Action Input lets the model run into "\nObservation:"
    strict_char = grammar_module.BuiltinRule(r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})', [])

    class BoundedSchemaConverter(grammar_module.SchemaConverter):  # type: ignore[misc]
        def _add_primitive(self, name: str, rule: Any) -> Any:
            return super()._add_primitive(name, strict_char if name == "char" else rule)

        def visit(self, schema: dict[str, Any], name: str) -> Any:
            low, high = _integer_bounds(schema)
            if schema.get("type") == "integer" and (low is not None or high is not None):
                return self._add_rule(name or "root", integer_range_rule(low, high))
            if schema.get("type") == "string" and not _STRING_CONSTRAINTS & schema.keys():
                char = self._add_primitive("char", strict_char)
                return self._add_rule(name or "root", f'"\\"" {char}{{0,{limits.string}}} "\\"" space')
            if schema.get("type") == "string" and (rule := pattern_rule(schema, limits.string)):
                return self._add_rule(name or "root", rule)
            return super().visit(schema, name)

    return BoundedSchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)


def _add_tool_input_rules(converter: Any, tools: list[ToolSpec]) -> dict[str, str]:
    """Add one rule per tool input schema; return tool name -> rule name."""
    rules: dict[str, str] = {}
    for index, spec in enumerate(tools):
        name = f"in{index}-{_rule_name(spec.name)}"
        try:
            schema = converter.resolve_refs(spec.input_schema, f"tool-{index}")
            rules[spec.name] = converter.visit(schema, name)
        except (AssertionError, KeyError, TypeError, ValueError, RecursionError):
            # a schema feature the converter does not know: any JSON object is better
            # than no grammar at all, and the tool still validates what it receives
            rules[spec.name] = converter.visit({"type": "object"}, name)
    return rules


def _check_tools(tools: list[ToolSpec]) -> None:
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate tool names in {names}")


# ----------------------------------------------------------------- the grammars


def react_step_grammar(
    labels: ReactLabels,
    tools: list[ToolSpec],
    *,
    leading_space: bool = True,
    limits: Limits = Limits(),
    answer_schema: dict[str, Any] | None = None,
) -> str:
    """GBNF for one ReAct step continuing a scratchpad that ends with ``<Thought>:``.

    ``leading_space`` is False when the scratchpad already ends with whitespace.
    With no tools, only the final answer is allowed; with ``answer_schema`` (a typed
    answer) the final answer is JSON of that schema.
    """
    tools_json = json.dumps([t.model_dump() for t in tools])
    return _react_step_grammar(labels.model_dump_json(), tools_json, leading_space, limits, _json(answer_schema))


def _json(schema: dict[str, Any] | None) -> str:
    return json.dumps(schema, sort_keys=True) if schema is not None else ""


def _answer_rule(converter: Any, answer_json: str, limits: Limits) -> tuple[str, str]:
    """``(rule name, its line or "")`` for a final answer: one line of text, or JSON of
    the schema ``answer_json`` (its rules go into ``converter``)."""
    if not answer_json:
        # one line: a 135M model that may start a new line tends to write a whole
        # made-up dialogue after its answer; one line still holds a paragraph
        return "answer-text", f"answer-text ::= [^ \\n] [^\\n]{{0,{limits.answer - 1}}}"
    schema = converter.resolve_refs(json.loads(answer_json), "answer")
    return converter.visit(schema, "answer-json"), ""


@lru_cache(maxsize=64)
def _react_step_grammar(
    labels_json: str, tools_json: str, leading_space: bool, limits: Limits, answer_json: str = ""
) -> str:
    labels = ReactLabels.model_validate_json(labels_json)
    tools = [ToolSpec.model_validate(t) for t in json.loads(tools_json)]
    _check_tools(tools)
    converter = _schema_converter(limits)
    inputs = _add_tool_input_rules(converter, tools)
    answer, answer_line = _answer_rule(converter, answer_json, limits)
    action_input = gbnf_literal(f"\n{labels.action_input}: ")
    space = '" " ' if leading_space else ""
    lines = [
        # the thought is one non-empty line; the step then either acts or answers
        f'root ::= {space}thought-text "\\n" ' + ("(action | final-answer)" if tools else "final-answer"),
        f"thought-text ::= [^ \\n] [^\\n]{{0,{limits.thought - 1}}}",
        f"final-answer ::= {gbnf_literal(labels.final_answer + ': ')} {answer}",
        *filter(None, [answer_line]),
    ]
    if tools:
        alternatives = " | ".join(f"{gbnf_literal(name)} {action_input} {rule}" for name, rule in inputs.items())
        lines.append(f"action ::= {gbnf_literal(labels.action + ': ')} ({alternatives})")
    schema_rules: str = converter.format_grammar()
    return "\n".join(lines) + "\n" + schema_rules + "\n"


def final_answer_grammar(
    *, leading_space: bool = True, limits: Limits = Limits(), answer_schema: dict[str, Any] | None = None
) -> str:
    """GBNF for the answer line after a scratchpad that ends with ``<Final Answer>:``
    (JSON of ``answer_schema`` for a typed answer)."""
    space = '" " ' if leading_space else ""
    if answer_schema is None:
        return f"root ::= {space}[^ \\n] [^\\n]{{0,{limits.answer - 1}}}\n"
    converter = _schema_converter(limits)
    answer, _ = _answer_rule(converter, _json(answer_schema), limits)
    rules: str = converter.format_grammar()
    return f"root ::= {space}{answer}\n{rules}\n"


def tool_call_grammar(
    tools: list[ToolSpec], *, limits: Limits = Limits(), answer_schema: dict[str, Any] | None = None
) -> str:
    """GBNF for a native-protocol reply: one JSON tool call or a plain-text answer (JSON of
    ``answer_schema`` for a typed answer)."""
    return _tool_call_grammar(json.dumps([t.model_dump() for t in tools]), limits, _json(answer_schema))


@lru_cache(maxsize=64)
def _tool_call_grammar(tools_json: str, limits: Limits, answer_json: str = "") -> str:
    tools = [ToolSpec.model_validate(t) for t in json.loads(tools_json)]
    _check_tools(tools)
    converter = _schema_converter(limits)
    inputs = _add_tool_input_rules(converter, tools)
    calls = " | ".join(
        f'{gbnf_literal(json.dumps(name))} space "," space "\\"input\\"" space ":" space {rule}'
        for name, rule in inputs.items()
    )
    answer = "answer-text"
    lines = []
    if answer_json:
        answer = converter.visit(converter.resolve_refs(json.loads(answer_json), "answer"), "answer-json")
    else:
        # any text that does not open a JSON object; ends when the model ends its turn
        lines.append("answer-text ::= [^{ \\t\\n] [^\\x00]*")
    lines.insert(0, f"root ::= tool-call | {answer}" if tools else f"root ::= {answer}")
    if tools:
        lines.append(f'tool-call ::= "{{" space "\\"tool\\"" space ":" space ({calls}) "}}" space')
    schema_rules: str = converter.format_grammar()
    return "\n".join(lines) + "\n" + schema_rules + "\n"
