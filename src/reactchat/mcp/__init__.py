"""MCP: use the tools of MCP servers, and serve an agent as an MCP tool.

    from reactchat import Agent
    from reactchat.mcp import MCPServer, load_servers

    agent = Agent(tools=[MCPServer("uvx", ["mcp-server-time"], name="time")])
    agent = Agent(tools=load_servers("mcp.json"))    # the {"mcpServers": {...}} format

The ``mcp`` SDK (``pip install 'reactchat[mcp]'``) is imported when a server starts,
not when this module is.
"""

from reactchat.mcp._client import MCPServer, MCPUnavailable, render_result
from reactchat.mcp._config import MCPConfigError, load_servers, servers_from_config
from reactchat.mcp._tools import MCPToolError

__all__ = [
    "MCPConfigError",
    "MCPServer",
    "MCPToolError",
    "MCPUnavailable",
    "load_servers",
    "render_result",
    "servers_from_config",
]
