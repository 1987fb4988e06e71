"""Tools: plain functions with a schema from their signature (``@tool``), what a call is told
(``RunContext``), sources of tools listed at each turn (``Toolset``), tools from a JSON schema
and LangChain's tools. The built-in tools are in ``reactchat.toolbox``."""

from reactchat.tools._adapt import as_tool
from reactchat.tools._tool import (
    EFFECTS,
    Approval,
    Effect,
    PauseForUser,
    RunContext,
    Tool,
    ToolInputError,
    Toolset,
    ToolTimeout,
    observation_text,
    tool,
    toolset_tools,
    validation_problems,
)

__all__ = [
    "EFFECTS",
    "Approval",
    "Effect",
    "PauseForUser",
    "RunContext",
    "Tool",
    "ToolInputError",
    "ToolTimeout",
    "Toolset",
    "as_tool",
    "observation_text",
    "tool",
    "toolset_tools",
    "validation_problems",
]
