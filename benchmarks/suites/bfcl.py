"""The Berkeley Function Calling Leaderboard's single-turn categories through reactchat.

    python -m benchmarks.suites.bfcl                       # the sample: 40 simple, 20 of each other
    python -m benchmarks.suites.bfcl --full                # every case of the four categories
    python -m benchmarks.suites.bfcl --full --jsonl run.jsonl --resume   # a long run, in pieces
    python -m benchmarks.suites.bfcl --categories simple --limit 10 --model local --protocol native

Data and scorer come from the ``bfcl-eval`` wheel (``pip install 'reactchat[suites]'``;
nothing is fetched): the questions and function docs of ``simple`` (Python), ``multiple``,
``parallel`` and ``irrelevance``, the possible answers, and BFCL's own AST checker. Each
BFCL function becomes a reactchat tool with its JSON schema that records the call and
ends the turn (``return_direct``): the first action of the agent is its answer. A case
passes when the checker accepts the recorded call; an ``irrelevance`` case passes when the
agent calls no function. The sample is deterministic: the first cases of each file.

A long run (``--full`` takes hours on a small CPU) goes through the categories side by side,
each at the same share of its file, and ``--jsonl`` writes each case's verdict as it is
known: stopped at any point, every category holds a complete sample (the first cases of its
file); ``--resume`` runs only the cases that file does not hold yet and reports all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactchat import Agent
from reactchat.evals import Case, EvalReport, run_case
from reactchat.evals.runner import CaseResult
from reactchat.models import resolve_model
from reactchat.store import resolve_store
from reactchat.tools._schema import SchemaTool, json_schema_check

FILES = {
    "simple": "BFCL_v4_simple_python.json",
    "multiple": "BFCL_v4_multiple.json",
    "parallel": "BFCL_v4_parallel.json",
    "irrelevance": "BFCL_v4_irrelevance.json",
}
SAMPLE = {"simple": 40, "multiple": 20, "parallel": 20, "irrelevance": 20}
#: what a recorded call's answer starts with (a plain answer is text)
CALLED = "CALLED "
#: BFCL's parameter types that JSON Schema spells otherwise
TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def data_dir() -> Path:
    """The data folder of the installed ``bfcl-eval`` wheel."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise SystemExit("the BFCL suite needs the bfcl-eval wheel: pip install 'reactchat[suites]'")
    return Path(spec.origin).parent / "data"


def ast_checker() -> Any:
    """BFCL's own AST checker.

    Its module imports ``constants.model_config``, which imports every provider handler of
    the leaderboard (torch, vllm-era pins such as numpy==1.26.4): that one module is replaced
    by a table that says reactchat's tool names spell a function's dots as underscores.
    """

    @dataclass
    class Config:
        underscore_to_dot: bool = True

    table = types.ModuleType("bfcl_eval.constants.model_config")
    table.MODEL_CONFIG_MAPPING = {"reactchat": Config()}  # type: ignore[attr-defined]
    sys.modules.setdefault("bfcl_eval.constants.model_config", table)
    from bfcl_eval.eval_checker.ast_eval import ast_checker as module

    return module


def json_schema(node: Any) -> Any:
    """A BFCL parameter description as JSON Schema (its ``dict``/``float``/``tuple`` types)."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: json_schema(value) for key, value in node.items() if key not in ("type", "optional")}
    kind = node.get("type")
    if isinstance(kind, str):
        mapped = TYPES.get(kind, kind)
        if mapped is not None:
            out["type"] = mapped
    return out


def recording_tool(function: dict[str, Any]) -> SchemaTool:
    """A tool for one BFCL function: it records the call as the turn's answer."""
    name = function["name"].replace(".", "_")
    schema = json_schema(function["parameters"])
    schema.setdefault("properties", {})

    async def record(arguments: dict[str, Any]) -> str:
        return CALLED + json.dumps({name: arguments})

    return SchemaTool(
        record,
        name=name,
        description=function.get("description", ""),
        input_schema=schema,
        check=json_schema_check(schema),
        return_direct=True,
        effect="read",
    )


def load(category: str, limit: int | None) -> list[tuple[dict[str, Any], list[Any] | None]]:
    """The first ``limit`` entries of a category with their possible answers (None: irrelevance)."""
    folder = data_dir()
    entries = [json.loads(line) for line in (folder / FILES[category]).read_text().splitlines() if line.strip()]
    entries = entries[:limit] if limit else entries
    answers: dict[str, Any] = {}
    if category != "irrelevance":
        lines = (folder / "possible_answer" / FILES[category]).read_text().splitlines()
        answers = {a["id"]: a["ground_truth"] for a in map(json.loads, filter(str.strip, lines))}
    return [(entry, answers.get(entry["id"])) for entry in entries]


