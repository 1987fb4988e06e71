"""τ²-bench's airline and retail domains through reactchat.

    python -m benchmarks.suites.tau2                          # replay every task's known-correct actions
    python -m benchmarks.suites.tau2 --domains airline --tasks 0 5 12 --protocol react
    python -m benchmarks.suites.tau2 --agent --limit 3        # the embedded model as the agent

Tasks, domain databases, policies and tools come from the ``inspect-evals`` package
(``pip install 'reactchat[suites]'``; nothing is fetched). Each domain tool is a reactchat
tool acting on that task's own copy of the domain database: the tau2 method does the work,
the model sees tau2's own description of it.

*Replay* tests the engine, no model needed: a scripted model sends each task's known-correct
actions as tool calls, one a step, through the real Agent, loop and store. A task passes
when the stored session holds exactly those calls, each observation is what the same call
returns when applied to a fresh database directly, the turn ends ``done``, and the database
the agent acted on is then the same (tau2's hash) as the one the actions were applied to.

*Agent* runs a model (the embedded default unless ``--model``) as the customer-service agent
with the domain policy as its system prompt and a scripted user: the first message is the
task's reason for calling and what the user knows, later turns and questions are answered
with a plain confirmation. A task passes as tau2 scores it: the final database equals the
expected one and every piece of information the task says must be communicated was.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

from benchmarks.suites import agent_model

from reactchat import Agent, ScriptedModel
from reactchat.evals import Case, run_case
from reactchat.messages import ActionEvent, ObservationEvent, Reply, TextPart, ToolCallPart
from reactchat.store import resolve_store
from reactchat.tools import Tool

DOMAINS = ("airline", "retail")
#: tools that only read the database (every other tau2 tool writes to it)
READS = ("get_", "search_", "list_", "find_", "calculate")
#: what the scripted user answers to anything the agent asks or proposes
CONFIRM = "Yes, please go ahead."
#: observations are compared whole, so the engine must not cut them
NO_CUT = 10_000_000


@functools.cache
def tau2() -> SimpleNamespace:
    """What this adapter uses of ``inspect-evals`` (and of ``inspect-ai``, which it is built on)."""
    with warnings.catch_warnings():
        # inspect-evals' own metadata models use pydantic's v1-style validators
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            from inspect_ai.tool import ToolError
            from inspect_ai.util._store import Store
            from inspect_evals.tau2.airline import tools as airline
            from inspect_evals.tau2.airline.AirlineAgentTools import AirlineAgentTools
            from inspect_evals.tau2.data_model.tasks import Task
            from inspect_evals.tau2.retail import tools as retail
            from inspect_evals.tau2.retail.RetailAgentTools import RetailAgentTools
            from inspect_evals.tau2.utils import TAU2_DATA_DIR
        except ImportError as exc:
            raise SystemExit(f"τ²-bench needs inspect-evals: scripts/setup.sh installs it ({exc})") from None
    return SimpleNamespace(
        ToolError=ToolError,
        Store=Store,
        Task=Task,
        data=TAU2_DATA_DIR / "domains",
        databases={"airline": AirlineAgentTools, "retail": RetailAgentTools},
        tools={"airline": airline.all_airline_tools, "retail": retail.all_retail_tools},
    )


def tasks(domain: str) -> list[Any]:
    """The domain's tasks as tau2's ``Task`` models, in file order."""
    raw = json.loads((tau2().data / domain / "tasks.json").read_text())
    return [tau2().Task.model_validate(item) for item in raw]


def actions(task: Any) -> list[Any]:
    """A task's known-correct actions (none for a task whose right answer is to refuse)."""
    criteria = task.evaluation_criteria
    return list(criteria.actions or []) if criteria is not None else []


def database(domain: str) -> Any:
    """A fresh copy of the domain database behind tau2's tool methods, in a store of its own."""
    db = tau2().databases[domain](store=tau2().Store(), instance=domain)
    db.initialize()
    return db


def described(domain: str) -> dict[str, Callable[..., Any]]:
    """tau2's tool functions of a domain by name: their signatures and docstrings are what the model sees."""
    return {make.__name__: make() for make in tau2().tools[domain]}


def domain_tools(domain: str, db: Any) -> list[Tool]:
    """The domain's tools as reactchat tools acting on ``db``.

    tau2 describes each tool by a function that looks the database up in the current
    evaluation's store; here the same signature and docstring call the method of ``db``
    directly, so that every task (and every case run side by side) has its own database.
    ``calculate`` and ``transfer_to_human_agents`` touch no database and run as they are.
    """
    out: list[Tool] = []
    for name, function in described(domain).items():
        method = getattr(db, name, None)
        call = function if method is None else on(method, function)
        if name.startswith(READS):
            # a read of a database the agent's own calls change: the same call may rightly
            # give another answer later in the turn, so a repeat runs again (tau2's own
            # trajectories read an order again before they change it)
            out.append(Tool(call, name=name, effect="read", volatile=True))
        else:
            out.append(Tool(call, name=name))
    return out


