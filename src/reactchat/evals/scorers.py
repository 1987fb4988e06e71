"""Scorers: does an answer match what a case expects?

``exact`` compares the stripped texts; ``contains`` looks for the expected text in the
answer, ignoring case (a list of texts: all of them); ``number`` (the default) reads the
last number written in the answer and compares it with the expected number, within the
case's ``tolerance`` (default: one millionth of the expected value, at least 1e-9);
``python:module:function`` calls ``function(answer, case)``, whose truth is the verdict.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # cases.py imports this module to check a case's scorer
    from reactchat.evals.cases import Case

#: a number as people write it: sign, thousands separators, decimals, exponent
NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+")
BUILT_IN = ("exact", "contains", "number")


def last_number(text: str) -> float | None:
    """The last number written in ``text`` ("1,234.5" reads 1234.5); None if there is none."""
    found = NUMBER.findall(text)
    if not found:
        return None
    return float(found[-1].replace(",", "").replace("−", "-"))


def exact(answer: str, expected: Any) -> bool:
    """The answer, stripped, is the expected text."""
    return answer.strip() == str(expected).strip()


def contains(answer: str, expected: Any) -> bool:
    """The expected text (or every text of a list) is in the answer, ignoring case."""
    wanted = expected if isinstance(expected, list) else [expected]
    return all(str(w).casefold() in answer.casefold() for w in wanted)


def number(answer: str, expected: Any, tolerance: float | None = None) -> bool:
    """The last number in the answer is the expected one, within ``tolerance``."""
    got = last_number(answer)
    if got is None:
        return False
    target = float(expected)
    limit = tolerance if tolerance is not None else max(1e-9, abs(target) * 1e-6)
    return math.isclose(got, target, rel_tol=0.0, abs_tol=limit)


def reference(scorer: str) -> Callable[[str, Case], Any]:
    """The function a ``python:module:function`` scorer names; ``ValueError`` if it cannot be loaded."""
    _, module_name, function = [*scorer.split(":", 2), "", ""][:3]
    if not module_name or not function:
        raise ValueError(f"scorer {scorer!r} must read python:module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"scorer {scorer!r}: cannot import {module_name} ({exc})") from None
    found = getattr(module, function, None)
    if not callable(found):
        raise ValueError(f"scorer {scorer!r}: {module_name} has no function {function}")
    fn: Callable[[str, Case], Any] = found
    return fn


def check_scorer(scorer: str, expected: Any) -> None:
    """Raise ``ValueError`` unless ``scorer`` exists and can judge ``expected``."""
    if scorer.startswith("python:"):
        reference(scorer)
    elif scorer not in BUILT_IN:
        raise ValueError(f"unknown scorer {scorer!r}: use exact, contains, number or python:module:function")
    elif expected is None:
        raise ValueError(f'the {scorer} scorer needs an "expected" value')
    elif scorer == "number" and not _is_number(expected):
        raise ValueError(f'the number scorer needs a number as "expected", not {expected!r}')


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def score(case: Case, answer: str | None) -> bool:
    """Whether ``answer`` passes ``case`` (no answer never passes)."""
    if answer is None:
        return False
    if case.scorer.startswith("python:"):
        return bool(reference(case.scorer)(answer, case))
    if case.scorer == "exact":
        return exact(answer, case.expected)
    if case.scorer == "contains":
        return contains(answer, case.expected)
    return number(answer, case.expected, case.tolerance)
