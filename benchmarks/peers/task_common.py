"""What every framework runs: N lookups of a trivial tool, then a final answer.

Each ``task_*.py`` module exposes ``build(n, mark, variant) -> run``: ``run()`` performs
one complete agent run against that framework's own scripted zero-latency model and
returns the final answer. The tool calls ``mark()`` once per step, so the worker can
time one full loop iteration (model call, parsing, tool, state update, persistence)
as the gap between two consecutive tool calls.
"""

from __future__ import annotations

from collections.abc import Callable

Mark = Callable[[], None]
Run = Callable[[], str]

QUESTION = "Look up every key you are told about, then say done."
ANSWER = "done"
TOOL_DOC = "Return the value stored under key."


def key(i: int) -> str:
    """The argument of step ``i``: distinct per step, so no engine sees a repeated action."""
    return f"k{i}"


def value(k: str) -> str:
    """What the trivial tool returns."""
    return f"value of {k}"
