"""The eval runner's overhead: N cases against a scripted model with a fixed latency.

    python benchmarks/eval_speed.py [--cases 200] [--concurrency 20] [--latency 0.05] [--store memory:]

Each case is one question answered by a calculator call and a final answer (two model
calls of ``--latency`` seconds each). Prints the wall time of the whole eval, the ideal one
(cases / concurrency × two calls × latency) and the CPU time the process spent (the
runner's and the store's own work: what makes the wall time grow on a loaded machine);
the target for 200 cases at concurrency 20 and 50 ms is 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time

from reactchat import Agent, ScriptedModel
from reactchat.evals import parse_cases, run_eval
from reactchat.messages import Request
from reactchat.toolbox import calculator


def reply(request: Request) -> str:
    """Compute 'What is A * B?' with the calculator, then answer with the observation."""
    # the question, then the steps so far (the text protocol prefills them as the assistant's)
    texts = []
    for message in request.messages[1:]:
        content = getattr(message, "content", None)
        texts.append(content if isinstance(content, str) else "".join(p.text for p in getattr(message, "parts", [])))
    text = "\n".join(texts)
    if "Observation:" in text:
        value = re.findall(r"Observation: (\S+)", text)[-1]
        return f" Done.\nFinal Answer: {value}"
    a, b = re.findall(r"\d+", text)[-2:]
    return f' Compute.\nAction: calculator\nAction Input: {{"expression": "{a} * {b}"}}'


async def main(cases: int, concurrency: int, latency: float, store: str) -> None:
    lines = [json.dumps({"id": str(i), "input": f"What is {i} * 3?", "expected": i * 3}) for i in range(cases)]
    agent = Agent(model=ScriptedModel([reply] * (2 * cases), delay=latency), tools=[calculator], store=store)
    started, cpu = time.perf_counter(), time.process_time()
    report = await run_eval(agent, parse_cases("\n".join(lines)), concurrency=concurrency)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    await agent.store.close()
    ideal = -(-cases // concurrency) * 2 * latency
    print(f"eval of {cases} cases, concurrency {concurrency}, model latency {latency * 1000:.0f} ms, store {store}")
    print(
        f"passed {report.passed}/{report.total}; wall {wall:.2f} s (ideal {ideal:.2f} s), cpu {cpu:.3f} s; "
        f"load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--store", default="memory:")
    args = parser.parse_args()
    asyncio.run(main(args.cases, args.concurrency, args.latency, args.store))
