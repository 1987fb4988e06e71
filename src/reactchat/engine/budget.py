"""Budgets that pause: ``Agent(budget=Budget(tokens=, cost=, seconds=, tool_calls=))``.

A budget is per turn. What a turn has spent is folded from its events (``Spending``), the
same way after a crash as while it runs: tokens and cost from the usage of every model
call, seconds from the time its model and tool calls took (a turn waiting for the user
spends none; a call to a sub-agent counts the sub-agent's own calls, not itself again),
tool calls from its actions. Sub-agents, plan steps and Reflexion trials record their
events in the same turn, so they draw from what the turn has left: one ``Spending`` is
shared by every run of a turn.

Before each model call the run checks it; a limit reached makes the turn wait
(``pending.kind == "budget"``). ``yes`` grants as much again; anything else asks the model
for its best answer from what it has (``stopped``, reason ``budget``). A tool call made
once the tool-call limit is reached is not run (of a reply's several calls, those past the
limit): its observation says so, and the next check pauses.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from decimal import Decimal

from reactchat.engine.approval import is_yes
from reactchat.engine.usage import cost
from reactchat.errors import ConfigError
from reactchat.messages import (
    Event,
    ObservationEvent,
    Usage,
    UserEvent,
    event_seconds,
    event_usage,
)

#: the call id prefix of a budget question (``budget-1``, ``budget-2``…)
BUDGET = "budget-"


@dataclass(frozen=True)
class Budget:
    """Limits on what one turn may spend: ``tokens`` (input plus output, every model call of the
    turn), ``cost`` (USD, from the price table; an unpriced model under a cost limit is a
    ``ConfigError``), ``seconds`` (time spent in model and tool calls) and ``tool_calls``."""

    tokens: int | None = None
    cost: float | None = None
    seconds: float | None = None
    tool_calls: int | None = None

    def __post_init__(self) -> None:
        for name in ("tokens", "cost", "seconds", "tool_calls"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"Budget({name}=...) must be more than 0, not {value}")

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``tokens=20000,cost=0.1,seconds=60,tool_calls=10`` (the command line's ``--budget``)."""
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, _, value = part.partition("=")
            if name not in ("tokens", "cost", "seconds", "tool_calls"):
                raise ConfigError(f"unknown budget {name!r}: use tokens=, cost=, seconds= or tool_calls=")
            try:
                values[name] = float(value)
            except ValueError:
                raise ConfigError(f"budget {name} must be a number, not {value!r}") from None
        return cls(
            tokens=int(values["tokens"]) if "tokens" in values else None,
            cost=values.get("cost"),
            seconds=values.get("seconds"),
            tool_calls=int(values["tool_calls"]) if "tool_calls" in values else None,
        )

    def within(self, most: Budget | None) -> Budget:
        """This budget, each limit at most ``most``'s (a server-wide maximum)."""
        if most is None:
            return self

        def lower(mine: float | None, cap: float | None) -> float | None:
            return cap if mine is None else mine if cap is None else min(mine, cap)

        tokens, calls = lower(self.tokens, most.tokens), lower(self.tool_calls, most.tool_calls)
        return Budget(
            tokens=None if tokens is None else int(tokens),
            cost=lower(self.cost, most.cost),
            seconds=lower(self.seconds, most.seconds),
            tool_calls=None if calls is None else int(calls),
        )


