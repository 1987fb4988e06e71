"""What every framework runs for the delegation benchmark: a parent agent hands N tasks, one
after the other, to a sub-agent that answers each after one tool step; then the parent says done.

Each ``task_delegation_*.py`` module exposes ``build(n, mark, variant) -> run`` like the
other task modules: one ``run()`` makes N delegations (parent step → sub-agent run of one
tool step → answer back) and N + 1 parent model calls; the sub-agent's tool calls
``mark()``, so the worker checks that exactly N delegations happened.
"""

from __future__ import annotations

from task_common import ANSWER, QUESTION, Mark, Run, key, value

SUB_NAME = "researcher"
SUB_DESCRIPTION = "Looks up one key and reports its value."


def task(i: int) -> str:
    """The parent's task for delegation ``i``."""
    return f"look up {key(i)}"


def report(i: int) -> str:
    """The sub-agent's answer for delegation ``i``."""
    return f"{key(i)} is {value(key(i))}"


__all__ = ["ANSWER", "QUESTION", "SUB_DESCRIPTION", "SUB_NAME", "Mark", "Run", "key", "report", "task", "value"]
