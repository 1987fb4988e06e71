"""LangGraph's agent-as-tool pattern: a ``create_react_agent`` sub-agent behind a tool of a
``create_react_agent`` parent (the pattern LangGraph's multi-agent guide calls tool-calling
supervision), with LangChain's ``GenericFakeChatModel`` for both."""

from __future__ import annotations

import itertools
import warnings
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from task_delegation_common import ANSWER, QUESTION, SUB_DESCRIPTION, Mark, Run, key, report, task, value
from task_langgraph import ScriptedChatModel


def build(n: int, mark: Mark, variant: str = "") -> Run:
    def lookup(key: str) -> str:
        """Return the value stored under key."""
        mark()
        return value(key)

    inner_script: list[AIMessage] = []
    for i in range(n):
        inner_script.append(AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"key": key(i)}, "id": "c"}]))
        inner_script.append(AIMessage(content=report(i)))
    outer_script = [
        AIMessage(content="", tool_calls=[{"name": "researcher", "args": {"task": task(i)}, "id": f"call_{i}"}])
        for i in range(n)
    ]
    outer_script.append(AIMessage(content=ANSWER))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of create_agent
        inner = create_react_agent(ScriptedChatModel(messages=itertools.cycle(inner_script)), [tool(lookup)])

        def researcher(task: str) -> str:
            state = inner.invoke({"messages": [("user", task)]}, config={"recursion_limit": 10})
            return str(state["messages"][-1].content)

        researcher.__doc__ = SUB_DESCRIPTION
        outer = create_react_agent(ScriptedChatModel(messages=itertools.cycle(outer_script)), [tool(researcher)])

    def run() -> str:
        config: dict[str, Any] = {"recursion_limit": 2 * n + 10}
        state = outer.invoke({"messages": [("user", QUESTION)]}, config=config)
        return str(state["messages"][-1].content)

    return run
