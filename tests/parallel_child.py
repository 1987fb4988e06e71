"""A native-protocol agent whose one reply makes a parallel group of tool calls, run in a
subprocess for the kill tests.

    python tests/parallel_child.py URL SESSION MESSAGE --effects FILE --calls look,pay,put --hold pay,put

Prints ``ready`` once connected, then each event as a JSON line after the engine yielded
it (so after it was durable). The three tools differ only in their effect class: ``look``
is ``read``, ``put`` is ``idempotent``, ``pay`` is ``unsafe``. Each appends ``call_id tool
pid`` to the effects file as its side effect; a tool named in ``--hold`` then waits a
minute, so the parent can SIGKILL the process while it is in flight, after its effect.

The model is a function of the transcript: no tool result yet, it calls every tool of
``--calls`` in one reply; then it answers with the results in the order it sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from reactchat import Agent, RunContext, tool
from reactchat.messages import EVENTS, Reply, Request, TextPart, ToolCallPart, ToolResultMessage
from reactchat.store import Store, resolve_store
from reactchat.tools import Effect, Tool

#: each tool of the group and its effect class
EFFECTS: dict[str, Effect] = {"look": "read", "put": "idempotent", "pay": "unsafe"}


class GroupModel:
    """Calls every tool of ``calls`` at once, then answers with what they returned."""

    name = "group"
    supports_tools = True
    context_tokens = None

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def complete(self, request: Request) -> Reply:
        """The group of calls, or the answer once their results are in the transcript."""
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        if not results:
            parts = [ToolCallPart(id=f"c{i}", name=name, input={"key": name}) for i, name in enumerate(self.calls)]
            return Reply(parts=list(parts), stop_reason="tool_use")
        return Reply(parts=[TextPart(text="; ".join(f"{m.name}={m.content}" for m in results))])


def make_tool(name: str, effects: str, hold: bool) -> Tool:
    """The tool ``name`` of effect class ``EFFECTS[name]``; ``hold``: it waits after its effect."""

    async def effect(key: str, ctx: RunContext) -> str:
        with open(effects, "a", encoding="utf-8") as out:
            out.write(f"{ctx.call_id} {name} {os.getpid()}\n")
        if hold:
            await asyncio.sleep(60)  # in flight until the parent kills the process
        return f"{key} done"

    effect.__name__ = name
    effect.__doc__ = f"Do {name} (a {EFFECTS[name]} effect)."
    made: Tool = tool(effect=EFFECTS[name])(effect)
    return made


def make_agent(url: str | Store, calls: list[str], effects: str, hold: frozenset[str] = frozenset()) -> Agent:
    """The agent every process of a test builds the same way (``hold``: the tools that wait)."""
    tools = [make_tool(name, effects, name in hold) for name in EFFECTS]
    return Agent(model=GroupModel(calls), tools=tools, store=url, protocol="native")  # type: ignore[arg-type]


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("session")
    p.add_argument("message")
    p.add_argument("--effects", required=True)
    p.add_argument("--calls", default="look,pay,put")
    p.add_argument("--hold", default="")
    args = p.parse_args()
    store = resolve_store(args.url)
    agent = make_agent(store, args.calls.split(","), args.effects, frozenset(filter(None, args.hold.split(","))))
    await store.exists(args.session)  # connect (and migrate) before announcing readiness
    print("ready", flush=True)

    def show(event: object) -> None:
        print(EVENTS.dump_json(event).decode(), flush=True)  # type: ignore[arg-type]

    try:
        result = await agent.arun(args.message, args.session, on_event=show)
    finally:
        await store.close()
    print(f"status {result.status}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
