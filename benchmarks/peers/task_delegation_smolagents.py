"""smolagents ``managed_agents``: a ``ToolCallingAgent`` manager calling a named
``ToolCallingAgent`` sub-agent, both on scripted models."""

from __future__ import annotations

from smolagents import LogLevel, ToolCallingAgent, tool
from task_delegation_common import ANSWER, QUESTION, SUB_DESCRIPTION, SUB_NAME, Mark, Run, key, report, task, value
from task_smolagents import ScriptedModel, _call


def build(n: int, mark: Mark, variant: str = "") -> Run:
    @tool
    def lookup(key: str) -> str:
        """Return the value stored under key.

        Args:
            key: the key to look up.
        """
        mark()
        return value(key)

    inner_script = []
    for i in range(n):
        inner_script.append(_call(2 * i, "lookup", {"key": key(i)}))
        inner_script.append(_call(2 * i + 1, "final_answer", {"answer": report(i)}))
    outer_script = [_call(i, SUB_NAME, {"task": task(i)}) for i in range(n)]
    outer_script.append(_call(n, "final_answer", {"answer": ANSWER}))
    sub = ToolCallingAgent(
        tools=[lookup],
        model=ScriptedModel(inner_script),
        max_steps=3,
        name=SUB_NAME,
        description=SUB_DESCRIPTION,
        verbosity_level=LogLevel.OFF,
    )
    manager = ToolCallingAgent(
        tools=[], model=ScriptedModel(outer_script), managed_agents=[sub], max_steps=n + 1, verbosity_level=LogLevel.OFF
    )

    def run() -> str:
        return str(manager.run(QUESTION))

    return run
