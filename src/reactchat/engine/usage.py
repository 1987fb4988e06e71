"""Token usage and cost: per model call, per turn, per session and per agent.

Every model call stores its ``Usage`` on the event it produced (a thought, an answer, a
format error), stamped with the model's name. Totals are sums over the stored events of
a turn or a session, whatever agent produced them, so a sub-agent's calls are always in
its parent's totals.

Cost comes from the price table of the ``genai-prices`` package (installed with the
``openai`` and ``anthropic`` extras; it is data shipped in the wheel, read without any
network access). The local model costs 0; a model the table does not know, or any model
when the package is missing, has an *unknown* cost (``None``), never 0.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from reactchat.messages import Event, Reply, Request, Usage, event_seconds, event_usage
from reactchat.messages._fast import trusted

#: characters per token when a server reports no usage (a rough, model-agnostic estimate)
CHARS_PER_TOKEN = 4
#: model spec prefixes that cost nothing: run in-process or scripted
FREE = frozenset({"local", "scripted"})
#: spec prefix → genai-prices provider id
PROVIDERS = {"openai": "openai", "anthropic": "anthropic"}


def estimate(request: Request, reply: Reply, model: str = "") -> Usage:
    """Counts for a call whose server reported none: characters / ``CHARS_PER_TOKEN``, marked
    estimated (and named as ``model``'s)."""
    sent = 0
    for message in request.messages:
        content = getattr(message, "content", None)
        sent += len(content) if isinstance(content, str) else len(getattr(message, "text", ""))
    sent += sum(len(t.description) + len(str(t.input_schema)) for t in request.tools)
    received = len(reply.text) + sum(len(c.name) + len(str(c.input)) for c in reply.tool_calls)
    # counted here, once per model call: not validated again
    values = {
        "input_tokens": -(-sent // CHARS_PER_TOKEN),
        "output_tokens": -(-received // CHARS_PER_TOKEN),
        "evaluated_tokens": None,
        "model": model,
        "estimated": True,
    }
    return trusted(Usage, values)


def measured(model_name: str, request: Request, reply: Reply) -> Usage:
    """The usage of one call as it is stored: the reply's own, else an estimate; stamped with the model."""
    usage = reply.usage
    if usage is None:
        return estimate(request, reply, model_name)
    return usage if usage.model == model_name else usage.stamped(model_name)


def cost(usage: Usage, at: float | None = None) -> Decimal | None:
    """The price in USD of one call's usage at time ``at`` (epoch seconds); None when unknown."""
    provider, _, model = usage.model.partition(":")
    if provider in FREE:
        return Decimal(0)
    provider_id = PROVIDERS.get(provider)
    if provider_id is None or not model:
        return None
    calc = _calc_price()
    if calc is None:
        return None
    # optional: genai-prices (the [openai] and [anthropic] extras), there since ``_calc_price`` found it
    from genai_prices import Usage as PriceUsage

    counts = PriceUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens or None,
    )
    when = datetime.fromtimestamp(at, UTC) if at is not None else None
    try:
        price = calc(counts, model.partition("?")[0], provider_id=provider_id, genai_request_timestamp=when)
    except LookupError:
        return None
    total: Decimal = price.total_price
    return total


@functools.cache
def _calc_price() -> Any:
    """``genai_prices.calc_price``, imported on first use (it takes ~0.2 s); None when not installed."""
    try:
        # optional and slow: genai-prices (the [openai] and [anthropic] extras) takes ~0.2 s to import
        from genai_prices import calc_price
    except ImportError:
        return None
    return calc_price


@dataclass
class UsageTotal:
    """The sum of the model calls of some events (a turn, a session), with their cost."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    #: calls whose counts reactchat estimated because the server gave none
    estimated_calls: int = 0
    #: USD; None as soon as one call's price is unknown
    cost: Decimal | None = Decimal(0)
    #: models of the calls that could not be priced
    unpriced: set[str] = field(default_factory=set)
    #: seconds spent in model calls and tools
    seconds: float = 0.0
    #: the same totals per agent path ("" for the top agent), when sub-agents ran
    agents: dict[str, UsageTotal] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def _count(self, usage: Usage, price: Decimal | None) -> None:
        """Count one model call whose price (``cost``) is known."""
        self.calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.estimated_calls += usage.estimated
        if price is None:
            self.unpriced.add(usage.model or "(unnamed model)")
            self.cost = None
        elif self.cost is not None:
            self.cost += price

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (the HTTP API, ``reactchat show --json``, the page)."""
        out: dict[str, Any] = {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "estimated": self.estimated_calls > 0,
            "estimated_calls": self.estimated_calls,
            "cost": None if self.cost is None else float(self.cost),
            "unpriced": sorted(self.unpriced),
            "seconds": round(self.seconds, 3),
        }
        if len(self.agents) > 1 or any(self.agents.keys() - {""}):
            out["agents"] = {path: total.to_dict() for path, total in self.agents.items()}
        return out


def total(events: Iterable[Event]) -> UsageTotal:
    """Usage of every model call among ``events``, with a breakdown per agent path."""
    result = UsageTotal()
    for event in events:
        seconds = event_seconds(event)
        usage = event_usage(event)
        if not seconds and usage is None:
            continue
        agent = result.agents.get(event.agent)
        if agent is None:  # not made for every event: most belong to an agent already seen
            agent = result.agents[event.agent] = UsageTotal()
        price = cost(usage, event.at) if usage is not None else None  # once for both totals
        for into in (result, agent):
            into.seconds += seconds
            if usage is not None:
                into._count(usage, price)
    return result
