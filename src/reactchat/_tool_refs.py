"""The tools a command or a server is configured with, beyond the built-in calculator.

``--tools mypkg.tools:search,mypkg.tools:lookup`` (or ``REACTCHAT_TOOLS``) names tools by
reference: each ``module:name`` is a ``Tool``, a function, a LangChain tool, an
``MCPServer``, an ``Agent`` (a sub-agent) or a list of these (a toolkit). ``--mcp FILE``
(or ``REACTCHAT_MCP``) adds the servers of an ``mcpServers`` file. ``web_search`` is added when ``REACTCHAT_SEARCH``
names a backend, and ``fetch_url`` when the ``web`` extra is installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import TYPE_CHECKING, Any

from reactchat.errors import ConfigError
from reactchat.tools import Tool, Toolset

if TYPE_CHECKING:
    from reactchat.agent import Agent

#: the environment variable for ``--tools``
ENV_TOOLS = "REACTCHAT_TOOLS"


class ToolReferenceError(ConfigError):
    """A ``module:name`` reference that does not name a tool; the message says why."""


def tools_by_reference(spec: str) -> list[Any]:
    """The tools named by ``module:name[,module:name...]``."""
    from reactchat.agent import Agent

    found: list[Any] = []
    for reference in (part.strip() for part in spec.split(",")):
        if not reference:
            continue
        module_name, _, attribute = reference.partition(":")
        if not module_name or not attribute:
            raise ToolReferenceError(f"{reference!r}: write a tool reference as module:name, e.g. mypkg.tools:search")
        try:
            value: Any = importlib.import_module(module_name)
        except ImportError as exc:
            raise ToolReferenceError(f"{reference!r}: cannot import {module_name} ({exc})") from None
        for part in attribute.split("."):
            if not hasattr(value, part):
                raise ToolReferenceError(f"{reference!r}: {module_name} has no {attribute}")
            value = getattr(value, part)
        items = list(value) if isinstance(value, list | tuple) else [value]
        for item in items:
            if not (isinstance(item, Tool | Toolset | Agent) or callable(item)):
                raise ToolReferenceError(
                    f"{reference!r} is a {type(item).__name__}, not a tool, a function or an agent"
                )
        found.extend(items)
    return found


def configured_tools(tools: str | None = None, mcp: str | None = None) -> list[Any]:
    """The tools of a command or server: ``tools`` (else ``REACTCHAT_TOOLS``), the MCP
    servers of ``mcp`` (else ``REACTCHAT_MCP``), ``web_search`` and ``fetch_url``.

    Raises ``ValueError`` subclasses naming what to fix (a bad reference, a bad
    mcpServers file, a search backend without its key or package).
    """
    from reactchat.mcp import load_servers
    from reactchat.toolbox import ENV_SEARCH, fetch_url, resolve_backend, web_search

    found = tools_by_reference(tools if tools is not None else os.environ.get(ENV_TOOLS, ""))
    found.extend(load_servers(mcp))
    if os.environ.get(ENV_SEARCH):
        resolve_backend()  # a missing key or package is reported now, not at the first search
        found.append(web_search)
    if importlib.util.find_spec("trafilatura") is not None and importlib.util.find_spec("httpx") is not None:
        found.append(fetch_url)
    return found


def read_links_if_fetching(agent: Agent) -> None:
    """Links in messages are read like ``fetch_url`` calls when the agent has ``fetch_url``."""
    from reactchat.toolbox import fetch_url, read_links_in_messages

    if fetch_url in agent.tools:
        read_links_in_messages(agent)


async def close_tools(tools: list[Any]) -> None:
    """Stop the MCP servers among ``tools``."""
    for item in tools:
        close = getattr(item, "aclose", None)
        if isinstance(item, Toolset) and close is not None:
            await close()
