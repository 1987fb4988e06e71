"""What may stand where a tool is expected: a ``Tool``, a plain function, or a LangChain tool."""

from __future__ import annotations

from typing import Any

from reactchat.tools._tool import Tool
from reactchat.tools.langchain import from_langchain, is_langchain_tool


def as_tool(obj: Any) -> Tool:
    """Accept a ``Tool``, a plain function or a LangChain tool where tools are expected
    (an ``Agent`` becomes a sub-agent in ``Agent.__init__``)."""
    if isinstance(obj, Tool):
        return obj
    if is_langchain_tool(obj):  # LangChain's Runnable.as_tool is another thing (a beta API)
        return from_langchain(obj)
    return Tool(obj)


__all__ = ["as_tool"]
