"""What a compressed bomb costs the process that fetches it: peak RSS growth of a fresh
Python process running ``reactchat.toolbox.fetch`` on each bomb a local site serves.

    .venv/bin/python benchmarks/fetch_bombs.py [--mb 256]

Each bomb unpacks to ``--mb`` MB of zeros: gzip, deflate (zlib-wrapped), zstd (which
reactchat does not offer), ``gzip, gzip`` (two layers: a few KB on the wire), and a
``gzip, gzip`` body on a 302 redirect (a redirect's body is never the page). The fetch
runs in a child process, which reads its peak RSS (``VmHWM``) after a small warm-up fetch
and again after the bomb; the table shows the growth and how the fetch ended.
The same bombs come from MCP servers over HTTP too (``mcp_bomb_site``: each answers
honestly but for one answer, the initialize or a tool call); the probe lists the
server's tools and calls one. ``tests/test_bombs.py`` serves the same bombs and asserts
the growth stays under 50 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: (headers, body) of each route of the bomb site
Routes = dict[str, tuple[dict[str, str], bytes]]

_BLOCK = bytes(2**20)


def _squeeze(compressor: Any, mb: int) -> bytes:
    """``mb`` MB of zeros through ``compressor`` (fed a block at a time: the zeros are never whole)."""
    parts = [compressor.compress(_BLOCK) for _ in range(mb)]
    return b"".join([*parts, compressor.flush()])


def gzip_bomb(mb: int) -> bytes:
    """A gzip body that unpacks to ``mb`` MB of zeros."""
    return _squeeze(zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS), mb)


def deflate_bomb(mb: int) -> bytes:
    """An HTTP ``deflate`` (zlib-wrapped) body that unpacks to ``mb`` MB of zeros."""
    return _squeeze(zlib.compressobj(9), mb)


def zstd_bomb(mb: int) -> bytes:
    """A zstd body that unpacks to ``mb`` MB of zeros."""
    import zstandard

    return _squeeze(zstandard.ZstdCompressor(level=19).compressobj(), mb)


def bomb_routes(mb: int) -> Routes:
    """The bomb site's routes, each a bomb of ``mb`` MB, and ``/small``, a page."""
    text = {"content-type": "text/plain"}
    double = gzip.compress(gzip_bomb(mb), 9)
    return {
        "/small": (text, b"A small page about roses.\n"),
        "/gzip": ({**text, "content-encoding": "gzip"}, gzip_bomb(mb)),
        "/deflate": ({**text, "content-encoding": "deflate"}, deflate_bomb(mb)),
        "/zstd": ({**text, "content-encoding": "zstd"}, zstd_bomb(mb)),
        "/gzip-gzip": ({**text, "content-encoding": "gzip, gzip"}, double),
        "/redirect-gzip-gzip": ({**text, "content-encoding": "gzip, gzip", "location": "/small"}, double),
    }


