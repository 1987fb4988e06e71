"""Run eval cases against an agent, several at once, and report what passed.

Each case runs in a session of its own on the agent's store, so a failed case can be
read afterwards (``reactchat show SESSION``). A case whose run raises fails with the
error recorded; the others go on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from reactchat.agent import Agent
from reactchat.engine.session import RunResult
from reactchat.engine.usage import total
from reactchat.errors import ConfigError
from reactchat.evals.cases import Case
from reactchat.evals.scorers import score
from reactchat.messages import Event


@dataclass
class CaseResult:
    """How one case went: its answer, the verdict, where its session is stored."""

    id: str
    passed: bool
    answer: str | None
    session: str
    seconds: float
    #: tokens, calls, cost and seconds of the case's model calls (``UsageTotal.to_dict``)
    usage: dict[str, Any]
    #: the last turn's status: done, stopped, waiting (a question no answer was scripted for)
    status: str = "done"
    tags: list[str] = field(default_factory=list)
    #: why the case could not run to an answer (a model error, a scorer that raised)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The case's line of the ``--json`` result."""
        out: dict[str, Any] = {
            "id": self.id,
            "passed": self.passed,
            "answer": self.answer,
            "session": self.session,
            "seconds": round(self.seconds, 3),
            "usage": self.usage,
            "status": self.status,
        }
        if self.tags:
            out["tags"] = self.tags
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class EvalReport:
    """The results of an eval, in the order of its cases."""

    cases: list[CaseResult]
    seconds: float

    @property
    def passed(self) -> int:
        """How many cases passed."""
        return sum(c.passed for c in self.cases)

    @property
    def total(self) -> int:
        """How many cases ran."""
        return len(self.cases)

    @property
    def share(self) -> float:
        """The share of cases that passed, 0 to 1."""
        return self.passed / self.total if self.cases else 0.0

    @property
    def tokens(self) -> int:
        """Input and output tokens of every case."""
        return sum(c.usage.get("input_tokens", 0) + c.usage.get("output_tokens", 0) for c in self.cases)

    @property
    def cost(self) -> Decimal | None:
        """USD of every case; None when one case's cost is unknown."""
        costs = [c.usage.get("cost") for c in self.cases]
        if any(c is None for c in costs):
            return None
        return sum((Decimal(str(c)) for c in costs), Decimal(0))

    def by_tag(self) -> dict[str, tuple[int, int]]:
        """Passed and total cases per tag, tags in alphabetical order."""
        counts: dict[str, list[int]] = {}
        for case in self.cases:
            for tag in case.tags:
                row = counts.setdefault(tag, [0, 0])
                row[0] += case.passed
                row[1] += 1
        return {tag: (p, t) for tag, (p, t) in sorted(counts.items())}

    def to_dict(self) -> dict[str, Any]:
        """The documented result file: ``{"passed", "total", "seconds", "cases": [...]}``."""
        return {
            "passed": self.passed,
            "total": self.total,
            "seconds": round(self.seconds, 3),
            "cases": [c.to_dict() for c in self.cases],
        }

    def write(self, path: str | Path) -> None:
        """Write the result file."""
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


class _Conversation:
    """One case's session as its turns go: its id once the first turn made it, and every
    event its turns recorded (each is durable before a run yields it, so these are the
    stored events, kept as they come rather than read back and parsed again)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.session: str | None = None
        self.events: list[Event] = []

    async def send(self, text: str) -> RunResult:
        """One turn: the first makes the session (in the turn lock's own transaction)."""
        run = self.agent.turn(text, self.session)
        try:
            async for event in run:
                self.events.append(event)
        finally:
            # set as soon as the run made the session, so a case that fails still names it
            self.session = run.session or self.session
        assert run.result is not None  # a run that ends without raising has a result
        return run.result


async def run_case(agent: Agent, case: Case) -> CaseResult:
    """Send a case's turns in a new session, answering its questions from ``case.answers``."""
    started = time.perf_counter()
    conversation = _Conversation(agent)
    answers = iter(case.answers)
    result: RunResult | None = None
    error: str | None = None
    try:
        for text in case.input:
            result = await conversation.send(text)
            while result.status == "waiting" and (reply := next(answers, None)) is not None:
                result = await conversation.send(reply)
            if result.status == "waiting":
                break  # a question nobody scripted an answer for: the case fails here
        passed = result is not None and result.status != "waiting" and score(case, result.answer)
    except Exception as exc:  # one broken case must not stop the others; its error is reported
        passed, error = False, f"{type(exc).__name__}: {exc}"
    return CaseResult(
        id=case.id,
        passed=passed,
        answer=result.answer if result is not None else None,
        session=conversation.session or "",
        seconds=time.perf_counter() - started,
        usage=total(conversation.events).to_dict(),
        status=result.status if result is not None else "error",
        tags=case.tags,
        error=error,
    )


async def run_eval(
    agent: Agent,
    cases: Iterable[Case],
    *,
    concurrency: int = 8,
    on_result: Callable[[CaseResult], None] | None = None,
) -> EvalReport:
    """Run ``cases`` on ``agent``, at most ``concurrency`` at once; ``on_result`` sees each
    case as it finishes (a progress bar). The report keeps the cases' order."""
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, not {concurrency}")
    started = time.perf_counter()
    slots = asyncio.Semaphore(concurrency)

    async def one(case: Case) -> CaseResult:
        async with slots:
            done = await run_case(agent, case)
        if on_result is not None:
            on_result(done)
        return done

    results = await asyncio.gather(*(one(case) for case in cases))
    return EvalReport(cases=list(results), seconds=time.perf_counter() - started)