@dataclass
class Spending:
    """What one turn has spent of its ``budget``, folded from its events (``add``)."""

    budget: Budget
    tokens: int = 0
    #: USD, counted only under a cost limit (pricing a call is the dearest part of a check)
    cost: Decimal = Decimal(0)
    seconds: float = 0.0
    tool_calls: int = 0
    #: times the user granted as much again
    grants: int = 0
    #: the user said no to more: every run of the turn ends with its best answer
    refused: bool = False
    questions: int = 0
    #: the budget question of each run that waits for its reply
    _asked: dict[str, str] = field(default_factory=dict)
    #: the nested runs of the turn seen so far (sub-agents, plan steps, trials)
    _runs: set[str] = field(default_factory=set)
    #: each tool call's place among the turn's, by (run, call id): the calls of one reply are
    #: all recorded before any of them runs, and those within the limit still run
    _numbers: dict[tuple[str, str], int] = field(default_factory=dict)
    #: each limit times ``1 + grants`` (None where unset), made again when the user grants
    #: more rather than at every check; the cost limit as a Decimal
    _limits: tuple[int | None, Decimal | None, float | None, int | None] = field(init=False)

    def __post_init__(self) -> None:
        self._limits = self._times(1)

    def _times(self, times: int) -> tuple[int | None, Decimal | None, float | None, int | None]:
        budget = self.budget
        return (
            None if budget.tokens is None else budget.tokens * times,
            None if budget.cost is None else Decimal(str(budget.cost)) * times,
            None if budget.seconds is None else budget.seconds * times,
            None if budget.tool_calls is None else budget.tool_calls * times,
        )

    @classmethod
    def of(cls, budget: Budget, events: list[Event]) -> Spending:
        """What the turn of ``events`` spent."""
        spending = cls(budget)
        for event in events:
            spending.add(event)
        return spending

    def add(self, event: Event) -> None:
        """Fold one more event of the turn. This runs for every event a run records: it tells
        the kinds apart by their ``type`` tag (an ``isinstance`` of a pydantic model costs
        more), the commonest kinds of a step first."""
        if event.run:
            self._runs.add(event.run)
        if event.type == "observation":
            if _started_run(event) not in self._runs:
                # a call that ran a nested run (a sub-agent) spent its time in that run's calls,
                # each counted already: counting the call too would count that time twice
                self.seconds += event.seconds
        elif event.type == "action":
            self.tool_calls += 1
            self._numbers[(event.run, event.call_id)] = self.tool_calls
        elif event.type == "question":
            if event.kind == "budget":
                self.questions += 1
                self._asked[event.run] = event.call_id
        elif event.type == "user":
            self.replied(event)
        elif event.type == "thought" or event.type == "answer":  # the model calls of a step
            self.spent(event.seconds, event.usage)
        else:  # another model call's event (a plan, a trial, a compaction), or one that spends nothing
            self.spent(event_seconds(event), event_usage(event))

    def spent(self, seconds: float, usage: Usage | None) -> None:
        """Count the time and the usage of one call."""
        self.seconds += seconds
        if usage is not None:
            self.tokens += usage.input_tokens + usage.output_tokens
            if self._limits[1] is not None and not _free(usage.model):
                self.cost += cost(usage) or Decimal(0)

    def replied(self, event: UserEvent) -> None:
        """A user's message of the turn: the reply to a budget question grants or refuses."""
        if event.run in self._asked:
            del self._asked[event.run]
            if is_yes(event.text):
                self.grants += 1
                self._limits = self._times(1 + self.grants)
            else:
                self.refused = True

    def over(self) -> str | None:
        """What is spent of what, for the first limit reached (None while within every one)."""
        tokens, spend, seconds, calls = self._limits
        if tokens is not None and self.tokens >= tokens:
            return f"{self.tokens:,} tokens of {tokens:,}"
        if spend is not None and self.cost >= spend:
            return f"${self.cost:.4f} of ${spend:.4f}"
        if seconds is not None and self.seconds >= seconds:
            return f"{self.seconds:.1f} s of {seconds:g} s"
        if calls is not None and self.tool_calls >= calls:
            return f"{self.tool_calls} tool calls of {calls}"
        return None

    def calls_left(self, run: str, call_id: str) -> bool:
        """Whether tool call ``call_id`` of ``run`` is within the tool-call limit (counted in the
        order the calls were recorded)."""
        limit = self._limits[3]
        return limit is None or self._numbers.get((run, call_id), self.tool_calls) <= limit

    def question(self, spent: str) -> str:
        """The question a run asks when a limit is reached."""
        return (
            f"This turn reached its budget: {spent}. Reply yes to grant as much again, "
            "or no to get the best answer from what it has found so far."
        )

    def next_call_id(self) -> str:
        """The call id of the next budget question of the turn."""
        return f"{BUDGET}{self.questions + 1}"


def _started_run(observation: ObservationEvent) -> str:
    """The id of the nested run the observed call started, if it started one (the rule of
    ``reactchat.orchestration.nested.run_id``: the call id, under the caller's run id)."""
    return f"{observation.run}/{observation.call_id}" if observation.run else observation.call_id


@functools.lru_cache(maxsize=64)
def _priced(model: str) -> bool:
    """Whether the price table knows ``model`` (asked once per model: each run of a turn asks)."""
    return cost(Usage(model=model)) is not None


@functools.lru_cache(maxsize=64)
def _free(model: str) -> bool:
    """Whether calls of ``model`` cost nothing (the local and scripted models): not priced per call."""
    return cost(Usage(input_tokens=1_000_000, output_tokens=1_000_000, model=model)) == 0


def check_priced(budget: Budget | None, model: str) -> None:
    """``ConfigError`` when a cost limit cannot be kept because the model has no known price."""
    if budget is not None and budget.cost is not None and not _priced(model):
        raise ConfigError(
            f"a cost budget needs prices, and the price table has none for {model!r}: "
            "remove the cost limit or use a model the table knows"
        )


__all__ = ["BUDGET", "Budget", "Spending", "check_priced"]
