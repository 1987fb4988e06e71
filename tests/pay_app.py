"""A server app whose agent makes one unsafe call, for the in-doubt tests across workers.

``uvicorn --factory pay_app:app_from_env`` over ``REACTCHAT_DB``: a message "pay NAME" makes
the agent call ``pay(to=NAME)``, an ``unsafe`` tool (the default effect class) that appends
``call_id NAME pid`` to ``REACTCHAT_EFFECTS``. With ``REACTCHAT_HOLD`` set, the tool then
waits that many seconds, so a test can SIGKILL the worker after the effect and before the
result (``reactchat ask --tools pay_app:pay`` takes the same tool). The model is a function
of the transcript, so any worker can continue a turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

from reactchat import Agent, RunContext, tool
from reactchat.messages import AssistantMessage, Reply, Request, TextPart
from reactchat.server import ServerConfig, create_app


class PayModel:
    """Text ReAct: "pay NAME" calls ``pay``; once it has an observation, that is the answer."""

    name = "pay-rules"
    supports_tools = False
    context_tokens = None

    async def complete(self, request: Request) -> Reply:
        """The call, or the answer from the observation of it."""
        last = request.messages[-1]
        scratchpad = last.text if isinstance(last, AssistantMessage) else ""
        seen = re.findall(r"Observation: (.*?)\nThought:", scratchpad, re.S)
        if request.react is None or seen:
            return Reply(parts=[TextPart(text=f" Settled.\nFinal Answer: {seen[-1] if seen else 'no call'}")])
        question = getattr(request.messages[1], "content", "").rsplit("Question:", 1)[-1].strip()
        name = question.removeprefix("pay").strip()
        text = f" I pay.\nAction: pay\nAction Input: {json.dumps({'to': name})}"
        return Reply(parts=[TextPart(text=text)])


@tool
async def pay(to: str, ctx: RunContext) -> str:
    """Send money to someone (it must never happen twice)."""
    with open(os.environ["REACTCHAT_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(f"{ctx.call_id} {to} {os.getpid()}\n")
    hold = float(os.environ.get("REACTCHAT_HOLD") or 0)
    if hold:
        await asyncio.sleep(hold)
    return f"paid {to}"


def make_agent(store: Any) -> Agent:
    """The pay agent over ``store``."""
    return Agent(model=PayModel(), tools=[pay], store=store)  # type: ignore[arg-type]


def app_from_env() -> Any:
    """For ``uvicorn --factory``: the pay agent over ``REACTCHAT_DB``."""
    return create_app(make_agent, config=ServerConfig(model="pay-rules", store=os.environ["REACTCHAT_DB"]))
