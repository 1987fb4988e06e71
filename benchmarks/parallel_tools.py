"""Three tool calls of 0.3 s each in one model reply: how long the step takes with the calls run
at once (``parallel_tools=8``, the default) and one after the other (``parallel_tools=1``).

    python benchmarks/parallel_tools.py [--rounds 5] [--seconds 0.3]

Prints the wall time of the whole turn (two scripted model calls of no latency, the three
calls between them), the median of the rounds, for each setting side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from reactchat import Agent, ScriptedModel, tool
from reactchat.messages import Reply, TextPart, ToolCallPart


def make_agent(parallel: int, seconds: float, sync: bool) -> Agent:
    if sync:

        @tool(name="wait")
        def wait_sync(key: str) -> str:
            """Wait, then answer."""
            time.sleep(seconds)
            return key

        waiter = wait_sync
    else:

        @tool(name="wait")
        async def wait_async(key: str) -> str:
            """Wait, then answer."""
            await asyncio.sleep(seconds)
            return key

        waiter = wait_async
    reply = Reply(parts=[ToolCallPart(id=f"c{i}", name="wait", input={"key": k}) for i, k in enumerate("abc")])
    model = ScriptedModel([reply, Reply(parts=[TextPart(text="done")])])
    return Agent(model=model, tools=[waiter], protocol="native", parallel_tools=parallel)


async def one_turn(parallel: int, seconds: float, sync: bool) -> float:
    agent = make_agent(parallel, seconds, sync)
    started = time.perf_counter()
    result = await agent.arun("Wait for a, b and c.")
    assert result.status == "done"
    return time.perf_counter() - started


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=0.3)
    args = p.parse_args()
    print(f"three calls of {args.seconds} s in one reply, median of {args.rounds} rounds (wall seconds per turn)")
    for sync in (False, True):
        times: dict[int, list[float]] = {8: [], 1: []}
        for _ in range(args.rounds):
            for parallel in times:
                times[parallel].append(await one_turn(parallel, args.seconds, sync))
        kind = "sync tool (worker threads)" if sync else "async tool"
        row = ", ".join(f"parallel_tools={k}: {statistics.median(v):.3f} s" for k, v in times.items())
        print(f"{kind:28} {row}")


if __name__ == "__main__":
    asyncio.run(main())
