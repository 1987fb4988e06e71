"""Replay of a recorded 50-step session: the median time of ``reactchat.testing.replay``.

Run: ``PYTHONPATH=src python benchmarks/replay.py [--steps 50] [--runs 20]``. The session is
recorded once on a scripted model (49 calculator calls, then the answer); each run replays
it on a fresh memory store with no model and no tool called. For scale it also prints the
engine's own time for the same run on a ``ScriptedModel`` and the machine's load average.
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


async def main(steps: int, runs: int) -> None:
    replies = [
        f'Thought: step {i}\nAction: calculator\nAction Input: {{"expression": "{i} + 1"}}' for i in range(steps - 1)
    ]
    replies.append("Thought: done\nFinal Answer: finished")
    agent = Agent(model=ScriptedModel(replies), tools=[calculator], max_steps=steps + 1, max_repeats=steps)
    session = (await agent.arun("Count.")).session
    today = Agent(
        model=ScriptedModel([]), tools=[calculator], max_steps=steps + 1, max_repeats=steps, store=agent.store
    )
    await replay(today, session)  # warm: schemas and parsers built once
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        done = await replay(today, session)
        seconds.append(time.perf_counter() - start)
    assert done.model_calls == steps
    # the engine's own cost for the same steps: the session run again on a scripted model
    scripted = []
    for _ in range(runs):
        again = Agent(model=ScriptedModel(replies), tools=[calculator], max_steps=steps + 1, max_repeats=steps)
        start = time.perf_counter()
        await again.arun("Count.")
        scripted.append(time.perf_counter() - start)
    print(
        f"replay of a {steps}-step session: median {statistics.median(seconds) * 1000:.1f} ms, "
        f"best {min(seconds) * 1000:.1f} ms over {runs} runs (target <= 50 ms); the same run on a "
        f"ScriptedModel: median {statistics.median(scripted) * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.steps, options.runs))
