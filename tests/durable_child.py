"""A scripted agent run in a subprocess, for the durable-session tests and benchmarks.

    python tests/durable_child.py URL SESSION MESSAGE --plan bump,ask,bump --effects FILE

Prints ``ready`` once imported and connected (the parent may then kill it at any
moment), then each event as a JSON line *after* the engine yielded it (so after it was
durable), then ``status STATUS``. Exit status: 0 done, 3 waiting, 5 busy, 6 already
answered. ``--go`` waits for a line on stdin before sending the message, so that many
children can race.

The model is a function of the transcript, not a list of replies, so any process can
continue a turn another one started: the next step is ``plan[number of actions so far]``.
The ``bump`` tool appends its call id to the ``--effects`` file: the side effect whose
count proves that no finished call ran twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import time
from typing import Literal

from reactchat import Agent, AlreadyAnswered, RunContext, SessionBusy, tool
from reactchat.messages import EVENTS, AssistantMessage, Reply, Request, TextPart
from reactchat.store import Store, resolve_store
from reactchat.tools import Effect

_ACTION = re.compile(r"^Action:\s*(\w+)", re.MULTILINE)
_ASKED = re.compile(r"Action:\s*ask_user\nAction Input: .*\nObservation: (.*)")


class PlanModel:
    """Follows a plan of actions (``bump``, ``ask``), then answers with what it saw."""

    name = "plan"
    supports_tools = False
    context_tokens = None

    def __init__(self, plan: list[str], delay: float = 0.0) -> None:
        self.plan = plan
        self.delay = delay
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Reply:
        """The next step of the plan, read off the scratchpad."""
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        last = request.messages[-1]
        scratchpad = last.text if isinstance(last, AssistantMessage) else ""
        done = len(_ACTION.findall(scratchpad))
        if done < len(self.plan):
            if self.plan[done] == "ask":
                text = ' I must ask.\nAction: ask_user\nAction Input: {"question": "Where are you?"}'
            else:
                text = f' Step {done + 1}.\nAction: bump\nAction Input: {{"n": {done + 1}}}'
        else:
            bumps = self.plan.count("bump")
            answers = _ASKED.findall(scratchpad)
            text = f" All done.\nFinal Answer: {bumps} bumps; user said {', '.join(answers) or 'nothing'}"
        return Reply(parts=[TextPart(text=text)])


def make_bump(
    effects: str, delay: float = 0.0, die_at: int = 0, effect: Effect = "unsafe", reconcile: bool = False
) -> object:
    """The side-effect tool: records its call id, optionally dies right after. With
    ``reconcile``, a check reads the effects file to say whether a call of step ``n`` happened."""

    def happened(n: int) -> str | None:
        with open(effects, encoding="utf-8") as log:
            found = any(line.split()[1] == str(n) for line in log if line.strip())
        return f"bumped {n} (found in the log)" if found else None

    @tool(effect=effect, reconcile=happened if reconcile else None)
    async def bump(n: int, ctx: RunContext) -> str:
        """Bump the counter (step n)."""
        with open(effects, "a", encoding="utf-8") as out:
            out.write(f"{ctx.call_id} {n} {os.getpid()}\n")
        if n == die_at:
            os.kill(os.getpid(), signal.SIGKILL)  # the effect happened; its observation never will
        if delay:
            await asyncio.sleep(delay)
        return f"bumped {n}"

    return bump


def make_agent(
    url: str | Store,
    plan: list[str],
    effects: str,
    *,
    effect: Effect = "unsafe",
    reconcile: bool = False,
    in_doubt: Literal["ask", "tell_model"] = "ask",
    **options: float,
) -> Agent:
    """The agent every process of a test builds the same way."""
    model = PlanModel(plan, delay=float(options.get("model_delay", 0.0)))
    bump = make_bump(
        effects,
        delay=float(options.get("tool_delay", 0.0)),
        die_at=int(options.get("die_at", 0)),
        effect=effect,
        reconcile=reconcile,
    )
    tools = [bump]
    return Agent(model=model, tools=tools, store=url, max_steps=len(plan) + 5, in_doubt=in_doubt)  # type: ignore[arg-type]


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("session")
    p.add_argument("message", nargs="?")
    p.add_argument("--plan", default="bump,ask,bump")
    p.add_argument("--effects", required=True)
    p.add_argument("--answer", help="answer the agent's question in the same process")
    p.add_argument("--reply-to")
    p.add_argument("--model-delay", type=float, default=0.0)
    p.add_argument("--tool-delay", type=float, default=0.0)
    p.add_argument("--die-at", type=int, default=0)
    p.add_argument("--go", action="store_true")
    args = p.parse_args()
    store = resolve_store(args.url)
    agent = make_agent(
        store,
        args.plan.split(","),
        args.effects,
        model_delay=args.model_delay,
        tool_delay=args.tool_delay,
        die_at=args.die_at,
    )
    await store.exists(args.session)  # connect (and migrate) before announcing readiness
    print("ready", flush=True)
    if args.go:
        await asyncio.to_thread(sys.stdin.readline)

    def show(event: object) -> None:
        print(EVENTS.dump_json(event).decode(), flush=True)  # type: ignore[arg-type]

    try:
        result = await agent.arun(args.message, args.session, reply_to=args.reply_to, on_event=show)
        if result.status == "waiting" and args.answer:
            result = await agent.arun(args.answer, args.session, on_event=show)
    except SessionBusy:
        print("status busy", flush=True)
        return 5
    except AlreadyAnswered:
        print("status already_answered", flush=True)
        return 6
    finally:
        await store.close()
    print(f"status {result.status} {json.dumps(result.answer)} {time.time()}", flush=True)
    return 3 if result.status == "waiting" else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