@contextmanager
def bomb_site(routes: Routes) -> Iterator[str]:
    """A local web site on 127.0.0.1 serving ``routes``; its base URL."""

    class Handler(_Quiet):
        def do_GET(self) -> None:
            headers, body = routes.get(self.path, ({"content-type": "text/plain"}, b"no such page"))
            self.send_response(302 if "location" in headers else 200 if self.path in routes else 404)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up on a refused body, as it should
                self.wfile.write(body)

    with _serving(Handler) as base:
        yield base


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` serving on 127.0.0.1 in a thread; the base URL."""

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass

    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


#: the peak RSS (VmHWM) of the probe's process, in MB
_PEAK = r"""
def peak_mb():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024
"""

PROBE = r"""
import asyncio, json, sys
from reactchat.toolbox import FetchPolicy, FetchRefused, fetch
"""
PROBE += _PEAK
PROBE += r"""
async def main(base, url):
    policy = FetchPolicy(allow=["127.0.0.1"])
    await fetch(base + "/small", policy)  # httpx and its lazy imports loaded before the baseline
    before = peak_mb()
    try:
        page = await fetch(url, policy)
        outcome = f"read {len(page.data)} bytes"
    except FetchRefused as exc:
        outcome = f"refused: {exc}"
    print(json.dumps({"grew_mb": peak_mb() - before, "outcome": outcome}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def measure(base: str, route: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Fetch ``base + route`` in a fresh process: ``{"grew_mb": peak RSS growth, "outcome": ...}``."""
    return _probe(PROBE, [base, base + route], env)


def _probe(code: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a probe in a fresh process: what it printed last (JSON), and ``log``, its stderr."""
    command = [sys.executable, "-c", code, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    if done.returncode != 0:
        return {"grew_mb": float("nan"), "outcome": f"the process failed ({done.returncode}): {done.stderr[-300:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["log"] = done.stderr
    return result


BOMBS = ["/gzip", "/deflate", "/zstd", "/gzip-gzip", "/redirect-gzip-gzip"]


# ------------------------------------------------------------------ an MCP server over HTTP

#: how each route of the MCP bomb site packs its answers: (Content-Encoding, which answer is the bomb)
MCP_ROUTES = {
    "/honest/mcp": ("gzip", None),
    "/gzip/mcp": ("gzip", "initialize"),
    "/deflate/mcp": ("deflate", "initialize"),
    "/zstd/mcp": ("zstd", "initialize"),
    "/gzip-gzip/mcp": ("gzip, gzip", "initialize"),
    "/events-gzip/mcp": ("gzip", "initialize"),  # the answer as one event of a stream
    "/call-gzip/mcp": ("gzip", "tools/call"),
}
MCP_BOMBS = [route for route, (_, bomb) in MCP_ROUTES.items() if bomb]


def _mcp_answer(request: dict[str, Any]) -> dict[str, Any]:
    """An honest MCP server's answer to a JSON-RPC request: one tool, ``echo``."""
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bombs", "version": "1"},
        }
    elif method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        result = {"tools": [{"name": "echo", "description": "Echo the text.", "inputSchema": schema}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": params.get("arguments", {}).get("text", "")}]}
    else:
        result = {}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


@contextmanager
def mcp_bomb_site(mb: int) -> Iterator[str]:
    """MCP servers over streamable HTTP on 127.0.0.1, one per route of ``MCP_ROUTES``: each
    answers honestly, compressed as its route says, but for one answer, which is a bomb of
    ``mb`` MB. Yields the base URL."""
    bombs = {
        "gzip": gzip_bomb(mb),
        "deflate": deflate_bomb(mb),
        "zstd": zstd_bomb(mb),
        "gzip, gzip": gzip.compress(gzip_bomb(mb), 9),
    }

    class Handler(_Quiet):
        def do_POST(self) -> None:
            coding, bomb = MCP_ROUTES.get(self.path, ("", None))
            request = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            if "id" not in request:  # a notification
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            events = self.path.startswith("/events")
            text = json.dumps(_mcp_answer(request)).encode()
            if events:
                text = b"event: message\ndata: " + text + b"\n\n"
            body = bombs[coding] if request["method"] == bomb else _pack(coding, text)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if events else "application/json")
            self.send_header("content-encoding", coding)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up on a refused body, as it should
                self.wfile.write(body)

        def do_GET(self) -> None:  # no stream of the server's own
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        do_DELETE = do_GET

    with _serving(Handler) as base:
        yield base


def _pack(coding: str, text: bytes) -> bytes:
    if coding == "gzip":
        return gzip.compress(text)
    if coding == "deflate":
        return zlib.compress(text)
    return text  # a coding the client refuses before reading the body


MCP_PROBE = r"""
import asyncio, json, logging, sys
from reactchat.mcp import MCPServer
"""
MCP_PROBE += _PEAK
MCP_PROBE += r"""
async def main(base, route):
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    async with MCPServer(url=base + "/honest/mcp", name="honest") as honest:  # the client loaded first
        assert await honest.call("echo", {"text": "warm"}) == ("warm", False)
    before = peak_mb()
    async with MCPServer(url=base + route, name="bombs", connect_timeout=60) as server:
        tools = await server.list_tools()
        outcome = f"{len(tools)} tools listed"
        if tools:
            text, is_error = await server.call("echo", {"text": "hello"})
            outcome += f"; the call: {'error: ' if is_error else ''}{text}"
    print(json.dumps({"grew_mb": peak_mb() - before, "outcome": outcome}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def measure_mcp(base: str, route: str) -> dict[str, Any]:
    """List the tools of the MCP server at ``base + route`` (and call one) in a fresh
    process: ``{"grew_mb": peak RSS growth, "outcome": ..., "log": its warnings}``."""
    return _probe(MCP_PROBE, [base, route])


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=256, help="MB each bomb unpacks to")
    args = parser.parse_args(argv)
    routes = bomb_routes(args.mb)
    out(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out("| bomb | bytes on the wire | unpacks to MB | peak RSS growth MB | outcome |")
    out("|---|---:|---:|---:|---|")
    with bomb_site(routes) as base:
        for route in BOMBS:
            row = measure(base, route)
            wire = len(routes[route][1])
            out(f"| {route[1:]} | {wire:,} | {args.mb} | {row['grew_mb']:.1f} | {row['outcome'][:90]} |")
    out("")
    out("| MCP server over HTTP | coding | peak RSS growth MB | outcome |")
    out("|---|---|---:|---|")
    with mcp_bomb_site(args.mb) as base:
        for route in MCP_BOMBS:
            row = measure_mcp(base, route)
            out(f"| {route[1:-4]} | {MCP_ROUTES[route][0]} | {row['grew_mb']:.1f} | {row['outcome'][:90]} |")
    out(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
