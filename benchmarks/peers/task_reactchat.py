"""reactchat with its own ``ScriptedModel``.

``variant`` starts with the store: ``memory`` (``memory:``) or ``sqlite`` (a fresh SQLite
file in a temporary directory, every event appended durably), then optional flags:
``-inline`` declares the tool ``@tool(timeout=None)``, so reactchat calls it directly
instead of in a worker thread under a timeout (the ``@tool`` default); ``-native`` uses
the native tool-calling protocol (scripted ``ToolCallPart`` replies, like the LangGraph,
smolagents and PydanticAI rows) instead of text ReAct.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from task_common import ANSWER, QUESTION, Mark, Run, key, value

from reactchat import Agent, ScriptedModel, tool
from reactchat.messages import Reply, TextPart, ToolCallPart


def store_url(variant: str) -> str:
    if variant == "memory":
        return "memory:"
    if variant == "sqlite":
        folder = tempfile.mkdtemp(prefix="reactchat-bench-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return f"sqlite:///{Path(folder) / 'bench.db'}"
    raise ValueError(f"unknown reactchat variant {variant!r}")


def build(n: int, mark: Mark, variant: str = "memory") -> Run:
    store, *flags = variant.split("-")

    def lookup(key: str) -> str:
        """Return the value stored under key."""
        mark()
        return value(key)

    script: list[str | Reply]
    if "native" in flags:
        script = [
            Reply(parts=[ToolCallPart(id=f"call_{i}", name="lookup", input={"key": key(i)})], stop_reason="tool_use")
            for i in range(n)
        ]
        script.append(Reply(parts=[TextPart(text=ANSWER)], stop_reason="end"))
    else:
        script = [f'I look it up.\nAction: lookup\nAction Input: {{"key": "{key(i)}"}}' for i in range(n)]
        script.append(f"I know it.\nFinal Answer: {ANSWER}")
    model = ScriptedModel(script)
    lookup_tool = tool(timeout=None)(lookup) if "inline" in flags else tool(lookup)
    protocol = "native" if "native" in flags else "react"
    agent = Agent(model=model, tools=[lookup_tool], protocol=protocol, max_steps=n + 1, store=store_url(store))

    def run() -> str:
        # ScriptedModel answers request number len(.requests): clearing it restarts the
        # script for the next run (and keeps the recorded prompts from piling up).
        model.requests.clear()
        result = agent.run(QUESTION)
        if result.status != "done":
            raise RuntimeError(f"reactchat run ended with status {result.status!r}")
        return str(result.answer)

    return run
