"""The ``mcpServers`` JSON file that MCP clients share.

    {"mcpServers": {
        "time":   {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "issues": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${ISSUES_TOKEN}"}}
    }}

``${VAR}`` in ``command``, ``args``, ``env``, ``url`` and ``headers`` is replaced by the
environment variable (an unset one is an error naming it); ``"disabled": true`` skips an
entry; ``timeout`` (seconds per call) is reactchat's own optional key.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from reactchat.errors import ConfigError
from reactchat.mcp._client import DEFAULT_TIMEOUT, MCPServer

#: the environment variable naming an mcpServers file for the CLI and the server
ENV = "REACTCHAT_MCP"

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MCPConfigError(ConfigError):
    """The mcpServers file cannot be used; the message names the entry and the fix."""


def _expand(value: Any, where: str) -> Any:
    if isinstance(value, str):

        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                raise MCPConfigError(f"{where} uses ${{{name}}}, which is not set in the environment")
            return os.environ[name]

        return _VAR.sub(variable, value)
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, where) for k, v in value.items()}
    return value


def servers_from_config(config: dict[str, Any], source: str = "the MCP configuration") -> list[MCPServer]:
    """``MCPServer``s from a parsed ``{"mcpServers": {...}}`` object."""
    entries = config.get("mcpServers") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise MCPConfigError(f'{source} has no "mcpServers" object: write {{"mcpServers": {{"name": {{...}}}}}}')
    servers = []
    for name, raw in entries.items():
        where = f"{source}: server {name!r}"
        if not isinstance(raw, dict):
            raise MCPConfigError(f"{where} must be an object with a command or a url")
        if raw.get("disabled"):
            continue
        entry = _expand(raw, where)
        kind = entry.get("type") or entry.get("transport")
        if kind in ("sse",):
            raise MCPConfigError(f"{where}: the SSE transport is not supported; use the server's streamable HTTP url")
        timeout = entry.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(timeout, int | float) or timeout <= 0:
            raise MCPConfigError(f"{where}: timeout must be a positive number of seconds")
        try:
            if "url" in entry:
                servers.append(
                    MCPServer(url=str(entry["url"]), headers=entry.get("headers"), name=name, timeout=float(timeout))
                )
            elif "command" in entry:
                args = entry.get("args") or []
                if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                    raise MCPConfigError(f"{where}: args must be a list of strings")
                servers.append(
                    MCPServer(
                        str(entry["command"]),
                        args,
                        env=entry.get("env"),
                        cwd=entry.get("cwd"),
                        name=name,
                        timeout=float(timeout),
                    )
                )
            else:
                raise MCPConfigError(f'{where} needs "command" (a stdio server) or "url" (a streamable HTTP server)')
        except (TypeError, ValueError) as exc:
            if isinstance(exc, MCPConfigError):
                raise
            raise MCPConfigError(f"{where}: {exc}") from None
    return servers


def load_servers(path: str | os.PathLike[str] | None = None) -> list[MCPServer]:
    """``MCPServer``s from an mcpServers file (``REACTCHAT_MCP`` when ``path`` is None;
    no servers when neither is set)."""
    path = path if path is not None else os.environ.get(ENV) or None
    if path is None:
        return []
    file = Path(path).expanduser()
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MCPConfigError(f"cannot read the MCP configuration {file}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MCPConfigError(f"{file} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return servers_from_config(config, str(file))
