"""Eval cases: one JSON object a line, read and checked whole before anything runs.

A line is ``{"id", "input", "expected", "scorer"}``; ``input`` is a string or a list of
strings (one per turn, the last turn's answer is scored); ``answers`` lists replies to
the questions the agent asks (ask_user, approvals), given in order; ``tags`` groups cases
in the summary; ``tolerance`` is the ``number`` scorer's absolute tolerance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactchat.errors import ReactchatError
from reactchat.evals.scorers import check_scorer

FIELDS = frozenset({"id", "input", "expected", "scorer", "answers", "tags", "tolerance"})


class BadCases(ReactchatError, ValueError):
    """A cases file cannot be read; nothing was run."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {reason}; fix the line and run again (no case was run)")
        self.path, self.line, self.reason = path, line, reason


@dataclass(frozen=True)
class Case:
    """One eval case: the turns to send, the expected answer and how it is scored."""

    id: str
    input: list[str]
    expected: Any = None
    scorer: str = "number"
    answers: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    tolerance: float | None = None

    @classmethod
    def of(cls, data: Any) -> Case:
        """A case from one decoded line; ``ValueError`` says what is wrong with it."""
        if not isinstance(data, dict):
            raise ValueError("a case is a JSON object")
        unknown = sorted(set(data) - FIELDS)
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(FIELDS))})")
        case_id = data.get("id")
        if not isinstance(case_id, str | int) or isinstance(case_id, bool) or str(case_id) == "":
            raise ValueError('"id" must be a non-empty string')
        turns = data.get("input")
        turns = [turns] if isinstance(turns, str) else turns
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            raise ValueError('"input" must be a string or a non-empty list of strings')
        scorer = data.get("scorer", "number")
        if not isinstance(scorer, str):
            raise ValueError('"scorer" must be a string')
        tolerance = data.get("tolerance")
        if tolerance is not None and (not isinstance(tolerance, int | float) or tolerance < 0):
            raise ValueError('"tolerance" must be a number ≥ 0')
        return cls(
            id=str(case_id),
            input=list(turns),
            expected=data.get("expected"),
            scorer=scorer,
            answers=_strings(data, "answers"),
            tags=_strings(data, "tags"),
            tolerance=None if tolerance is None else float(tolerance),
        )


def _strings(data: dict[str, Any], name: str) -> list[str]:
    value = data.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'"{name}" must be a list of strings')
    return list(value)


def parse_cases(text: str, path: str = "<cases>") -> list[Case]:
    """The cases of a JSON-lines text (blank lines skipped); ``BadCases`` names the first bad line."""
    cases: list[Case] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            case = Case.of(json.loads(line))
            check_scorer(case.scorer, case.expected)
        except json.JSONDecodeError as exc:
            raise BadCases(path, number, f"not JSON ({exc.msg} at column {exc.colno})") from None
        except ValueError as exc:
            raise BadCases(path, number, str(exc)) from None
        if case.id in seen:
            raise BadCases(path, number, f"the id {case.id!r} is used twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise BadCases(path, 0, "no case in the file")
    return cases


def load_cases(path: str | Path) -> list[Case]:
    """Read a cases file (JSON lines); ``BadCases`` when it cannot be read or a line is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadCases(str(path), 0, f"cannot read the file ({exc})") from None
    return parse_cases(text, str(path))