def verdict(category: str, entry: dict[str, Any], truth: list[Any] | None, answer: str | None) -> bool:
    """Whether BFCL's checker accepts the agent's answer to ``entry``."""
    called = answer is not None and answer.startswith(CALLED)
    if category == "irrelevance":
        return not called
    if not called:
        return False
    assert answer is not None
    checker = ast_checker()
    result = checker.ast_checker(
        entry["function"], [json.loads(answer[len(CALLED) :])], truth, checker.Language.PYTHON, category, "reactchat"
    )
    return bool(result["valid"])


async def run(args: argparse.Namespace) -> list[tuple[str, CaseResult, bool]]:
    model = resolve_model(args.model)
    store = resolve_store(args.db)
    try:
        return await each_case(args, model, store)
    finally:
        await store.close()


Entry = tuple[str, dict[str, Any], list[Any] | None]


def side_by_side(categories: dict[str, list[tuple[dict[str, Any], list[Any] | None]]]) -> list[Entry]:
    """Every category's cases in one order that walks each file at the same pace.

    A case's place is its index over its file's length, so a run cut short holds the first
    cases of every file in proportion to its size.
    """
    placed = [
        (index / len(entries), category, entry, truth)
        for category, entries in categories.items()
        for index, (entry, truth) in enumerate(entries)
    ]
    placed.sort(key=lambda item: item[0])
    return [(category, entry, truth) for _, category, entry, truth in placed]


def recorded(path: str | None) -> dict[str, tuple[str, CaseResult, bool]]:
    """The verdicts a ``--jsonl`` file holds, by case id."""
    if path is None or not Path(path).exists():
        return {}
    done: dict[str, tuple[str, CaseResult, bool]] = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            done[row["id"]] = (row["tags"][0], CaseResult(**row), bool(row["passed"]))
    return done


async def each_case(args: argparse.Namespace, model: Any, store: Any) -> list[tuple[str, CaseResult, bool]]:
    """Run the chosen cases one at a time (the embedded model uses every core): category, result, verdict."""
    chosen = {c: load(c, None if args.full else (args.limit or SAMPLE[c])) for c in args.categories}
    before = recorded(args.jsonl) if args.resume else {}
    done: list[tuple[str, CaseResult, bool]] = []
    for category, entry, truth in side_by_side(chosen):
        if entry["id"] in before:
            done.append(before[entry["id"]])
            continue
        question = "\n".join(turn["content"] for turn in entry["question"][0] if turn["role"] == "user")
        tools = [recording_tool(f) for f in entry["function"]]
        agent = Agent(model=model, tools=tools, protocol=args.protocol, store=store, max_steps=2, ask_user=False)
        result = await run_case(agent, Case(id=entry["id"], input=[question], scorer="exact", expected=""))
        passed = verdict(category, entry, truth, result.answer)
        done.append((category, result, passed))
        print(f"{entry['id']}: {'pass' if passed else 'FAIL'} {result.answer!r:.160}", file=sys.stderr, flush=True)
        if args.jsonl:
            row = {**result.to_dict(), "passed": passed, "tags": [category]}
            with open(args.jsonl, "a") as out:
                out.write(json.dumps(row) + "\n")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local")
    parser.add_argument("--protocol", choices=["react", "native"], default="react")
    parser.add_argument("--categories", nargs="+", choices=list(FILES), default=list(FILES))
    parser.add_argument("--limit", type=int, help="cases per category (default: the sample)")
    parser.add_argument("--full", action="store_true", help="every case of each category")
    parser.add_argument("--json", metavar="OUT", help="write the eval result file")
    parser.add_argument("--jsonl", metavar="OUT", help="append each case's verdict to OUT as it is known")
    parser.add_argument("--resume", action="store_true", help="skip the cases the --jsonl file holds")
    parser.add_argument("--db", default="memory:", help="store the cases' sessions here (for reactchat show)")
    args = parser.parse_args()
    started = time.perf_counter()
    done = asyncio.run(run(args))  # sessions on the default memory: store go with the process
    wall = time.perf_counter() - started
    print(f"BFCL through reactchat: model {args.model}, protocol {args.protocol}, load {os.getloadavg()[0]:.1f}")
    for category in args.categories:
        rows = [passed for c, _, passed in done if c == category]
        print(f"  {category}: {sum(rows)}/{len(rows)} ({sum(rows) / max(1, len(rows)):.1%})")
    steps = sum(r.usage.get("calls", 0) for _, r, _ in done)
    print(f"{len(done)} cases, {steps} model calls, {wall:.0f} s ({wall / max(1, steps):.1f} s a call)")
    if args.json:
        results = [CaseResult(**{**r.__dict__, "passed": passed, "tags": [category]}) for category, r, passed in done]
        EvalReport(cases=results, seconds=wall).write(args.json)


if __name__ == "__main__":
    main()