def on(method: Callable[..., Any], function: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` with the signature and docstring of tau2's ``function`` (a sync call)."""

    def call(**arguments: Any) -> Any:
        return method(**arguments)

    return functools.update_wrapper(call, function)


@dataclass
class Outcome:
    """What one call returned: its text, or the error it raised."""

    text: str
    is_error: bool = False


def apply(domain: str, calls: list[Any]) -> tuple[Any, list[Outcome]]:
    """Apply the actions to a fresh database directly, as tau2's scorer builds the expected state."""
    db = database(domain)
    tools = {t.name: t for t in domain_tools(domain, db)}
    outcomes: list[Outcome] = []
    for action in calls:
        tool = tools[action.name]
        try:
            value = tool.fn(**tool.check(action.arguments))
            value = asyncio.run(value) if asyncio.iscoroutine(value) else value
            outcomes.append(Outcome(value if isinstance(value, str) else json.dumps(value)))
        except tau2().ToolError as error:
            outcomes.append(Outcome(str(error), is_error=True))
    return db, outcomes


def script(calls: list[Any], protocol: str) -> ScriptedModel:
    """A model that sends ``calls`` one a step, then ends the turn."""
    replies: list[str | Reply] = []
    for index, action in enumerate(calls):
        if protocol == "native":
            part = ToolCallPart(id=f"call_{index}", name=action.name, input=action.arguments)
            replies.append(Reply(parts=[part], stop_reason="tool_use"))
        else:
            replies.append(
                f"Thought: step {index + 1} of the procedure.\n"
                f"Action: {action.name}\nAction Input: {json.dumps(action.arguments)}"
            )
    done = "Everything you asked for is done."
    replies.append(
        Reply(parts=[TextPart(text=done)], stop_reason="end") if protocol == "native" else f"Final Answer: {done}"
    )
    return ScriptedModel(replies)


@dataclass
class Replayed:
    """How one task's replay went."""

    domain: str
    task: str
    calls: int
    #: the expected database differs from the initial one (the task writes)
    writes: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """Every check held."""
        return not self.problems


async def replay(
    domain: str, task: Any, store: Any, protocol: str = "native", expected: list[Any] | None = None
) -> Replayed:
    """Send a task's known-correct actions through the engine and compare with applying them
    directly (``expected``: other actions to compare with, for a test that the check can fail)."""
    started = time.perf_counter()
    calls = actions(task)
    wanted = actions(task) if expected is None else expected
    applied, outcomes = await asyncio.to_thread(apply, domain, wanted)
    db = await asyncio.to_thread(database, domain)
    initial = db.db.get_hash()
    agent = Agent(
        model=script(calls, protocol),
        tools=domain_tools(domain, db),
        protocol=protocol,  # type: ignore[arg-type]
        store=store,
        max_steps=len(calls) + 1,
        ask_user=False,
        max_observation_chars=NO_CUT,
    )
    session = await store.create_session()
    result = await agent.arun(task.user_scenario.instructions.reason_for_call, session)
    events = await store.events(session)
    made = [(e.tool, e.input) for e in events if isinstance(e, ActionEvent)]
    seen = [e for e in events if isinstance(e, ObservationEvent)]
    wanted_hash = applied.db.get_hash()
    done = Replayed(domain, task.id, len(wanted), writes=wanted_hash != initial)
    if result.status != "done":
        done.problems.append(f"the turn ended {result.status} ({result.reason or result.answer!r:.200})")
    if made != [(a.name, a.arguments) for a in wanted]:
        done.problems.append(f"calls {made} != the task's {[(a.name, a.arguments) for a in wanted]}")
    for index, (observation, outcome) in enumerate(zip(seen, outcomes, strict=False)):
        same = outcome.text in observation.text if outcome.is_error else observation.text == outcome.text
        if not same or observation.is_error != outcome.is_error:
            done.problems.append(
                f"call {index} ({observation.tool}): observed {observation.text[:300]!r}, "
                f"applied directly it gives {outcome.text[:300]!r}"
            )
    if len(seen) != len(outcomes):
        done.problems.append(f"{len(seen)} observations for {len(outcomes)} calls")
    if db.db.get_hash() != wanted_hash:
        done.problems.append("the database differs from the one the actions were applied to directly")
    done.seconds = time.perf_counter() - started
    return done


def covering(domain: str) -> list[Any]:
    """A fixed subset of the domain's tasks that uses every tool the tasks use and repeats a call.

    In file order, a task is taken when it calls a tool no task taken so far calls, or when it
    makes the same call twice (a read after a write) and no taken task does yet.
    """
    chosen: list[Any] = []
    tools: set[str] = set()
    repeats = False
    for task in tasks(domain):
        calls = actions(task)
        names = {a.name for a in calls}
        keys = [(a.name, json.dumps(a.arguments, sort_keys=True)) for a in calls]
        repeated = len(keys) != len(set(keys))
        if names - tools or (repeated and not repeats):
            chosen.append(task)
            tools |= names
            repeats = repeats or repeated
    return chosen


@dataclass
class Played:
    """How the agent did on one task, scored as tau2 scores it."""

    domain: str
    task: str
    db_match: bool
    communicated: bool
    status: str
    calls: list[str]
    answer: str | None
    session: str
    seconds: float
    model_calls: int

    @property
    def passed(self) -> bool:
        """tau2's verdict for the airline and retail domains: both checks."""
        return self.db_match and self.communicated


def policy(domain: str) -> str:
    """The domain policy, the agent's system prompt in tau2."""
    return (tau2().data / domain / "policy.txt").read_text(encoding="utf-8")


async def play(domain: str, task: Any, model: Any, store: Any, protocol: str, turns: int) -> Played:
    """Run ``model`` as the agent on one task with the scripted user."""
    started = time.perf_counter()
    expected, _ = await asyncio.to_thread(apply, domain, actions(task))
    db = await asyncio.to_thread(database, domain)
    agent = Agent(
        model=model,
        tools=domain_tools(domain, db),
        protocol=protocol,  # type: ignore[arg-type]
        store=store,
        system=policy(domain),
        max_steps=8,
    )
    scenario = task.user_scenario.instructions
    first = f"{scenario.reason_for_call.strip()}\n{(scenario.known_info or '').strip()}".strip()
    case = Case(id=task.id, input=[first] + [CONFIRM] * (turns - 1), answers=[CONFIRM] * 4, scorer="exact", expected="")
    result = await run_case(agent, case)
    events = await store.events(result.session)
    said = " ".join(e.text for e in events if getattr(e, "type", "") == "answer").lower().replace(",", "")
    info = list(task.evaluation_criteria.communicate_info or []) if task.evaluation_criteria else []
    return Played(
        domain=domain,
        task=task.id,
        db_match=db.db.get_hash() == expected.db.get_hash(),
        communicated=all(item.lower() in said for item in info),
        status=result.status,
        calls=[f"{e.tool}({json.dumps(e.input)[:120]})" for e in events if isinstance(e, ActionEvent)],
        answer=result.answer,
        session=result.session,
        seconds=time.perf_counter() - started,
        model_calls=int(result.usage.get("calls", 0)),
    )


def chosen(args: argparse.Namespace, domain: str) -> list[Any]:
    """The tasks named on the command line, or the first ``--limit``, or all."""
    every = tasks(domain)
    if args.tasks:
        return [t for t in every if t.id in set(args.tasks)]
    return every[: args.limit] if args.limit else every


def save(path: str, rows: list[Any], started: float) -> None:
    """Write every task's result so far (a long run stopped early keeps what it did)."""
    tasks = [{**asdict(r), "passed": r.passed} for r in rows]
    with open(path, "w") as out:
        json.dump({"seconds": round(time.perf_counter() - started, 1), "tasks": tasks}, out, indent=1)


async def run(args: argparse.Namespace) -> list[Any]:
    started = time.perf_counter()
    store = resolve_store(args.db)
    model = agent_model(args.model, args.n_ctx) if args.agent else None
    out: list[Any] = []
    try:
        for domain in args.domains:
            for task in chosen(args, domain):
                if args.agent:
                    row: Any = await play(domain, task, model, store, args.protocol, args.turns)
                else:
                    row = await replay(domain, task, store, args.protocol)
                out.append(row)
                if args.json:
                    save(args.json, out, started)
                mark = "pass" if row.passed else "FAIL"
                print(f"{domain} {task.id}: {mark} {getattr(row, 'problems', '') or ''}", file=sys.stderr, flush=True)
    finally:
        await store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", nargs="+", choices=DOMAINS, default=list(DOMAINS))
    parser.add_argument("--tasks", nargs="+", metavar="ID", help="these task ids only")
    parser.add_argument("--limit", type=int, help="the first N tasks of each domain")
    parser.add_argument("--agent", action="store_true", help="run a model as the agent instead of the replay")
    parser.add_argument("--model", default="local", help="the agent's model (with --agent)")
    parser.add_argument("--protocol", choices=["react", "native"], default=None)
    parser.add_argument("--turns", type=int, default=3, help="user messages per task (with --agent)")
    parser.add_argument("--n-ctx", type=int, default=16384, help="context of an embedded model, in tokens")
    parser.add_argument("--db", default="memory:", help="store the sessions here (for reactchat show)")
    parser.add_argument("--json", metavar="OUT", help="write every task's result")
    args = parser.parse_args()
    args.protocol = args.protocol or ("react" if args.agent else "native")
    tau2()
    started = time.perf_counter()
    rows = asyncio.run(run(args))
    wall = time.perf_counter() - started
    what = f"agent {args.model}" if args.agent else "replay of the known-correct actions"
    print(f"τ²-bench through reactchat: {what}, protocol {args.protocol}, load {os.getloadavg()[0]:.1f}")
    for domain in args.domains:
        mine = [r for r in rows if r.domain == domain]
        print(f"  {domain}: {sum(r.passed for r in mine)}/{len(mine)} passed")
    print(f"{len(rows)} tasks in {wall:.0f} s")


if __name__ == "__main__":
    main()
