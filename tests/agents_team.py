"""Scripted teams of agents for the sub-agent, plan-and-execute and durability tests.

The models are functions of the request, not lists of replies, so that any process can
continue a run another one started: a ReAct agent takes the next action of its script
by counting the actions already in its scratchpad; a planner writes its plan from the
question and its replanner goes on until no step is pending.

    python tests/agents_team.py URL SESSION MESSAGE --team deep|plan --effects FILE [--answer A]

runs one turn in a subprocess (``ready`` once connected, then each event as a JSON line
after it is durable, then ``status STATUS ANSWER``), for the tests that kill it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reactchat import Agent, AlreadyAnswered, RunContext, SessionBusy, Tool, tool
from reactchat.messages import EVENTS, AssistantMessage, Reply, Request, SystemMessage, TextPart, UserMessage
from reactchat.store import Store, resolve_store

_ACTION = re.compile(r"^Action:\s*(\w+)", re.MULTILINE)
_OBSERVATION = re.compile(r"^Observation:\s*(.*)$", re.MULTILINE)
_QUESTION = re.compile(r"^Question:\s*(.*)$", re.MULTILINE)
_STEP = re.compile(r"^\d+\. \((\w+)\)", re.MULTILINE)

#: one action of a script: (tool, input), the input may use {task}
Act = tuple[str, dict[str, object]]


InDoubt = Literal["ask", "tell_model"]


def make_bump(effects: str, delay: float = 0.0) -> Tool:
    """The side-effect tool: appends ``RUN/CALL_ID N`` to the effects file (call ids repeat
    across nested runs; with the run they name one call of the whole turn)."""

    @tool
    async def bump(n: int, ctx: RunContext) -> str:
        """Bump the counter (step n)."""
        with open(effects, "a", encoding="utf-8") as out:
            out.write(f"{ctx.run}/{ctx.call_id} {n} {os.getpid()}\n")
        if delay:
            await asyncio.sleep(delay)
        return f"bumped {n}"

    return bump


def question_of(request: Request) -> str:
    """The task a request is about: the first line after ``Question:``."""
    text = "\n".join(m.content for m in request.messages if isinstance(m, UserMessage))
    found = _QUESTION.findall(text)
    return found[-1].strip() if found else ""


class ReactScript:
    """A text-ReAct model: ``acts(task)`` is the script of actions, ``final(task, observations)``
    the answer once they are done."""

    supports_tools = False
    supports_grammar = False
    name = "react-script"
    context_tokens = None

    def __init__(
        self, acts: Callable[[str], list[Act]], final: Callable[[str, list[str]], str], delay: float = 0.0
    ) -> None:
        self.acts = acts
        self.final = final
        self.delay = delay
        self.requests: list[Request] = []

    async def complete(self, request: Request) -> Reply:
        """The next action of the script, or the final answer."""
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        last = request.messages[-1]
        scratchpad = last.text if isinstance(last, AssistantMessage) else ""
        task = question_of(request)
        done = len(_ACTION.findall(scratchpad))
        script = self.acts(task)
        if done < len(script):
            tool, value = script[done]
            text = f" Step {done + 1}.\nAction: {tool}\nAction Input: {json.dumps(value)}"
        else:
            text = f" Done.\nFinal Answer: {self.final(task, _OBSERVATION.findall(scratchpad))}"
        return Reply(parts=[TextPart(text=text)])


class PlanScript(ReactScript):
    """A planning agent's model: plans the steps named on ``--team plan``, goes on while a
    step is pending, then answers with the results; its executor steps are ``bump N``."""

    name = "plan-script"

    def __init__(self, steps: list[dict[str, object]], delay: float = 0.0) -> None:
        super().__init__(executor_acts, lambda task, seen: f"did {task}: {'; '.join(seen)}", delay)
        self.steps = steps

    async def complete(self, request: Request) -> Reply:
        """The plan, the replanner's decision, or an executor step."""
        system = request.messages[0]
        instructions = system.content if isinstance(system, SystemMessage) else ""
        if "You are the planner" not in instructions:
            return await super().complete(request)
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        user = request.messages[1]
        content = user.content if isinstance(user, UserMessage) else ""
        statuses = _STEP.findall(content)
        if not statuses:  # the first plan
            return _text(json.dumps({"steps": self.steps}))
        if "pending" in statuses:
            return _text('{"action": "continue"}')
        results = re.findall(r"→ (.*)$", content, re.MULTILINE)
        return _text(json.dumps({"action": "answer", "answer": " | ".join(results)}))


def _text(text: str) -> Reply:
    return Reply(parts=[TextPart(text=text)])


def executor_acts(task: str) -> list[Act]:
    """``bump N`` → bump N; ``ask and bump N`` → ask where the user is, then bump N;
    ``bump N then ask`` → bump N, then ask."""
    found = re.search(r"bump (\d+)", task)
    ask: Act = ("ask_user", {"question": "Where are you?"})
    acts: list[Act] = [("bump", {"n": int(found.group(1))})] if found else []
    if task.startswith("ask"):
        acts.insert(0, ask)
    elif task.endswith("then ask"):
        acts.append(ask)
    return acts


