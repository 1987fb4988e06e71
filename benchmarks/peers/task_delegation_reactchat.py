"""reactchat sub-agents: an ``Agent`` in the parent's ``tools=``, both on ``ScriptedModel``.

``variant`` is the store, as in ``task_reactchat`` (``memory`` or ``sqlite``), then optionally
``-inline`` (the sub-agent's tool declared ``@tool(timeout=None)``: called directly instead of
in a worker thread under the default timeout).
"""

from __future__ import annotations

from task_delegation_common import ANSWER, QUESTION, SUB_DESCRIPTION, SUB_NAME, Mark, Run, key, report, task, value
from task_reactchat import store_url

from reactchat import Agent, ScriptedModel, tool


def build(n: int, mark: Mark, variant: str = "memory") -> Run:
    store, *flags = variant.split("-")

    def lookup(key: str) -> str:
        """Return the value stored under key."""
        mark()
        return value(key)

    inner_script: list[str] = []
    for i in range(n):
        inner_script.append(f'I look it up.\nAction: lookup\nAction Input: {{"key": "{key(i)}"}}')
        inner_script.append(f"I have it.\nFinal Answer: {report(i)}")
    outer_script = [f'I delegate.\nAction: {SUB_NAME}\nAction Input: {{"task": "{task(i)}"}}' for i in range(n)]
    outer_script.append(f"All looked up.\nFinal Answer: {ANSWER}")
    inner, outer = ScriptedModel(inner_script), ScriptedModel(outer_script)
    lookup_tool = tool(timeout=None)(lookup) if "inline" in flags else tool(lookup)
    sub = Agent(model=inner, tools=[lookup_tool], name=SUB_NAME, description=SUB_DESCRIPTION, ask_user=False)
    parent = Agent(model=outer, tools=[sub], max_steps=n + 1, store=store_url(store), ask_user=False)

    def run() -> str:
        inner.requests.clear()  # restarts both scripts (ScriptedModel answers request number len(.requests))
        outer.requests.clear()
        result = parent.run(QUESTION)
        if result.status != "done":
            raise RuntimeError(f"reactchat run ended with status {result.status!r}")
        return str(result.answer)

    return run
