"""Resume of a session paused at depth 2, on SQLite.

    python benchmarks/agents_resume.py [--sessions 200]

A boss delegates to a researcher, which delegates to a fetcher, which asks the user
(``ask_user`` at depth 2); every model is scripted with zero latency. The sessions are
paused first; then, from a fresh agent over the same SQLite file (as another process
would), each is answered and timed:

* **first event**: from the call with the answer until the innermost run's first new
  event is durable (lock, read, rebuild three runs from the log, record the answer);
* **whole resume**: until the turn's final answer (plus the fetcher's tool call and the
  three remaining model calls, one per level).

Prints the medians and p90s in milliseconds and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from agents_team import deep_team


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="reactchat-resume-"))
    url = f"sqlite:///{folder / 'sessions.db'}"
    effects = str(folder / "effects")
    pausing = deep_team(url, effects)
    sessions = []
    for _ in range(args.sessions):
        result = await pausing.arun("How far is Paris?")
        assert result.status == "waiting" and result.pending is not None
        assert result.pending.agent == "boss/researcher/fetcher"
        sessions.append(result.session)
    await pausing.store.close()

    resuming = deep_team(url, effects)  # a new agent and a new connection, as in another process
    first: list[float] = []
    whole: list[float] = []
    for session in sessions:
        started = time.perf_counter()
        seen_first = None
        final = None
        async for event in resuming.stream("Lyon", session):
            if seen_first is None:
                seen_first = time.perf_counter() - started
            final = event
        whole.append(time.perf_counter() - started)
        first.append(seen_first or 0.0)
        assert final is not None and final.type == "answer" and not final.run
    await resuming.store.close()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"resume of a session paused at depth 2, SQLite, {len(sessions)} sessions, load average {load}")
    for name, values in (("first event", first), ("whole resume", whole)):
        median, p90 = statistics.median(values) * 1e3, quantile(values, 0.9) * 1e3
        print(f"  {name:13} median {median:6.2f} ms   p90 {p90:6.2f} ms")


if __name__ == "__main__":
    asyncio.run(main())
