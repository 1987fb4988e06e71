"""reactchat with its own ``ScriptedModel`` on the text ReAct protocol.

``variant`` is the store: ``memory`` (``memory:``) or ``sqlite`` (a fresh SQLite file in
a temporary directory, every event appended durably), optionally followed by
``-inline``: the tool is declared ``@tool(timeout=None)``, so reactchat calls it
directly instead of in a worker thread under a timeout (the ``@tool`` default).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from task_common import ANSWER, QUESTION, Mark, Run, key, value

from reactchat import Agent, ScriptedModel, tool


def store_url(variant: str) -> str:
    if variant == "memory":
        return "memory:"
    if variant == "sqlite":
        folder = tempfile.mkdtemp(prefix="reactchat-bench-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return f"sqlite:///{Path(folder) / 'bench.db'}"
    raise ValueError(f"unknown reactchat variant {variant!r}")


def build(n: int, mark: Mark, variant: str = "memory") -> Run:
    store, _, inline = variant.partition("-")

    def lookup(key: str) -> str:
        """Return the value stored under key."""
        mark()
        return value(key)

    script = [f'I look it up.\nAction: lookup\nAction Input: {{"key": "{key(i)}"}}' for i in range(n)]
    script.append(f"I know it.\nFinal Answer: {ANSWER}")
    model = ScriptedModel(script)
    lookup_tool = tool(timeout=None)(lookup) if inline else tool(lookup)
    agent = Agent(model=model, tools=[lookup_tool], protocol="react", max_steps=n + 1, store=store_url(store))

    def run() -> str:
        # ScriptedModel answers request number len(.requests): clearing it restarts the
        # script for the next run (and keeps the recorded prompts from piling up).
        model.requests.clear()
        result = agent.run(QUESTION)
        if result.status != "done":
            raise RuntimeError(f"reactchat run ended with status {result.status!r}")
        return str(result.answer)

    return run
