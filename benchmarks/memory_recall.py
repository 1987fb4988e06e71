"""Recall of facts planted in earlier sessions, asked in a new one.

    python benchmarks/memory_recall.py [--facts 10] [--fillers 40] [--local N] [--embeddings]

A scope's memory holds ``--facts`` planted facts ("The user's locker code is 4417.") among
``--fillers`` other facts, each remembered by a turn of its own session (a scripted
``remember`` call). Then, in a fresh session per fact, the question about it is asked
("What is my locker code?"); a question is answered right when the answer contains the
planted value. Two answerers:

* **oracle**: a scripted model that answers with the value if the prompt carries the fact
  (what memory puts in the prompt: the retrieval alone is measured);
* **embedded**: the embedded local model (``--local N`` of the questions, 0 to skip), which
  must read the fact from its instructions or call ``recall``.

Prints the share answered right for each, the seconds per question and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time

from reactchat import Agent, Memory, ScriptedModel
from reactchat.messages import Request
from reactchat.store import resolve_store

PLANTED = [
    ("locker code", "4417"),
    ("sister's name", "Inès"),
    ("favourite tea", "oolong"),
    ("dog's name", "Pixel"),
    ("bike colour", "teal"),
    ("home town", "Besançon"),
    ("dentist", "Dr Okafor"),
    ("car plate", "GZ-318-KT"),
    ("allergy", "peanuts"),
    ("wifi password", "kiwi-lantern-9"),
    ("team's name", "Blue Herons"),
    ("manager", "Priya"),
]
FILLERS = [
    "The user once visited {} in spring.",
    "The user thinks {} is overrated.",
    "The user read a book about {} last year.",
    "The user wants to learn more about {}.",
]
TOPICS = ["Kyoto", "jazz", "sourdough", "chess", "Lisbon", "rowing", "origami", "volcanoes", "Mahler", "Rust"]


def fillers(count: int) -> list[str]:
    return [FILLERS[i % len(FILLERS)].format(TOPICS[i // len(FILLERS) % len(TOPICS)] + f" #{i}") for i in range(count)]


def plant(store: object, scope: str, facts: list[str]) -> None:
    """Each fact remembered by one turn of its own session, through the remember tool."""
    for fact in facts:
        script = [
            f"Thought: keep it\nAction: remember\nAction Input: {json.dumps({'fact': fact})}",
            "Thought: kept\nFinal Answer: noted",
        ]
        Agent(model=ScriptedModel(script), store=store, memory=Memory(scope=scope)).run(f"Remember: {fact}")  # type: ignore[arg-type]


def oracle(value: str, thing: str) -> ScriptedModel:
    def answer(request: Request) -> str:
        text = "\n".join(str(getattr(m, "content", "") or m) for m in request.messages)
        found = re.search(rf"{re.escape(thing)} is ([^.(]+)", text)
        return f"Thought: from memory\nFinal Answer: {found.group(1).strip() if found else 'I do not know'}"

    return ScriptedModel([answer])


def ask(store: object, scope: str, model: object, thing: str, embeddings: bool) -> str:
    memory = Memory(scope=scope, embeddings=embeddings)
    agent = Agent(model=model, store=store, memory=memory, ask_user=False, max_steps=3)  # type: ignore[arg-type]
    return agent.run(f"What is my {thing}?").answer or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10)
    parser.add_argument("--fillers", type=int, default=40)
    parser.add_argument("--local", type=int, default=5, help="questions put to the embedded model (0: none)")
    parser.add_argument("--embeddings", action="store_true", help="fuse embeddings with BM25")
    args = parser.parse_args()
    planted = PLANTED[: args.facts]
    store = resolve_store("memory:")
    plant(store, "bench", [f"The user's {thing} is {value}." for thing, value in planted] + fillers(args.fillers))
    results: dict[str, tuple[int, int, float]] = {}
    started = time.perf_counter()
    right = sum(value in ask(store, "bench", oracle(value, thing), thing, args.embeddings) for thing, value in planted)
    results["oracle"] = (right, len(planted), time.perf_counter() - started)
    if args.local:
        from reactchat.models.local import LocalModel  # llama.cpp loads only when asked for

        model = LocalModel(n_threads=1, max_tokens=64)
        started = time.perf_counter()
        asked = planted[: args.local]
        right = sum(
            value.lower() in ask(store, "bench", model, thing, args.embeddings).lower() for thing, value in asked
        )
        results["embedded"] = (right, len(asked), time.perf_counter() - started)
    for name, (right, total, seconds) in results.items():
        print(f"{name:9s} {right}/{total} answered right ({right / total:.0%}), {seconds / total:.2f} s a question")
    print(f"{args.facts} planted facts among {args.fillers} others; load average {os.getloadavg()[0]:.1f}")
    asyncio.run(store.close())


if __name__ == "__main__":
    main()
