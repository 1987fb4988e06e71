"""Prompt tokens per turn across a long conversation, with and without compaction, and
what compaction costs (model calls and tokens per 100 turns).

    python benchmarks/compaction.py [--turns 200] [--window 4000] [--plot docs/compaction.png]

A scripted model stands in for the LLM: each turn plants a fact (``remember code N is X``),
a summary request is answered with every fact of the request written short (``N=X``).
Tokens are the engine's estimate (4 characters a token). Each run prints its largest
prompt, its summary calls and their tokens per 100 turns, and how many of the planted
facts its last prompt still holds (whole or in the summary). The plot is written when
matplotlib is installed. The embedded model on a long chat: ``benchmarks/long_chat.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

from reactchat import Agent
from reactchat.engine.tokens import HISTORY_SHARE
from reactchat.messages import AssistantMessage, CompactionEvent, Reply, Request, TextPart, Usage
from reactchat.protocols.packs import PACKS

FACT = re.compile(r"code (\d+) is (\d+)|\b(\d+)=(\d+)\b")


def prompt_tokens(request: Request) -> int:
    """What a request sends, in the engine's estimated tokens."""
    chars = 0
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            chars += sum(len(p.text) for p in message.parts if isinstance(p, TextPart))
        else:
            chars += len(message.content)
    return chars // 4


class Oracle:
    """Acknowledges each fact; summarises by writing every fact of the request short."""

    name = "oracle"
    supports_tools = False
    context_tokens: int | None = None

    def __init__(self) -> None:
        self.prompts: list[int] = []
        self.last = ""
        self.summary_calls = 0
        self.summary_tokens = 0

    async def complete(self, request: Request) -> Reply:
        """A summary, or the acknowledgement of a turn's fact."""
        tokens = prompt_tokens(request)
        if request.messages[0].content == PACKS["en"].summary_system:
            facts = {(a or c): (b or d) for a, b, c, d in FACT.findall(request.messages[1].content)}
            text = " ".join(f"{n}={v}" for n, v in facts.items())
            self.summary_calls += 1
            self.summary_tokens += tokens + len(text) // 4
            return Reply(parts=[TextPart(text=text)], usage=Usage(input_tokens=tokens, output_tokens=len(text) // 4))
        self.prompts.append(tokens)
        self.last = "\n".join(getattr(m, "content", "") for m in request.messages)
        question = request.messages[1].content.rsplit("Question: ", 1)[-1]
        return Reply(parts=[TextPart(text=f" Noted.\nFinal Answer: noted: {question.split('remember ')[-1]}")])


async def conversation(turns: int, window: int, compact_at: float | None) -> dict[str, Any]:
    """One conversation of ``turns`` turns; the prompt of each and the compactions' cost."""
    oracle = Oracle()
    agent = Agent(oracle, compact_at=compact_at, context_tokens=window, ask_user=False)
    session = None
    for n in range(1, turns + 1):
        session = (await agent.arun(f"remember code {n} is {(n * 7919) % 100_000}", session)).session
    assert session is not None
    events = await agent.store.events(session)
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    last = compactions[-1].summary if compactions else ""
    return {
        "compact_at": compact_at,
        "prompt_tokens": oracle.prompts,
        "max_prompt_tokens": max(oracle.prompts),
        "compactions": len(compactions),
        "summary_calls_per_100_turns": round(oracle.summary_calls * 100 / turns, 2),
        "summary_tokens_per_100_turns": round(oracle.summary_tokens * 100 / turns),
        "facts_in_last_summary": len(FACT.findall(last)),
        "facts_in_last_prompt": len({a or c for a, _, c, _ in FACT.findall(oracle.last)}),
    }


def plot(series: dict[str, list[int]], window: int, path: Path, unit: str = "estimated") -> bool:
    """The prompt tokens of every turn, one line per labelled run; False without matplotlib.
    ``benchmarks/long_chat.py`` plots the embedded model's with it."""
    try:
        import matplotlib  # optional: the plot is extra (pip install matplotlib)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(7, 3.5))
    for label, prompts in series.items():
        axes.plot(range(1, len(prompts) + 1), prompts, label=label)
    axes.axhline(window, color="grey", linestyle="--", label=f"window ({window} tokens)")
    axes.set_xlabel("turn")
    axes.set_ylabel(f"prompt tokens ({unit})")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return True


def label(compact_at: float | None, window: int) -> str:
    """How a run is named in the plot."""
    return f"compact_at={compact_at}" if compact_at else f"no compaction (history {int(window * HISTORY_SHARE)} tokens)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=4000)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()
    print(json.dumps({"turns": args.turns, "window": args.window, "load_average": os.getloadavg()}))
    runs = [asyncio.run(conversation(args.turns, args.window, at)) for at in (None, 0.8)]
    for run in runs:
        print(json.dumps({k: v for k, v in run.items() if k != "prompt_tokens"}))
    if args.plot is not None and plot(
        {label(run["compact_at"], args.window): run["prompt_tokens"] for run in runs}, args.window, args.plot
    ):
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
