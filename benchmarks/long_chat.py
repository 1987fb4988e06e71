"""A long chat with a fact planted early: is it still answered many turns later?

    python benchmarks/long_chat.py [--model local] [--turns 40] [--window 2048] [--plot PNG] [--store URL]
    python benchmarks/long_chat.py --recall [--model oracle] [--turns 60] [--gaps 5,10,20,40]

The first form plants a fact at turn 3 (``my locker number at the gym is 4187``), fills
the turns after it with ordinary questions and asks about the fact at turn ``turns + 1``,
once with ``compact_at=0.8`` and once without compaction (``history_tokens`` at its
default, a quarter of the window). It prints, for each, whether it answered (the check:
the answer contains ``4187``), whether the fact was in that last prompt at all (so that a
miss says whose it is: the engine's, which dropped it, or the model's, which had it),
the prompt tokens and seconds of every turn, the compaction calls (those stored and those
refused) with their tokens and summaries, and the wall time. Every turn, filler and
summaries included, is answered by ``--model``:
``local`` (the embedded model), any model spec, or ``oracle``, a scripted model that
answers only from what its prompt holds and summarises by keeping every sentence that
says "my" (what an ideal summariser keeps here).

``--recall`` plants facts at several turns ``k`` of one conversation and asks each at
``k + n`` for every gap ``n``, each question in a fork of the session made just before
turn ``k + n`` (so that no question sees another's answer); it prints the share answered
right per gap (the answer contains the fact's value) and how many of those prompts held
the value at all, with and without compaction.

Prompt tokens are the model's own count (the embedded model's tokenizer, via the prompt
llama.cpp evaluated) or, for scripted models, the engine's estimate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compaction import label, plot  # the sibling benchmark's plot (run as a script, benchmarks/ is on the path)
from reactchat import Agent
from reactchat.messages import AnswerEvent, CompactionEvent, Reply, Request, TextPart, Usage, UserEvent
from reactchat.models import Model, resolve_model
from reactchat.models.local import LocalModel
from reactchat.protocols.packs import PACKS

#: ordinary questions that fill the turns between a fact and the question about it
FILLER = [
    "What is the capital of Italy?",
    "Give me a synonym for happy.",
    "How many legs does a spider have?",
    "What colour do you get by mixing blue and yellow?",
    "Name a fruit that is red.",
    "What is the opposite of cold?",
    "How many days are in a week?",
    "What do bees make?",
    "Which planet is closest to the sun?",
    "What is frozen water called?",
    "Name an animal that lives in the sea.",
    "What is the first month of the year?",
    "How many minutes are in an hour?",
    "What do cows drink?",
    "What language is spoken in Brazil?",
    "Which season comes after winter?",
    "What is the tallest animal?",
    "How many sides does a triangle have?",
    "What do you call a baby cat?",
    "Which metal is liquid at room temperature?",
    "What is the largest ocean?",
    "What gas do plants take in?",
    "How many continents are there?",
    "What instrument has 88 keys?",
    "What is the boiling point of water in Celsius?",
    "Which bird is a symbol of peace?",
    "What is the main ingredient of guacamole?",
    "How many hours are in a day?",
    "What shape has four equal sides?",
    "What is the capital of Japan?",
    "Which animal is known as the king of the jungle?",
    "What do caterpillars turn into?",
    "How many players are in a football team?",
    "What is the colour of the sky on a clear day?",
    "Which organ pumps blood?",
    "What is the chemical symbol for gold?",
    "How many wheels does a bicycle have?",
    "What do you use to write on a blackboard?",
    "Which country is famous for the Eiffel Tower?",
    "What is the largest planet?",
]


@dataclass(frozen=True)
class Fact:
    """A fact the user tells, the question about it and what a right answer holds."""

    told: str
    asked: str
    expected: str


FACTS = [
    Fact("By the way, my locker number at the gym is 4187. Please keep that in mind.",
         "What is my locker number at the gym? Answer with the number.", "4187"),
    Fact("Note this: my sister Ingrid lives in Tromsø.", "In which town does my sister Ingrid live?", "Troms"),
    Fact("For later: my bicycle lock code is 2953.", "What is my bicycle lock code?", "2953"),
    Fact("Remember that my dentist appointment is on 14 March.", "On which day is my dentist appointment?", "14"),
    Fact("Keep in mind: my cat is called Pistachio.", "What is my cat called?", "Pistachio"),
    Fact("Note: my flight number is KL1279.", "What is my flight number?", "1279"),
]  # fmt: skip


def filler(n: int) -> str:
    """The ordinary question of turn ``n``."""
    return FILLER[n % len(FILLER)]


# ------------------------------------------------------------------ the scripted oracle

SUMMARIES = {pack.summary_system for pack in PACKS.values()}
MY = re.compile(r"[^.\n]*\bmy\b[^.\n]*\.?", re.I)
WORD = re.compile(r"[a-z0-9ø]+", re.I)


def prompt_text(request: Request) -> str:
    """Everything a request sends, as text."""
    parts = []
    for message in request.messages:
        content = getattr(message, "content", None)
        parts.append(content if isinstance(content, str) else getattr(message, "text", ""))
    return "\n".join(parts)


#: what the oracle says to any other message: about as long as a small model's answer
CHAT = "it is a common question, and the usual answer is the one most people learn at school."


class Oracle:
    """Answers only from its prompt: a question about a fact is answered with the sentence
    of the prompt (before the question) that shares most words with it; a summary keeps
    every sentence that says "my"; any other message is acknowledged."""

    name = "oracle"
    supports_tools = False
    context_tokens: int | None = None

    async def complete(self, request: Request) -> Reply:
        """A summary, an answer from the prompt, or an acknowledgement."""
        text = prompt_text(request)
        usage = Usage(input_tokens=len(text) // 4, output_tokens=10)
        if request.messages[0].content in SUMMARIES:
            kept = dict.fromkeys(s.strip() for s in MY.findall(request.messages[1].content) if "?" not in s)
            return Reply(parts=[TextPart(text=" ".join(kept) or "Small talk.")], usage=usage)
        before, _, question = text.rpartition("Question: ")
        question = question.split("\n", 1)[0]
        asked = "?" in question and " my " in f" {question.lower()}"
        answer = best(before, question) if asked else f"Here is a short answer to that, as well as I know it: {CHAT}"
        return Reply(parts=[TextPart(text=f" I can answer.\nFinal Answer: {answer}")], usage=usage)


def best(prompt: str, question: str) -> str:
    """The sentence of ``prompt`` that says "my" and shares most words with ``question``."""
    wanted = {w.lower() for w in WORD.findall(question)} - {"what", "is", "my", "the", "in", "which", "on", "at"}
    candidates = [s for s in MY.findall(prompt) if "?" not in s]
    scored = max(candidates, key=lambda s: len(wanted & {w.lower() for w in WORD.findall(s)}), default="")
    return scored.strip() if scored and wanted & {w.lower() for w in WORD.findall(scored)} else "I do not know."


# ------------------------------------------------------------------ measuring


class Recording(Oracle):
    """The oracle, keeping the last request it answered."""

    last: Request | None = None

    async def complete(self, request: Request) -> Reply:
        """The oracle's reply; the request is kept when it is a turn's (not a summary's)."""
        if request.messages[0].content not in SUMMARIES:
            self.last = request
        return await super().complete(request)


def model_of(spec: str) -> Model:
    """The model every turn runs on: ``oracle`` or a spec; a local model keeps its last
    turn's request too (``last``), so that the benchmark can say what the prompt held."""
    if spec == "oracle":
        return Recording()
    model = resolve_model(spec)
    if not isinstance(model, LocalModel):
        return model
    local = RecordingLocal(model.path or model.embedded)
    # the loaded model is shared by the process: the KV cache of the previous run would
    # otherwise carry over, and a carried prefix can flip greedy near-ties
    local.reset()
    return local


class RecordingLocal(LocalModel):
    """A local model that keeps the last request of a turn (not of a summary) it answered."""

    last: Request | None = None

    async def complete(self, request: Request) -> Reply:
        """The model's reply; the request is kept when it is a turn's."""
        if request.messages[0].content not in SUMMARIES:
            self.last = request
        return await super().complete(request)


class Refusals(logging.Handler):
    """Counts the summaries compaction asked for and did not store (failed, empty, too long):
    they are model calls too, and no event records them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        """One more refused or failed summary."""
        self.count += 1


def last_prompt(model: Model) -> str:
    """The text of the last turn's request, or "" when the model does not keep it."""
    request = getattr(model, "last", None)
    return prompt_text(request) if request is not None else ""


@dataclass
class Chat:
    """A conversation as it went: its agent and session, and each turn's prompt tokens and seconds."""

    agent: Agent
    session: str
    tokens: list[int]
    seconds: list[float]

    async def say(self, message: str) -> Any:
        """One more turn; its result."""
        started = time.perf_counter()
        result = await self.agent.arun(message, self.session or None)
        self.session = result.session
        self.tokens.append(turn_prompt_tokens(self.agent.model, result.events))
        self.seconds.append(round(time.perf_counter() - started, 1))
        made = sum(isinstance(e, CompactionEvent) for e in result.events)
        print(
            f"turn {len(self.tokens)}: {self.tokens[-1]} prompt tokens, {made} compactions, {self.seconds[-1]} s",
            file=sys.stderr,
        )
        return result


async def chat(
    model: Model, turns: int, window: int, compact_at: float | None, plants: dict[int, Fact], store: str
) -> Chat:
    """One conversation of ``turns`` turns, with ``plants`` told at their turns."""
    agent = Agent(model, store=store, compact_at=compact_at, context_tokens=window, ask_user=False)
    talk = Chat(agent, "", [], [])
    for n in range(1, turns + 1):
        await talk.say(plants[n].told if n in plants else filler(n))
    return talk


def turn_prompt_tokens(model: Model, events: list[Any]) -> int:
    """The prompt tokens of a turn's last model call (its answer)."""
    stats = getattr(model, "last_stats", None)
    if stats is not None:
        return int(stats.prompt_tokens)
    answers = [e for e in events if isinstance(e, AnswerEvent) and e.usage is not None]
    return answers[-1].usage.input_tokens if answers else 0


async def compactions(agent: Agent, session: str) -> dict[str, Any]:
    """The summaries the session stored: how many, their tokens (in and out), seconds, and
    each one's turn, the turns it covers and its text."""
    made = [e for e in await agent.store.events(session) if isinstance(e, CompactionEvent)]
    spent = sum(e.usage.input_tokens + e.usage.output_tokens for e in made if e.usage is not None)
    return {
        "compactions": len(made),
        "compaction_tokens": spent,
        "compaction_seconds": round(sum(e.seconds for e in made), 1),
        "summaries": [{"turn": e.turn, "through_turn": e.through_turn, "summary": e.summary} for e in made],
    }


async def turn3(spec: str, turns: int, window: int, store: str, runs: list[float | None]) -> list[dict[str, Any]]:
    """The fact of turn 3 asked after ``turns`` turns, with compaction on and off."""
    fact = FACTS[0]
    rows = []
    for compact_at in runs:
        model = model_of(spec)
        refusals = Refusals()
        logging.getLogger("reactchat.engine.compaction").addHandler(refusals)
        started = time.perf_counter()
        talk = await chat(model, turns, window, compact_at, {3: fact}, store)
        result = await talk.say(fact.asked)
        logging.getLogger("reactchat.engine.compaction").removeHandler(refusals)
        row = {
            "model": spec,
            "compact_at": compact_at,
            "window": window,
            "session": talk.session,
            "answered": fact.expected in (result.answer or ""),
            "answer": result.answer,
            "fact_in_last_prompt": fact.expected in last_prompt(model) if last_prompt(model) else None,
            "prompt_tokens_per_turn": talk.tokens,
            "seconds_per_turn": talk.seconds,
            **await compactions(talk.agent, talk.session),
            "refused_summaries": refusals.count,
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(row, ensure_ascii=False), flush=True)
        rows.append(row)
        await talk.agent.store.close()
    return rows


async def recall(
    spec: str, turns: int, window: int, gaps: list[int], store: str, runs: list[float | None]
) -> list[dict[str, Any]]:
    """Facts planted at several turns, each asked ``n`` turns later in a fork, for each gap."""
    plants = {2 + i * 7: fact for i, fact in enumerate(FACTS) if 2 + i * 7 <= turns}
    rows = []
    for compact_at in runs:
        model = model_of(spec)
        started = time.perf_counter()
        talk = await chat(model, turns, window, compact_at, plants, store)
        agent, session = talk.agent, talk.session
        events = await agent.store.events(session)
        opening = {e.turn: e.seq for e in events if isinstance(e, UserEvent)}
        scores: dict[int, list[bool]] = {}
        held: dict[int, list[bool]] = {}
        missed: list[dict[str, Any]] = []
        for n in gaps:
            for k, fact in plants.items():
                if k + n > turns:
                    continue
                fork = await agent.fork(session, before=opening[k + n])
                result = await agent.arun(fact.asked, fork)
                scores.setdefault(n, []).append(fact.expected in (result.answer or ""))
                held.setdefault(n, []).append(fact.expected in last_prompt(model))
                if not scores[n][-1]:
                    missed.append({"told_at": k, "gap": n, "answer": result.answer, "in_prompt": held[n][-1]})
        row = {
            "model": spec,
            "compact_at": compact_at,
            "window": window,
            "right_by_gap": {n: f"{sum(s)}/{len(s)}" for n, s in scores.items()},
            "share_right": round(sum(sum(s) for s in scores.values()) / max(1, sum(map(len, scores.values()))), 2),
            "in_prompt_by_gap": {n: f"{sum(s)}/{len(s)}" for n, s in held.items()},
            "missed": missed,
            **{k: v for k, v in (await compactions(agent, session)).items() if k != "summaries"},
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(row, ensure_ascii=False), flush=True)
        rows.append(row)
        await agent.store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local", help="local, oracle or any model spec")
    parser.add_argument("--turns", type=int, default=None, help="40 (60 with --recall)")
    parser.add_argument("--window", type=int, default=2048, help="the agent's context_tokens")
    parser.add_argument("--recall", action="store_true")
    parser.add_argument("--gaps", default="5,10,20,40")
    parser.add_argument("--store", default="memory:", help="where the sessions go (a sqlite:/// URL keeps them)")
    parser.add_argument("--plot", type=Path, default=None, help="the prompt tokens of every turn, as a PNG")
    parser.add_argument("--runs", default="0.8,none", help="the compact_at of each run (none: no compaction)")
    args = parser.parse_args()
    runs = [None if r == "none" else float(r) for r in args.runs.split(",")]
    print(json.dumps({"load_average": os.getloadavg()}), flush=True)
    if args.recall:
        gaps = [int(g) for g in args.gaps.split(",")]
        asyncio.run(recall(args.model, args.turns or 60, args.window, gaps, args.store, runs))
    else:
        rows = asyncio.run(turn3(args.model, args.turns or 40, args.window, args.store, runs))
        series = {f"{args.model}, {label(r['compact_at'], args.window)}": r["prompt_tokens_per_turn"] for r in rows}
        if args.plot is not None and plot(series, args.window, args.plot, unit="the model's count"):
            print(f"plot: {args.plot}")
    print(json.dumps({"load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
