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
import sys
from typing import Any

from reactchat.errors import ConfigError
from reactchat.tools import Tool, Toolset
from reactchat.tools.langchain import is_langchain_tool

#: the environment variable for ``--tools``
ENV_TOOLS = "REACTCHAT_TOOLS"


class ToolReferenceError(ConfigError):
    """A ``module:name`` reference that does not name a tool; the message says why."""


def tools_by_reference(spec: str) -> list[Any]:
    """The tools named by ``module:name[,module:name...]``."""
    # imported when a reference names it: the command starts without the rest
    from reactchat.agent import Agent

    found: list[Any] = []
    for reference in (part.strip() for part in spec.split(",")):
        if not reference:
            continue
        items = _referenced(reference)
        for item in items:
            # a LangChain BaseTool is not callable in langchain-core 1.x: recognise it by shape
            if not (isinstance(item, Tool | Toolset | Agent) or callable(item) or is_langchain_tool(item)):
                raise ToolReferenceError(
                    f"{reference!r} is a {type(item).__name__}, not a tool, a function, a LangChain tool or an agent"
                )
        found.extend(items)
    return found


def _referenced(reference: str) -> list[Any]:
    """What ``module:name`` names, as a list (a toolkit's list or tuple is spread)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ToolReferenceError(f"{reference!r}: write a tool reference as module:name, e.g. mypkg.tools:search")
    # the ``reactchat`` script does not put the current directory on the path as
    # ``python -m`` does: a user's ./mytools.py is what ``--tools mytools:search`` means
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolReferenceError(f"{reference!r}: cannot import {module_name} ({exc})") from None
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ToolReferenceError(f"{reference!r}: {module_name} has no {attribute}")
        value = getattr(value, part)
    return list(value) if isinstance(value, list | tuple) else [value]


def configured_tools(tools: str | None = None, mcp: str | None = None) -> list[Any]:
    """The tools of a command or server: ``tools`` (else ``REACTCHAT_TOOLS``), the MCP
    servers of ``mcp`` (else ``REACTCHAT_MCP``), ``web_search`` and ``fetch_url``.

    Raises ``ValueError`` subclasses naming what to fix (a bad reference, a bad
    mcpServers file, a search backend without its key or package).
    """
    # imported when a reference names it: the command starts without the rest
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


def offered_tools(model: object, tools: list[Any]) -> tuple[list[Any], bool]:
    """The tools of ``reactchat ask``, ``chat`` and ``serve`` as offered to ``model``, and
    whether links in the user's messages are read (``fetch_url`` is among ``tools``).

    The embedded models (``local``, ``local:gemma-270m``, ``local:smollm2-135m``; a spec,
    not a ``Model`` object) are not
    offered the ``fetch_url`` that ``configured_tools`` adds for the ``web`` extra (the
    last one): they guess addresses for questions that need none (docs/local-model.md).
    Their links are still read, and naming the tool (``--tools
    reactchat.toolbox:fetch_url``) offers it anyway.
    """
    # imported when a reference names it: the command starts without the rest
    from reactchat.models._embedded import EMBEDDED
    from reactchat.toolbox import fetch_url

    found = list(tools)
    fetching = fetch_url in found
    kind, _, name = model.partition(":") if isinstance(model, str) else ("", "", "")
    if fetching and kind == "local" and (not name or name in EMBEDDED):
        del found[len(found) - 1 - found[::-1].index(fetch_url)]
    return found, fetching


async def close_tools(tools: list[Any]) -> None:
    """Stop the MCP servers among ``tools``."""
    for item in tools:
        close = getattr(item, "aclose", None)
        if isinstance(item, Toolset) and close is not None:
            await close()