def deep_team(store: str | Store, effects: str, delay: float = 0.0, in_doubt: InDoubt = "ask") -> Agent:
    """boss → researcher → fetcher; the fetcher asks the user, then bumps (a side effect)."""
    bump = make_bump(effects, delay=delay)
    fetcher = Agent(
        model=ReactScript(
            lambda task: executor_acts("ask and bump 7"), lambda task, seen: f"fetched: {seen[0]}", delay
        ),
        tools=[bump],
        name="fetcher",
        in_doubt=in_doubt,
        description="Fetches facts.",
    )
    researcher = Agent(
        model=ReactScript(
            lambda task: [("fetcher", {"task": "fetch the distance"})], lambda task, seen: f"found: {seen[0]}", delay
        ),
        tools=[fetcher],
        name="researcher",
        in_doubt=in_doubt,
        description="Researches a question.",
        ask_user=False,
    )
    return Agent(
        model=ReactScript(
            lambda task: [("researcher", {"task": "research the distance"})],
            lambda task, seen: f"boss: {seen[0]}",
            delay,
        ),
        tools=[researcher],
        name="boss",
        in_doubt=in_doubt,
        store=store,
        ask_user=False,
    )


def plan_team(
    store: str | Store, effects: str, steps: list[dict[str, object]], delay: float = 0.0, in_doubt: InDoubt = "ask"
) -> Agent:
    """A planning boss whose steps bump (itself, or through a ``worker`` sub-agent that may ask)."""
    bump = make_bump(effects, delay=delay)
    worker = Agent(
        model=ReactScript(executor_acts, lambda task, seen: f"worked: {'; '.join(seen)}", delay),
        tools=[bump],
        name="worker",
        in_doubt=in_doubt,
        description="Bumps counters; may ask the user where they are.",
    )
    return Agent(
        model=PlanScript(steps, delay),
        tools=[worker, bump],
        name="boss",
        in_doubt=in_doubt,
        store=store,
        plan=True,
        max_plan_steps=len(steps) + 2,
        max_steps=6,
    )


def plan_steps(spec: str) -> list[dict[str, object]]:
    """``w1,2,wa3,wb4`` → the worker bumps 1, the boss's executor bumps 2, the worker asks then
    bumps 3, the worker bumps 4 then asks."""
    steps: list[dict[str, object]] = []
    for item in spec.split(","):
        number = re.sub(r"\D", "", item)
        task = (
            f"ask and bump {number}" if "a" in item else f"bump {number} then ask" if "b" in item else f"bump {number}"
        )
        steps.append({"task": task, "agent": "worker"} if item.startswith("w") else {"task": task})
    return steps


def team_app(store: str, effects: str, team: str = "deep", steps: str = "w1,2", delay: float = 0.0) -> Any:
    """The HTTP app serving a team (``deep`` or ``plan``) over ``store``."""
    from reactchat.server import ServerConfig, create_app

    def build(shared: Store) -> Agent:
        if team == "deep":
            return deep_team(shared, effects, delay)
        return plan_team(shared, effects, plan_steps(steps), delay)

    return create_app(build, config=ServerConfig(model="team", store=store))


def app_from_env() -> Any:
    """For ``uvicorn --factory``: ``REACTCHAT_TEAM`` over ``REACTCHAT_DB``, effects in ``REACTCHAT_EFFECTS``
    (a plan team's steps in ``REACTCHAT_STEPS``, each model and tool call ``REACTCHAT_DELAY`` seconds)."""
    env = os.environ
    team, steps, delay = (
        env.get("REACTCHAT_TEAM", "deep"),
        env.get("REACTCHAT_STEPS", "w1,2"),
        env.get("REACTCHAT_DELAY"),
    )
    return team_app(env["REACTCHAT_DB"], env["REACTCHAT_EFFECTS"], team, steps, float(delay or 0.0))


async def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("session")
    p.add_argument("message", nargs="?")
    p.add_argument("--team", choices=["deep", "plan"], default="deep")
    p.add_argument("--steps", default="w1,2")
    p.add_argument("--effects", required=True)
    p.add_argument("--answer")
    p.add_argument("--delay", type=float, default=0.0)
    args = p.parse_args()
    store = resolve_store(args.url)
    if args.team == "deep":
        agent = deep_team(store, args.effects, args.delay)
    else:
        agent = plan_team(store, args.effects, plan_steps(args.steps), args.delay)
    await store.exists(args.session)  # connect (and migrate) before announcing readiness
    print("ready", flush=True)

    def show(event: object) -> None:
        print(EVENTS.dump_json(event).decode(), flush=True)  # type: ignore[arg-type]

    try:
        result = await agent.arun(args.message, args.session, on_event=show)
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
    print(f"status {result.status} {json.dumps(result.answer)}", flush=True)
    return 3 if result.status == "waiting" else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
