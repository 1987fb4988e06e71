"""Where reactchat's per-step time goes, for the engine's owners.

    benchmarks/peers/.venv/bin/python benchmarks/peers/breakdown.py [--n 50] [--store memory]
    benchmarks/peers/.venv/bin/python benchmarks/peers/breakdown.py --profile   # + cProfile top 25

Part 1 times the components of one step in isolation (best of 5). Part 2 runs the
benchmark task as shipped and with two changes applied from outside, interleaved, to
show what each would save:

- ``inline tool``: the tool declared ``@tool(timeout=None)``, so the engine calls the
  sync function directly instead of in a worker thread under ``asyncio.wait_for``;
- ``no result repr``: ``asyncio.run`` of a wrapper coroutine that returns ``None``.
  On Python 3.11, ``asyncio.run`` restores its SIGINT handler through
  ``signal.getsignal``, whose enum conversion formats ``repr(partial(main_task=task))``
  in a ValueError it then swallows: the finished task's repr includes the full
  ``repr(RunResult)``, every event of the turn, so each ``Agent.run`` pays O(N) for it.
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
from reactchat.messages import ActionEvent, ObservationEvent, Reply, TextPart, ThoughtEvent, Usage
from reactchat.packs import get_pack
from reactchat.react import ReactTranscript, parse

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
    rows: list[tuple[str, Callable[[], object], int]] = [
        ("react.parse(reply)", lambda: parse(REPLY, pack, "lookup, ask_user"), 20000),
        ("transcript.request() after 10 steps", transcripts[10].request, 20000),
        ("transcript.request() after 200 steps", transcripts[200].request, 20000),
        ("ThoughtEvent(...)", lambda: ThoughtEvent(text="t", raw=REPLY, seconds=0.0, usage=Usage()), 20000),
        ("ActionEvent(...)", lambda: ActionEvent(call_id="c", tool="lookup", input={"key": "k3"}), 20000),
        ("ObservationEvent(...)", lambda: ObservationEvent(call_id="c", tool="lookup", text="v"), 20000),
        ("Reply(parts=[TextPart], usage)", lambda: Reply(parts=[TextPart(text=REPLY)], usage=Usage()), 20000),
        ("tool.validate(dict)", lambda: threaded.validate({"key": "k3"}), 20000),
        ("loop.run_until_complete(sleep(0)) (reference)", lambda: loop.run_until_complete(asyncio.sleep(0)), 5000),
        (
            "ScriptedModel.complete (incl. run_until_complete)",
            lambda: loop.run_until_complete(model.complete(request)),
            5000,
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


def variant(n: int, store: str, inline: bool, box: bool) -> Callable[[], list[float]]:
    marks: list[float] = []

    def lookup(key: str) -> str:
        """Return the value stored under key."""
        marks.append(time.perf_counter())
        return value(key)

    tool_ = tool(timeout=None)(lookup) if inline else tool(lookup)
    script = [f'I look it up.\nAction: lookup\nAction Input: {{"key": "{key(i)}"}}' for i in range(n)]
    script.append(f"I know it.\nFinal Answer: {ANSWER}")
    model = ScriptedModel(script)
    agent = Agent(model=model, tools=[tool_], max_steps=n + 1, store=store_url(store))

    def run() -> list[float]:
        model.requests.clear()
        marks.clear()
        if box:
            out = []

            async def main() -> None:
                out.append(await agent.arun(QUESTION))

            asyncio.run(main())
            result = out[0]
        else:
            result = agent.run(QUESTION)
        assert result.answer == ANSWER, result.answer
        return list(marks)

    return run


def variants(n: int, store: str, profile: bool) -> None:
    configs = {
        "as shipped": (False, False),
        "inline tool": (True, False),
        "no result repr": (False, True),
        "both": (True, True),
    }
    runs = {name: variant(n, store, *flags) for name, flags in configs.items()}
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in configs}
    for run in runs.values():
        run()
    for _ in range(max(5, 1000 // n)):
        for name, run in runs.items():
            started = time.perf_counter()
            marks = run()
            samples[name][0].append((time.perf_counter() - started) / (n + 1))
            samples[name][1].extend(b - a for a, b in itertools.pairwise(marks))
    print(f"\nreactchat-{store}, N={n}        whole run / (N+1)   one loop iteration  (median µs)")
    for name, (per_run, per_step) in samples.items():
        print(f"  {name:24} {statistics.median(per_run) * 1e6:14.1f} {statistics.median(per_step) * 1e6:20.1f}")
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(max(3, 300 // n)):
            runs["as shipped"]()
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
