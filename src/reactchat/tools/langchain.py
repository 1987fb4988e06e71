"""LangChain tools as reactchat tools: a toolkit works unchanged.

    from reactchat import Agent
    agent = Agent(tools=toolkit.get_tools())      # StructuredTool, @tool, any BaseTool

``Agent`` recognises LangChain tools and adapts them with ``from_langchain``: the
name, the description and the argument schema the model sees are the tool's own
(``tool_call_schema``, which leaves out injected arguments); arguments are validated by
the tool's pydantic model (or its JSON schema) before the call; the call goes through
``ainvoke``, so a tool with a coroutine runs natively and a sync one runs where
LangChain puts it. ``langchain-core`` is needed only by the tools themselves
(``pip install 'reactchat[langchain]'``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from reactchat.tools._schema import SchemaTool, json_schema_check
from reactchat.tools._tool import Tool, ToolInputError, validation_problems


def is_langchain_tool(obj: Any) -> bool:
    """Whether ``obj`` looks like a LangChain ``BaseTool`` (checked without importing LangChain)."""
    return (
        type(obj).__module__.startswith("langchain")
        and hasattr(obj, "ainvoke")
        and hasattr(obj, "tool_call_schema")
        and isinstance(getattr(obj, "name", None), str)
    )


def from_langchain(lc_tool: Any, *, timeout: float | None = 30.0) -> Tool:
    """A reactchat ``Tool`` that calls the LangChain tool ``lc_tool`` with ``ainvoke``."""
    declared = lc_tool.tool_call_schema
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        schema = declared.model_json_schema()
        check = _pydantic_check(declared)
    else:
        schema = dict(declared or {"type": "object", "properties": {}})
        check = json_schema_check(schema)
    schema.pop("title", None)
    schema.pop("description", None)  # the tool's description says it already

    async def call(arguments: dict[str, Any]) -> Any:
        return await lc_tool.ainvoke(arguments)

    return SchemaTool(
        call,
        name=lc_tool.name,
        description=lc_tool.description or lc_tool.name,
        input_schema=schema,
        check=check,
        timeout=timeout,
        return_direct=bool(getattr(lc_tool, "return_direct", False)),
    )


def _pydantic_check(model: type[BaseModel]) -> Any:
    def check(arguments: Any) -> dict[str, Any]:
        try:
            model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolInputError(validation_problems(exc)) from None
        # the tool converts the arguments itself (ainvoke validates again): pass them as written
        return dict(arguments)

    return check
