"""The tools of an MCP server as reactchat ``Tool``s."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from reactchat.tools import Tool
from reactchat.tools._schema import SchemaTool, json_schema_check

if TYPE_CHECKING:
    from reactchat.mcp._client import MCPServer

log = logging.getLogger("reactchat.mcp")


class MCPToolError(Exception):
    """The MCP tool reported an error (its text is the observation)."""


def listed_tools(server: MCPServer, listing: list[Any]) -> list[Tool]:
    """``Tool``s for the tools an MCP server listed; one whose input schema is not valid
    JSON Schema is left out with a warning in the log, and the others still work."""
    from jsonschema import SchemaError

    tools: list[Tool] = []
    for spec in listing:
        schema = dict(spec.input_schema or {"type": "object"})
        try:
            check = json_schema_check(schema)
        except SchemaError as exc:
            log.warning(
                "MCP server %s: tool %r is left out, its input schema is invalid (%s at %s)",
                server.name,
                spec.name,
                exc.message,
                "/".join(str(p) for p in exc.absolute_path) or "the root",
            )
            continue
        tools.append(_tool(server, spec.name, spec.description or spec.title or spec.name, schema, check))
    return tools


def _tool(server: MCPServer, name: str, description: str, schema: dict[str, Any], check: Any) -> SchemaTool:
    async def call(arguments: dict[str, Any]) -> str:
        text, is_error = await server.call(name, arguments)
        if is_error:
            raise MCPToolError(text)
        return text

    schema.pop("title", None)
    # MCPServer.call applies the server's timeout and restarts a hung server itself
    return SchemaTool(call, name=name, description=description, input_schema=schema, check=check, timeout=None)
