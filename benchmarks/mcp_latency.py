"""What MCP costs: the added latency of a tool call over stdio, server cleanup, import time.

    .venv/bin/python benchmarks/mcp_latency.py [--calls 1000] [--cycles 50] [--main /work/main/src]

1. The same function (the test server's ``ping``) called N times three ways, in one
   run: directly in this process; through reactchat's ``MCPServer.call`` to a stdio
   server written with the ``mcp`` SDK; and through the SDK's own ``Client.call_tool``
   on the same kind of server (what reactchat adds on top of the SDK). p50/p99 each.
2. ``--cycles`` open/call/close cycles of a stdio server, then the child processes left.
3. ``import reactchat`` (and building an ``Agent``) in fresh interpreters: the time, and
   whether the ``mcp`` SDK, trafilatura or httpx were loaded; with ``--main``, the same
   for another checkout's ``src`` side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "fixtures" / "mcp_server.py"
sys.path.insert(0, str(ROOT / "src"))


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2] * 1e6
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6
    return f"p50 {p50:9.1f} µs   p99 {p99:9.1f} µs   mean {statistics.fmean(ordered) * 1e6:9.1f} µs"


async def latency(calls: int) -> None:
    from mcp import Client, StdioServerParameters

    from reactchat.mcp import MCPServer

    def ping() -> str:
        return "pong"

    direct = []
    for _ in range(calls):
        started = time.perf_counter()
        ping()
        direct.append(time.perf_counter() - started)

    async with MCPServer(sys.executable, [str(SERVER), "stdio"], name="bench") as server:
        await server.call("ping", {})  # start it before timing
        ours = []
        for _ in range(calls):
            started = time.perf_counter()
            text, _ = await server.call("ping", {})
            ours.append(time.perf_counter() - started)
        assert text == "pong"

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER), "stdio"])
    async with Client(params) as client:
        await client.call_tool("ping", {})
        sdk = []
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool("ping", {})
            sdk.append(time.perf_counter() - started)

    print(f"tool call latency over {calls} calls")
    print(f"  direct function call        {percentiles(direct)}")
    print(f"  reactchat MCPServer (stdio) {percentiles(ours)}")
    print(f"  mcp SDK Client (stdio)      {percentiles(sdk)}")
    added = statistics.median(ours) - statistics.median(direct)
    print(f"  added by MCP over stdio (p50): {added * 1e3:.2f} ms; reactchat over the SDK (p50): "
          f"{(statistics.median(ours) - statistics.median(sdk)) * 1e6:+.0f} µs")  # fmt: skip


def children() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append(int(entry.name))
    return found


async def cycles(count: int) -> None:
    from reactchat.mcp import MCPServer

    before = set(children())
    started = time.perf_counter()
    for _ in range(count):
        server = MCPServer(sys.executable, [str(SERVER), "stdio"], name="cycle")
        assert await server.call("ping", {}) == ("pong", False)
        await server.aclose()
    left = set(children()) - before
    seconds = time.perf_counter() - started
    print(f"{count} open/call/close cycles of a stdio server: {seconds:.1f} s, child processes left: {len(left)}")


IMPORT_PROBE = """
import sys, time
started = time.perf_counter()
import reactchat
imported = time.perf_counter() - started
from reactchat import Agent, ScriptedModel
import reactchat.toolbox as toolbox
extra = [getattr(toolbox, name) for name in ("web_search", "fetch_url") if hasattr(toolbox, name)]
Agent(model=ScriptedModel([]), tools=extra)
heavy = [m for m in ("mcp", "trafilatura", "httpx", "ddgs", "tavily", "langchain_core") if m in sys.modules]
print(f"{imported * 1e3:.2f} {time.perf_counter() - started:.4f} {','.join(heavy) or '-'}")
"""


def import_times(label: str, src: Path, runs: int = 15) -> None:
    env = {**os.environ, "PYTHONPATH": str(src)}
    bare, agent, heavy = [], [], ""
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, env=env, check=True)
        first, second, heavy = out.stdout.split()
        bare.append(float(first))
        agent.append(float(second) * 1e3)
    print(
        f"  {label:<8} import reactchat: median {statistics.median(bare):6.2f} ms;"
        f" + an Agent (with web_search and fetch_url where they exist): {statistics.median(agent):6.1f} ms;"
        f" heavy modules loaded: {heavy}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--main", type=Path, help="another checkout's src/ (e.g. before this work) to compare with")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    asyncio.run(latency(args.calls))
    asyncio.run(cycles(args.cycles))
    print("import time in fresh interpreters (median of 15):")
    if args.main is not None:
        import_times("other", args.main)
    import_times("this", ROOT / "src")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
