"""Where reactchat's per-step time goes, for the engine's owners.

    benchmarks/peers/.venv/bin/python benchmarks/peers/breakdown.py [--n 50] [--store memory|sqlite]
    benchmarks/peers/.venv/bin/python benchmarks/peers/breakdown.py --profile   # + cProfile top 25

Part 1 times the pieces of one step in isolation (best of 5, so the machine's other
load mostly drops out). Part 2 runs the benchmark task as shipped (``@tool``: a sync
tool runs in a worker thread under ``asyncio.wait_for`` because of the default 30 s
timeout) and with the tool declared ``@tool(timeout=None)`` (called inline), interleaved,
and prints wall and CPU time per step.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import pstats
import statistics
import time
import timeit
from collections.abc import Callable

from task_common import ANSWER, QUESTION, key, value
from task_reactchat import store_url

from reactchat import Agent, ScriptedModel, tool
from reactchat.messages import EVENTS, ActionEvent, ObservationEvent, Reply, TextPart, ThoughtEvent, Usage
from reactchat.protocols.packs import get_pack
from reactchat.protocols.react import ReactTranscript, parse
from reactchat.store import resolve_store

REPLY = 'I look it up.\nAction: lookup\nAction Input: {"key": "k3"}'


def lookup(key: str) -> str:
    """Return the value stored under key."""
    return value(key)


def best_us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def components() -> None:
    threaded, inline = tool(lookup), tool(timeout=None)(lookup)
    pack = get_pack("en")
    transcripts = {}
    for steps in (10, 200):
        transcript = ReactTranscript(pack, [threaded.spec], [], QUESTION, None)
        for i in range(steps):
            transcript.add_step(REPLY, "I look it up.", [(f"c{i}", "lookup", {"key": key(i)})])
            transcript.add_observation(f"c{i}", value(key(i)))
        transcripts[steps] = transcript
    model = ScriptedModel(itertools.repeat(REPLY, 10**6))
    request = transcripts[10].request()
    loop = asyncio.new_event_loop()
    stores = {name: resolve_store(store_url(name)) for name in ("memory", "sqlite")}
    observations = {}
    for name, store in stores.items():
        session = loop.run_until_complete(store.create_session())
        observations[name] = ObservationEvent(call_id="c", tool="lookup", text="value of k3", session=session)
    rows: list[tuple[str, Callable[[], object], int]] = [
        ("react.parse(reply)", lambda: parse(REPLY, pack, "lookup, ask_user"), 20000),
        ("transcript.request() after 10 steps", transcripts[10].request, 20000),
        ("transcript.request() after 200 steps", transcripts[200].request, 20000),
        ("ThoughtEvent(...)", lambda: ThoughtEvent(text="t", raw=REPLY, seconds=0.0, usage=Usage()), 20000),
        ("ActionEvent(...)", lambda: ActionEvent(call_id="c", tool="lookup", input={"key": "k3"}), 20000),
        ("ObservationEvent(...)", lambda: ObservationEvent(call_id="c", tool="lookup", text="v"), 20000),
        ("Reply(parts=[TextPart], usage)", lambda: Reply(parts=[TextPart(text=REPLY)], usage=Usage()), 20000),
        ("tool.validate(dict)", lambda: threaded.validate({"key": "k3"}), 20000),
        ("EVENTS.dump_json(ObservationEvent)", lambda: EVENTS.dump_json(observations["memory"]), 20000),
        ("loop.run_until_complete(sleep(0)) (reference)", lambda: loop.run_until_complete(asyncio.sleep(0)), 5000),
        (
            "ScriptedModel.complete (incl. run_until_complete)",
            lambda: loop.run_until_complete(model.complete(request)),
            5000,
        ),
        (
            "memory store.append (incl. run_until_complete)",
            lambda: loop.run_until_complete(stores["memory"].append(observations["memory"])),
            5000,
        ),
        (
            "sqlite store.append (incl. run_until_complete)",
            lambda: loop.run_until_complete(stores["sqlite"].append(observations["sqlite"])),
            2000,
        ),
        (
            "tool.run, default timeout: worker thread",
            lambda: loop.run_until_complete(threaded.run({"key": "k3"})),
            2000,
        ),
        ("tool.run, timeout=None: inline", lambda: loop.run_until_complete(inline.run({"key": "k3"})), 5000),
        ("asyncio.run(sleep(0)): per-run event loop", lambda: asyncio.run(asyncio.sleep(0)), 300),
    ]
    print("component (best of 5)                                 µs")
    for label, fn, number in rows:
        print(f"  {label:52} {best_us(fn, number):8.2f}")
    loop.close()


def variant(n: int, store: str, inline: bool) -> Callable[[], tuple[list[float], list[float]]]:
    marks: list[float] = []
    cpu_marks: list[float] = []

    def lookup(key: str) -> str:
        """Return the value stored under key."""
        marks.append(time.perf_counter())
        cpu_marks.append(time.process_time())
        return value(key)

    tool_ = tool(timeout=None)(lookup) if inline else tool(lookup)
    script = [f'I look it up.\nAction: lookup\nAction Input: {{"key": "{key(i)}"}}' for i in range(n)]
    script.append(f"I know it.\nFinal Answer: {ANSWER}")
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[tool_], max_steps=n + 1, store=store_url(store))

    def run() -> tuple[list[float], list[float]]:
        model.requests.clear()
        marks.clear()
        cpu_marks.clear()
        result = agent.run(QUESTION)
        assert result.answer == ANSWER, result.answer
        return list(marks), list(cpu_marks)

    return run


def variants(n: int, store: str, profile: bool) -> None:
    runs = {"as shipped (@tool)": variant(n, store, False), "@tool(timeout=None)": variant(n, store, True)}
    columns = ("wall/run", "cpu/run", "wall/iter", "cpu/iter")
    samples: dict[str, dict[str, list[float]]] = {name: {c: [] for c in columns} for name in runs}
    for run in runs.values():
        run()
    for _ in range(max(5, 1000 // n)):
        for name, run in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            marks, cpu_marks = run()
            sample = samples[name]
            sample["wall/run"].append((time.perf_counter() - wall) / (n + 1))
            sample["cpu/run"].append((time.process_time() - cpu) / (n + 1))
            sample["wall/iter"].extend(b - a for a, b in itertools.pairwise(marks))
            sample["cpu/iter"].extend(b - a for a, b in itertools.pairwise(cpu_marks))
    print(f"\nreactchat-{store}, N={n}: median µs per step (run = whole run / (N+1), iter = one loop iteration)")
    print(f"  {'':24}" + "".join(f"{c:>12}" for c in columns))
    for name, sample in samples.items():
        print(f"  {name:24}" + "".join(f"{statistics.median(sample[c]) * 1e6:12.1f}" for c in columns))
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(max(3, 300 // n)):
            runs["as shipped (@tool)"]()
        profiler.disable()
        print("\ncProfile of the shipped configuration, by own time:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    components()
    variants(args.n, args.store, args.profile)


if __name__ == "__main__":
    main()
