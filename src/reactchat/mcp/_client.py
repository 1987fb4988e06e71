"""``MCPServer``: the tools of an MCP server, called by the agent like its own.

One task owns each connection: it enters the SDK's ``Client`` context, waits until the
connection is closed or found broken, and leaves the context itself, so the SDK's
cancel scopes are entered and exited by the same task and the server process is always
reaped. Calls run in the caller's task on the open session.

A call that fails for the connection's sake (the server crashed, hung past the timeout,
or the transport broke) becomes an error observation and the connection is dropped; the
next call starts the server again. An HTTP session that the server no longer knows is
re-initialised once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from reactchat.errors import ReactchatError
from reactchat.mcp._tools import listed_tools
from reactchat.tools import Tool

if TYPE_CHECKING:
    from reactchat.mcp._http import BoundedTransport

log = logging.getLogger("reactchat.mcp")

DEFAULT_TIMEOUT = 30.0
#: seconds to start a server
DEFAULT_CONNECT_TIMEOUT = 60.0
#: seconds to list a started server's tools, every page together
DEFAULT_LIST_TIMEOUT = 30.0
#: pages of ``tools/list`` read from one server: a server that always has another page is cut off there
MAX_PAGES = 50
#: tools taken from one server (the first ones listed); a model cannot choose among more
MAX_TOOLS = 500


class MCPUnavailable(ReactchatError, RuntimeError):
    """An MCP server could not be started or reached; the message names it and why."""


def _sdk() -> Any:
    try:
        import mcp
    except ImportError:
        raise ImportError("MCP servers need the mcp package: pip install 'reactchat[mcp]'") from None
    return mcp


class _Connection:
    """One live session with a server, opened and closed by its own task."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.client: Any = None
        self.ready: asyncio.Future[None] = self.loop.create_future()
        self.closing = asyncio.Event()
        self.task = self.loop.create_task(self._own(), name=f"mcp server {server.name}")

    async def _own(self) -> None:
        mcp = _sdk()
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = await self.server._transport(stack)
                self.client = await stack.enter_async_context(mcp.Client(transport, mode=self.server.mode))
                self.ready.set_result(None)
                await self.closing.wait()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            if not isinstance(exc, Exception):
                raise
            log.debug("MCP server %s: connection ended with %r", self.server.name, exc)
        finally:
            self.client = None

    async def open(self, timeout: float) -> Any:
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self.ready)
        except TimeoutError:
            await self.close()
            raise MCPUnavailable(f"MCP server {self.server.name} did not start within {timeout:g} s") from None
        except Exception as exc:
            await self.close()
            raise MCPUnavailable(f"MCP server {self.server.name} could not be started: {_describe(exc)}") from exc
        return self.client

    async def close(self) -> None:
        self.closing.set()
        if asyncio.get_running_loop() is self.loop and not self.task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        # an exception the task ended with was logged by it; retrieve it so that asyncio does not
        with contextlib.suppress(BaseException):
            self.task.exception()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class MCPServer:
    """An MCP server whose tools the agent can call: ``Agent(tools=[MCPServer(...)])``.

    Either ``command`` (with ``args``, ``env``, ``cwd``: a stdio server the agent starts)
    or ``url`` (with ``headers``: a streamable HTTP server). ``name`` is the server's key
    in an ``mcpServers`` file; a tool whose name another tool already has is offered as
    ``name__tool``. ``timeout`` bounds each call, ``connect_timeout`` the start and
    ``list_timeout`` the listing of the tools (see ``list_tools``); ``errlog`` receives a stdio server's
    standard error (default: this process's); ``mode`` is the SDK's protocol negotiation
    (``auto``, or ``legacy`` for the initialize handshake of pre-2026 servers). Nothing
    starts until the first turn.
    """

    def __init__(
        self,
        command: str | None = None,
        args: Sequence[str] = (),
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        list_timeout: float = DEFAULT_LIST_TIMEOUT,
        errlog: TextIO | None = None,
        mode: str = "auto",
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("an MCP server needs either a command (stdio) or a url (streamable HTTP)")
        self.command = command
        self.args = list(args)
        self.url = url
        self.env = dict(env) if env else None
        self.cwd = cwd
        self.headers = dict(headers) if headers else None
        self.name = name or (url if url is not None else command) or "mcp"
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.list_timeout = list_timeout
        self.errlog = errlog
        self.mode = mode
        #: the HTTP transport of the open connection (over HTTP): it knows why it refused a response
        self._http: BoundedTransport | None = None
        self._connection: _Connection | None = None
        self._tools: list[Tool] | None = None
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r})"

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        mcp = _sdk()
        if self.url is not None:
            # the mcp extra is optional: its HTTP client is imported for a server over HTTP only
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            from reactchat.mcp._http import BoundedTransport

            self._http = BoundedTransport(self.url)
            client = httpx2.AsyncClient(
                headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0), transport=self._http
            )
            http = await stack.enter_async_context(client)
            return streamable_http_client(self.url, http_client=http)
        assert self.command is not None
        params = mcp.StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=self.cwd)
        return mcp.stdio_client(params, errlog=self.errlog or sys.stderr)

    def _lock_for_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._connection is not None and self._connection.loop is not loop:
            # a connection of another event loop (asyncio.run per call): that loop's end
            # cancelled its owner task, which stopped the server (Agent.run, which keeps
            # its loop, cancels what a call leaves behind the same way)
            self._connection, self._lock = None, None
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _client(self) -> Any:
        async with self._lock_for_loop():
            if self._connection is None or self._connection.task.done():
                self._connection = _Connection(self)
            return await self._connection.open(self.connect_timeout)

    async def _drop(self, connection: _Connection | None) -> None:
        """Close a connection found broken (the next call opens a new one)."""
        if connection is not None and self._connection is connection:
            self._connection = None
        if connection is not None:
            await connection.close()

    async def list_tools(self) -> list[Tool]:
        """The server's tools (listed once; the server is started if needed). A server that
        cannot start, or does not list its tools within ``list_timeout``, offers none this
        time, with a warning in the log; a listing is cut at ``MAX_PAGES`` pages and
        ``MAX_TOOLS`` tools, and a tool that cannot be used is left out (``listed_tools``)."""
        if self._tools is None:
            try:
                listing = await self._listing(await self._client())
            except MCPUnavailable as exc:
                # the other tools still work; the next turn tries this server again
                log.warning("%s; its tools are left out of this turn", exc)
                return []
            self._tools = listed_tools(self, listing)
        return self._tools

    async def _listing(self, client: Any) -> list[Any]:
        """The tools the server lists, within ``list_timeout`` seconds, ``MAX_PAGES`` and ``MAX_TOOLS``."""
        listing: list[Any] = []
        cursor = None
        connection = self._connection
        try:
            async with asyncio.timeout(self.list_timeout):
                for _ in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    listing.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None or len(listing) > MAX_TOOLS:
                        break
        except TimeoutError:
            await self._drop(connection)  # a server that hangs on a listing is in no state to call
            raise MCPUnavailable(
                f"MCP server {self.name} did not list its tools within {self.list_timeout:g} s"
            ) from None
        except Exception as exc:  # whatever the SDK makes of a listing it cannot read
            await self._drop(connection)
            raise MCPUnavailable(f"MCP server {self.name} could not list its tools: {_describe(exc)}") from exc
        if cursor is not None and len(listing) <= MAX_TOOLS:
            log.warning("MCP server %s: its tool listing was cut after %d pages", self.name, MAX_PAGES)
        if len(listing) > MAX_TOOLS:
            log.warning(
                "MCP server %s lists more than %d tools; the first %d are offered", self.name, MAX_TOOLS, MAX_TOOLS
            )
        return listing[:MAX_TOOLS]

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Call ``tool``: ``(observation text, is_error)``; never raises for the server's sake."""
        text, is_error, _ = await self.called(tool, arguments)
        return text, is_error

    async def called(self, tool: str, arguments: dict[str, Any]) -> tuple[str, bool, list[Any]]:
        """Call ``tool``: the observation text, whether it is an error, and the result's image
        content blocks (``ImageContent``: base64 data and a MIME type); never raises."""
        mcp = _sdk()
        for attempt in (1, 2):
            try:
                client = await self._client()
            except MCPUnavailable as exc:
                return str(exc), True, []
            connection = self._connection
            try:
                async with asyncio.timeout(self.timeout + 5):  # the SDK's own timeout first
                    result = await client.call_tool(tool, arguments, read_timeout_seconds=self.timeout)
            except mcp.MCPError as exc:
                # the mcp extra, loaded by now (_sdk above)
                from mcp_types import CONNECTION_CLOSED, INVALID_REQUEST, REQUEST_TIMEOUT

                code = exc.error.code
                # the SDK turns an HTTP 404 on a known session id into INVALID_REQUEST "Session terminated"
                if code == INVALID_REQUEST and self.url is not None and attempt == 1:
                    log.info("MCP server %s: the session expired; initialising a new one", self.name)
                    await self._drop(connection)
                    continue
                if code == REQUEST_TIMEOUT:
                    await self._drop(connection)
                    return self._hung(tool), True, []
                if code == CONNECTION_CLOSED:
                    refusal = self._http.refusal if self._http is not None else None
                    await self._drop(connection)
                    if refusal is not None:  # the server sent what is not read; the SDK only saw the stream end
                        return f"{refusal}; the call's result is not read", True, []
                    stopped = f"the MCP server {self.name} stopped during the call; it will be started again"
                    return f"{stopped} on the next call", True, []
                return f"the MCP server {self.name} refused the call: {exc.error.message}", True, []
            except TimeoutError:
                await self._drop(connection)
                return self._hung(tool), True, []
            except Exception as exc:  # a transport failure: start afresh on the next call
                await self._drop(connection)
                return f"the MCP server {self.name} failed during the call ({_describe(exc)})", True, []
            images = [block for block in result.content if getattr(block, "type", "") == "image"]
            return render_result(result), bool(result.is_error), images
        return f"the MCP server {self.name} lost its session twice", True, []

    def _hung(self, tool: str) -> str:
        return (
            f"{tool} did not return within {self.timeout:g} s; the MCP server {self.name} is restarted for the "
            "next call. Try a smaller request or another tool."
        )

    async def aclose(self) -> None:
        """Stop the server (a stdio process) or end the HTTP session."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def __aenter__(self) -> MCPServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def render_result(result: Any) -> str:
    """A ``CallToolResult`` as observation text: the structured content as JSON when
    there is some, else the text parts (other content named by its type)."""
    structured = result.structured_content
    if structured is not None and not result.is_error:
        if isinstance(structured, dict) and list(structured) == ["result"]:
            # the SDKs wrap a plain return value as {"result": value}
            structured = structured["result"]
        return structured if isinstance(structured, str) else json.dumps(structured, ensure_ascii=False)
    parts = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind} content: {getattr(block, 'mime_type', '') or 'binary'}]")
    return "\n".join(parts) if parts else "(no content)"
