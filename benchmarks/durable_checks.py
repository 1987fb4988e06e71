"""The per-step cost of the effect and budget checks, side by side in one process.

    .venv/bin/python benchmarks/durable_checks.py [--rounds 15] [--steps 50] [--turns 8] [--store sqlite]

The same agent (text ReAct, a zero-latency ``ScriptedModel``, an inline tool, the memory
store or a SQLite file) in these variants:

* ``unsafe``: the default effect class, no budget (the reference of the next two);
* ``read``: the tool declared ``@tool(effect="read")``;
* ``budget``: ``Budget(tokens=, cost=, seconds=, tool_calls=)``, every limit set, none reached;
* ``priced`` and ``priced+budget``: the model named as one the price table knows, so that the
  cost limit prices every model call (``priced`` is the reference of ``priced+budget``).

A round runs every variant once, in a shuffled order, each ``--turns`` turns of ``--steps``
tool steps after a warm-up turn; the cost is the process's CPU time per step. Printed: each
variant's median µs per step over rounds, and its cost relative to its reference as the
median over rounds of the paired ratio (a ratio within one round is what a shared machine
measures best), with the load average of each round.

Then the checks alone, timed in the same process: what every tool call of a session that is
no fork asks of its effect class (``ForkLookup.memory``, ``must_approve``, ``reused``), and what
a budget adds to one step (``Spending.add`` of its thought, action and observation, ``over``,
``calls_left``), each as a share of the ``unsafe`` step. Target: ≤ 5 % of a step.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable

from reactchat import Agent, Budget, ScriptedModel, tool
from reactchat.engine.budget import Spending
from reactchat.engine.forks import ForkLookup
from reactchat.messages import ActionEvent, ObservationEvent, ThoughtEvent, Usage
from reactchat.store import resolve_store
from reactchat.tools import Effect, Tool

#: a model name the price table knows
PRICED = "openai:gpt-4o-mini"
#: limits no benchmark turn reaches
WIDE = Budget(tokens=10**12, cost=10.0**6, seconds=10.0**6, tool_calls=10**9)
#: variant → (effect class, budget, priced model, reference variant)
VARIANTS: dict[str, tuple[Effect, Budget | None, bool, str]] = {
    "unsafe": ("unsafe", None, False, "unsafe"),
    "read": ("read", None, False, "unsafe"),
    "budget": ("unsafe", WIDE, False, "unsafe"),
    "priced": ("unsafe", None, True, "priced"),
    "priced+budget": ("unsafe", WIDE, True, "priced"),
}


def lookup_tool(effect: Effect) -> Tool:
    def lookup(key: str) -> str:
        """Return the value stored under key."""
        return f"value-{key}"

    made: Tool = tool(timeout=None, effect=effect)(lookup)
    return made


def script(steps: int) -> list[str]:
    replies = [f' step {i}\nAction: lookup\nAction Input: {{"key": "k{i}"}}' for i in range(steps)]
    return [*replies, " done\nFinal Answer: finished"]


def make_turn(variant: str, steps: int, store: str) -> Callable[[], asyncio.Future[float]]:
    """A function that runs one turn of ``variant`` and returns its CPU seconds per step."""
    effect, budget, priced, _ = VARIANTS[variant]
    tools = [lookup_tool(effect)]

    async def turn() -> float:
        model = ScriptedModel(script(steps), name=PRICED if priced else "scripted")
        agent = Agent(model=model, tools=tools, max_steps=steps + 1, store=store, budget=budget)
        cpu = time.process_time()
        result = await agent.arun("go")
        cpu = time.process_time() - cpu
        assert result.status == "done" and len(result.steps) == steps + 1, result
        return cpu / (steps + 1)

    return turn  # type: ignore[return-value]


async def measure(rounds: int, steps: int, turns: int, store: str) -> dict[str, list[float]]:
    """CPU seconds per step of each variant, one median per round."""
    runs = {name: make_turn(name, steps, store) for name in VARIANTS}
    for run in runs.values():
        await run()  # warm-up: imports, caches, the price table
    found: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for number in range(rounds):
        for name in random.sample(list(VARIANTS), len(VARIANTS)):
            found[name].append(statistics.median([await runs[name]() for _ in range(turns)]))
        print(f"round {number + 1}: load {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return found


async def effect_checks(repeat: int) -> float:
    """CPU seconds of the effect checks of one tool call in a session that is no fork."""
    store = resolve_store("memory:")
    session = await store.create_session()
    lookup, arguments = lookup_tool("unsafe"), {"key": "k1"}
    forks = ForkLookup(store, session, "")
    cpu = time.process_time()
    for _ in range(repeat):
        fork = await forks.memory()
        fork.must_approve(lookup, arguments)
        fork.reused(lookup, arguments)
    return (time.process_time() - cpu) / repeat


def budget_checks(repeat: int, model: str) -> float:
    """CPU seconds a budget with every limit adds to one step of a ``model`` (the step's events
    folded, the check before the model call, the tool-call check)."""
    spending = Spending(WIDE)
    usage = Usage(input_tokens=1200, output_tokens=40, model=model)
    thought = ThoughtEvent(text="step", usage=usage, seconds=0.001)
    action = ActionEvent(call_id="c", tool="lookup", input={"key": "k"})
    observation = ObservationEvent(call_id="c", tool="lookup", text="value-k", seconds=0.0001)
    cpu = time.process_time()
    for _ in range(repeat):
        spending.over()
        spending.add(thought)
        spending.add(action)
        spending.calls_left("", "c")
        spending.add(observation)
    return (time.process_time() - cpu) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = "memory:" if args.store == "memory" else f"sqlite:///{folder}/bench.db"
        found = asyncio.run(measure(args.rounds, args.steps, args.turns, store))
    print(f"CPU µs per step, N={args.steps}, {args.store} store, inline tool, {args.rounds} rounds:")
    for name, (_, _, _, reference) in VARIANTS.items():
        ratio = statistics.median(mine / ref for mine, ref in zip(found[name], found[reference], strict=True))
        versus = f"vs {reference}: {ratio:.3f}" if name != reference else "(reference)"
        print(f"{name:>14}  median {statistics.median(found[name]) * 1e6:7.1f}   {versus}")
    step = statistics.median(found["unsafe"])
    checks = {
        "effect checks, per tool call": asyncio.run(effect_checks(20_000)),
        "budget checks, per step": budget_checks(20_000, "scripted"),
        "budget checks, per step, priced model": budget_checks(500, PRICED),
    }
    for name, seconds in checks.items():
        print(f"{name:>38}  {seconds * 1e6:7.2f} µs = {seconds / step:6.1%} of an unsafe step")


if __name__ == "__main__":
    main()
