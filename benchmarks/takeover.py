"""How long a turn waits when the host running it is cut off or frozen: takeover time.

    sudo .venv/bin/python benchmarks/takeover.py [--trials 20] [--lease 5] [--faults partition,freeze]

Root only: it builds the multi-host harness of ``tests/test_hosts.py`` (``tests/hosts_support.py``:
a database host, two worker hosts running ``reactchat serve`` from ``deploy/``, a client host
with a balancer, as network namespaces). Each trial runs one turn of three tool calls through
the balancer (a model call takes 0.5 s) and, once the client has seen the first tool's
observation, cuts the link of the host running it (``partition``) or stops every process in
it (``freeze``); the fault is lifted once the turn is done. Printed per fault, p50 / p99 / max
over the trials, in seconds from the fault:

* **takeover**: until the other host holds the turn's lock (its mark in ``running_turns``
  names a backend of the other host, with a new epoch), watched every 50 ms;
* **resumed**: until the first event the other host appended is committed (takeover plus
  one model call);
* **answered**: until the client, reconnected with ``Last-Event-ID``, read the answer.

Each trial also checks what the tests check (the turn ended once, each tool call ran once)
and the count of trials that did not is printed. The takeover time is the lease (default
5 s, ``REACTCHAT_LEASE_SECONDS``) less the part of it since its last renewal (renewed every
second), plus up to one look for abandoned turns (every 0.5 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hosts_parts import STEPS
from hosts_support import Hosts, Trial, trial, unavailable


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run(hosts: Hosts, fault: str, n: int) -> tuple[Trial, float | None, bool]:
    """One trial: the trial, seconds from the fault to the taker's first event, and whether it kept the rules."""
    question = f"{fault}-{n}-{time.time_ns()}"
    done = trial(hosts, fault, question)
    events = hosts.events(done.session)
    taker = done.then[0] if done.then else None
    resumed = next(
        (body["at"] for _, kind, body in events if kind == "thought" and taker and f" on {taker}" in body["text"]),
        None,
    )
    kept = (
        done.end.get("status") == "done"
        and [k for _, k, _ in events].count("answer") == 1
        and [key for key, _ in hosts.effects_of(question)] == [f"{question}#{i}" for i in range(1, STEPS + 1)]
        and len({seq for seq, _, _ in done.received}) == len(done.received) == len(events)
    )
    return done, (resumed - done.fault_at) if resumed is not None else None, kept


def quantiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return f"{statistics.median(values):5.2f} / {cuts[98]:5.2f} / {max(values):5.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--lease", type=float, default=5.0, help="seconds of a turn's lease (REACTCHAT_LEASE_SECONDS)")
    parser.add_argument("--faults", default="partition,freeze")
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        raise SystemExit(reason)
    hosts = Hosts(lease=args.lease)
    try:
        hosts.start()
        hosts.warm()
        print(f"lease {args.lease:g} s, {args.trials} trials per fault; start: {load()}", flush=True)
        print(f"{'fault':<10} {'what':<9} {'p50 / p99 / max s':>20}  trials kept the rules", flush=True)
        for fault in args.faults.split(","):
            takeovers, resumed, answered, kept = [], [], [], 0
            for n in range(args.trials):
                done, first, ok = run(hosts, fault, n)
                kept += ok
                if done.takeover is not None:
                    takeovers.append(done.takeover)
                if first is not None:
                    resumed.append(first)
                if done.ended_at:
                    answered.append(done.ended_at - done.fault_at)
                time.sleep(hosts.inter * 3)  # the healed host back in the balancer's rotation
            print(f"{fault:<10} {'takeover':<9} {quantiles(takeovers):>20}  {kept}/{args.trials}", flush=True)
            print(f"{'':<10} {'resumed':<9} {quantiles(resumed):>20}", flush=True)
            print(f"{'':<10} {'answered':<9} {quantiles(answered):>20}", flush=True)
        print(f"end: {load()}", flush=True)
    finally:
        hosts.close()


if __name__ == "__main__":
    main()
