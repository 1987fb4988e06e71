"""LangGraph ``create_react_agent`` with LangChain's ``GenericFakeChatModel``.

``variant="checkpoint"`` compiles the graph with an ``InMemorySaver`` and gives every
run its own thread. ``variant="create_agent"`` uses ``langchain.agents.create_agent``,
the LangGraph-based agent that LangChain 1.x recommends instead of both
``create_react_agent`` and ``AgentExecutor``.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from task_common import ANSWER, QUESTION, TOOL_DOC, Mark, Run, key, value


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` does not implement ``bind_tools``; its replies are scripted anyway."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


def build(n: int, mark: Mark, variant: str = "") -> Run:
    def lookup(key: str) -> str:
        mark()
        return value(key)

    lookup.__doc__ = TOOL_DOC
    script = [
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"key": key(i)}, "id": f"call_{i}"}])
        for i in range(n)
    ]
    script.append(AIMessage(content=ANSWER))
    # Every run consumes exactly n + 1 replies, so cycling the script restarts it per run.
    model = ScriptedChatModel(messages=itertools.cycle(script))
    checkpointer = InMemorySaver() if variant == "checkpoint" else None
    if variant == "create_agent":
        from langchain.agents import create_agent

        graph = create_agent(model, [tool(lookup)])
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of create_agent
            graph = create_react_agent(model, [tool(lookup)], checkpointer=checkpointer)
    runs = itertools.count()

    def run() -> str:
        config: dict[str, Any] = {"recursion_limit": 2 * n + 10}
        if checkpointer is not None:
            config["configurable"] = {"thread_id": f"t{next(runs)}"}
        state = graph.invoke({"messages": [("user", QUESTION)]}, config=config)
        return str(state["messages"][-1].content)

    return run
