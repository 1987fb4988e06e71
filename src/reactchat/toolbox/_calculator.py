"""A safe calculator: an AST walker over arithmetic, no ``eval``.

Besides ``+ - * / // % **`` and a few functions it reads percentages the way people
write them: ``80.16 + 15%`` is 80.16 × 1.15, ``15% of 80.16`` is 12.024,
``80.16 * 115%`` is 92.184. ``×``, ``÷``, ``^``, ``x`` between numbers, thousands
separators and operators in words ("2 to the power of 10", "square root of 81", "3
times 4") are accepted: small models write them.

It runs inline on the event loop, so every operation is bounded before it runs:
integers never exceed ``MAX_INT_BITS`` (literals included), a product or a power is
refused when its result would, ``round``'s digits stay within ``MAX_ROUND_DIGITS``,
and the expression is at most ``MAX_LENGTH`` characters. Each operation then costs
microseconds and no expression takes more than a millisecond or so.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from reactchat.tools import tool

Number = int | float

MAX_EXPONENT = 1000
MAX_INT_BITS = 4096
MAX_LENGTH = 500
#: ``round(x, n)`` with ``|n|`` above this is refused (``round(7, -10**9)`` computes 10**(10**9))
MAX_ROUND_DIGITS = 100


class CalculatorError(ValueError):
    """The expression is not arithmetic the calculator accepts."""


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS: dict[str, Number] = {"pi": math.pi, "e": math.e, "tau": math.tau}
_PERCENT = "__percent__"

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}

# "15% of 80" -> "(15/100)*80"; "N%" not followed by an operand -> __percent__(N)
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b", re.IGNORECASE)
_PERCENT_SIGN = re.compile(r"(\d+(?:\.\d+)?)\s*%(?!\s*[\d.(a-zA-Z_])")
_NUMBER = r"(\d+(?:\.\d+)?)"
# arithmetic as people (and small models) write it in words, read as the operator it names
_WORDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"(?:the\s+)?square\s+root\s+of\s+{_NUMBER}", re.I), r"sqrt(\1)"),
    (re.compile(rf"\bsqrt\s+{_NUMBER}", re.I), r"sqrt(\1)"),
    (re.compile(r"\s*\b(?:raised\s+)?to\s+the\s+power\s+of\b\s*", re.I), " ** "),
    (re.compile(r"\s*\bsquared\b", re.I), " ** 2"),
    (re.compile(r"\s*\bcubed\b", re.I), " ** 3"),
    (re.compile(r"\s*\b(?:times|multiplied\s+by)\b\s*", re.I), " * "),
    (re.compile(r"\s*\bdivided\s+by\b\s*", re.I), " / "),
    (re.compile(r"\s*\bplus\b\s*", re.I), " + "),
    (re.compile(r"\s*\bminus\b\s*", re.I), " - "),
    (re.compile(r"(\d)\s*percent\b", re.I), r"\1%"),
    # "3 x 4", "3x4": x between numbers (or brackets) is a product; "0x1f" stays hexadecimal
    (re.compile(r"(?<=[\d)])(?<!\b0)\s*[xX]\s*(?=[\d(])"), " * "),
]
# "1,234.5": a comma before exactly three digits, in an expression without function calls
# (where a comma separates arguments)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_CALL = re.compile(r"[a-zA-Z_]\w*\s*\(")


def _rewrite(expression: str) -> str:
    text = expression.strip().rstrip("=").strip()
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-").replace("^", "**")
    for pattern, replacement in _WORDS:
        text = pattern.sub(replacement, text)
    if not _CALL.search(text):
        text = _THOUSANDS.sub("", text)
    text = _PERCENT_OF.sub(r"(\1/100)*", text)
    return _PERCENT_SIGN.sub(rf"{_PERCENT}(\1)", text)


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression safely; raise ``CalculatorError`` if it is not one."""
    if len(expression) > MAX_LENGTH:
        raise CalculatorError(f"expression longer than {MAX_LENGTH} characters")
    source = _rewrite(expression)
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from None
    try:
        return _eval(tree.body)
    except RecursionError:
        raise CalculatorError("the expression is nested too deeply") from None
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("result too large") from None
    except (ValueError, TypeError) as exc:
        if isinstance(exc, CalculatorError):
            raise
        raise CalculatorError(f"math error: {exc}") from None


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return _check(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _binary(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_eval(a) for a in node.args]
        if node.func.id == _PERCENT and len(args) == 1:
            return args[0] / 100
        function = _FUNCTIONS.get(node.func.id)
        if function is not None:
            if function is round:
                _check_round(args)
            return _check(function(*args))
        raise CalculatorError(f"unknown function {node.func.id!r}; available: {', '.join(sorted(_FUNCTIONS))}")
    if isinstance(node, ast.Name):
        raise CalculatorError(f"unknown name {node.id!r}: use numbers, not variables")
    raise CalculatorError(f"unsupported syntax: {ast.unparse(node)!r}")


def _is_percent(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == _PERCENT


def _binary(node: ast.BinOp) -> Number:
    left = _eval(node.left)
    # "price + 15%" means a 15% markup, "price - 15%" a 15% discount
    if isinstance(node.op, ast.Add | ast.Sub) and _is_percent(node.right):
        rate = _eval(node.right)
        return _check(left * (1 + rate) if isinstance(node.op, ast.Add) else left * (1 - rate))
    right = _eval(node.right)
    if isinstance(node.op, ast.Pow):
        if abs(right) > MAX_EXPONENT:
            raise CalculatorError(f"exponent larger than {MAX_EXPONENT}")
        big = isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1
        if big and right * math.log2(abs(left)) > MAX_INT_BITS:
            raise CalculatorError("result too large")
        return _check(left**right)
    operation = _BINARY.get(type(node.op))
    if operation is None:
        raise CalculatorError(f"unsupported operator in {ast.unparse(node)!r}")
    if isinstance(node.op, ast.Mult) and _int_bits(left) + _int_bits(right) > MAX_INT_BITS + 1:
        raise CalculatorError("result too large")
    return _check(operation(left, right))


def _int_bits(value: Number) -> int:
    return value.bit_length() if isinstance(value, int) else 0


def _check_round(args: list[Number]) -> None:
    """``round(x, n)`` computes ``10 ** abs(n)``: keep ``n`` small and whole."""
    if len(args) == 2:
        digits = args[1]
        if not isinstance(digits, int):
            raise CalculatorError("round(x, n) needs a whole number of digits n")
        if abs(digits) > MAX_ROUND_DIGITS:
            raise CalculatorError(f"round(x, n) takes at most {MAX_ROUND_DIGITS} digits either way")


def _check(value: Any) -> Number:
    if isinstance(value, complex):
        raise CalculatorError("the result is a complex number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError("result too large")
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        raise CalculatorError("result is not a finite number")
    return value  # type: ignore[no-any-return]


def format_number(value: Number) -> str:
    """Render a result without float noise: 80.16 * 1.15 gives ``92.184``."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"


#: what an expression may hold: digits, operators, brackets, function names; no braces,
#: quotes or placeholders, and a length bound (the schema says so, and the local model's
#: grammar follows it)
EXPRESSION_PATTERN = r"^[0-9a-z .,=+\-*/%^()×÷−]{1,200}$"


#: a pure function: ``read`` (run again after a crash, reused in a fork, never in doubt)
@tool(timeout=None, effect="read")
def calculator(expression: Annotated[str, Field(pattern=EXPRESSION_PATTERN)]) -> str:
    """Evaluate an arithmetic expression such as "6.4 * 1.3", "11 ** 2", "sqrt(2)",
    "60 + 25%" (a 25% markup) or "25% of 60". Numbers only, no variables.

    Args:
        expression: the arithmetic expression to evaluate
    """
    return format_number(evaluate(expression))
