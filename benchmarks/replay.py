"""Replay of a recorded 50-step session: the median time of ``reactchat.testing.replay``.

Run: ``PYTHONPATH=src python benchmarks/replay.py [--steps 50] [--turns 1] [--runs 20]``. The
session is recorded once on a scripted model: ``--steps`` model calls spread over ``--turns``
turns, each turn calculator calls and then its answer (one turn: 49 calls, then the answer);
each run replays it on a fresh memory store with no model and no tool called. It prints the
median wall time and the median CPU time of the process per replay (the work itself: on a
loaded machine the wall time grows with the queue for the cores) and, for scale, the
engine's own time for the same turns on a ``ScriptedModel`` and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from reactchat import Agent, ScriptedModel
from reactchat.testing import replay
from reactchat.toolbox import calculator


def script(steps: int, turns: int) -> list[list[str]]:
    """The replies of each turn: ``steps`` in all, each turn's last one its answer."""
    sizes = [steps // turns + (t < steps % turns) for t in range(turns)]
    done, replies = 0, []
    for size in sizes:
        calls = [
            f'Thought: step {i}\nAction: calculator\nAction Input: {{"expression": "{i} + 1"}}'
            for i in range(done, done + size - 1)
        ]
        replies.append([*calls, f"Thought: done\nFinal Answer: finished {done + size}"])
        done += size
    return replies


async def run_turns(agent: Agent, turns: int) -> str:
    """The turns of the script in one session; its id."""
    session = None
    for turn in range(turns):
        session = (await agent.arun(f"Count, part {turn + 1}.", session)).session
    assert session is not None
    return session


async def main(steps: int, turns: int, runs: int) -> None:
    replies = script(steps, turns)
    flat = [reply for turn in replies for reply in turn]
    agent = Agent(model=ScriptedModel(flat), tools=[calculator], max_steps=steps + 1, max_repeats=steps)
    session = await run_turns(agent, turns)
    today = Agent(
        model=ScriptedModel([]), tools=[calculator], max_steps=steps + 1, max_repeats=steps, store=agent.store
    )
    await replay(today, session)  # warm: schemas and parsers built once
    seconds, cpu = [], []
    for _ in range(runs):
        start, used = time.perf_counter(), time.process_time()
        done = await replay(today, session)
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - used)
    assert done.model_calls == steps and done.messages == turns
    # the engine's own cost for the same steps: the session run again on a scripted model
    scripted = []
    for _ in range(runs):
        again = Agent(model=ScriptedModel(flat), tools=[calculator], max_steps=steps + 1, max_repeats=steps)
        start = time.perf_counter()
        await run_turns(again, turns)
        scripted.append(time.perf_counter() - start)
    print(
        f"replay of a {steps}-step session in {turns} turns: median {statistics.median(seconds) * 1000:.1f} ms, "
        f"best {min(seconds) * 1000:.1f} ms, cpu {statistics.median(cpu) * 1000:.1f} ms over {runs} runs "
        f"(target <= 50 ms); the same turns on a "
        f"ScriptedModel: median {statistics.median(scripted) * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--turns", type=int, default=1, help="turns the steps are spread over")
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.steps, options.turns, options.runs))
