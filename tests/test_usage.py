"""Token usage and cost: what a streamed OpenAI-compatible server reports (or not), priced
from the genai-prices table, summed per turn and per session from the stored events."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from fixtures.replay_server import Canned, ReplayServer, openai_stream, openai_usage
from reactchat import Agent, ScriptedModel, calculator
from reactchat.cli.report import SessionSummary
from reactchat.engine.usage import cost, total
from reactchat.messages import Usage
from reactchat.models.openai import OpenAIModel

ACT = ' I need a 15% markup.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}'
FINAL = " I know it.\nFinal Answer: 92.184"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ReplayServer() as replay:
        yield replay


def streamed(text: str, usage: dict[str, Any] | None) -> Canned:
    """A streamed completion; ``usage=None`` leaves out the usage chunk, as servers that
    ignore ``stream_options`` do."""
    events = openai_stream(pieces=[text[: len(text) // 2], text[len(text) // 2 :]], usage=usage or openai_usage())
    if usage is None:
        events = [e for e in events if not (isinstance(e, dict) and e.get("usage"))]
    return Canned(sse=events)


def agent_on(server: ReplayServer, model: str) -> Agent:
    openai = OpenAIModel(model, api_key="sk-test", base_url=f"{server.url}/v1", backoff=0.001, timeout=5.0)
    return Agent(model=openai, tools=[calculator])


def test_streamed_calls_ask_for_usage_and_the_turn_is_priced_from_the_table(server: ReplayServer) -> None:
    server.push(streamed(ACT, openai_usage(1200, 40, cached=1000)), streamed(FINAL, openai_usage(1300, 12)))
    result = agent_on(server, "gpt-4o-mini").run("What is 80.16 plus 15%?")
    assert result.answer == "92.184"
    assert all(seen.json["stream_options"] == {"include_usage": True} for seen in server.requests)

    calls = [e.usage for e in result.events if getattr(e, "usage", None) is not None]
    assert [(u.input_tokens, u.output_tokens, u.cache_read_tokens) for u in calls] == [(1200, 40, 1000), (1300, 12, 0)]
    assert all(u.model == "openai:gpt-4o-mini" and not u.estimated for u in calls)
    turn = total(result.events)
    priced = [
        PriceUsage(input_tokens=u.input_tokens, output_tokens=u.output_tokens, cache_read_tokens=u.cache_read_tokens)
        for u in calls
    ]
    expected = sum(calc_price(p, "gpt-4o-mini", provider_id="openai").total_price for p in priced)
    assert turn.cost == expected and turn.cost > 0
    assert (turn.calls, turn.input_tokens, turn.output_tokens) == (2, 2500, 52)
    assert result.usage.input_tokens == turn.input_tokens and result.usage.output_tokens == turn.output_tokens


def test_a_server_that_reports_no_usage_gets_an_estimate_marked_as_such(server: ReplayServer) -> None:
    server.push(streamed(ACT, None), streamed(FINAL, None))
    result = agent_on(server, "gpt-4o-mini").run("What is 80.16 plus 15%?")
    calls = [e.usage for e in result.events if getattr(e, "usage", None) is not None]
    assert len(calls) == 2 and all(u.estimated for u in calls)
    # a rough count, never 0: the prompt holds the whole ReAct instructions
    assert all(u.input_tokens > 100 and u.output_tokens > 0 for u in calls)
    view = total(result.events).to_dict()
    assert view["estimated"] is True and view["estimated_calls"] == 2


def test_a_model_the_table_lacks_has_an_unknown_cost_not_zero(server: ReplayServer) -> None:
    server.push(streamed(ACT, openai_usage(300, 20)), streamed(FINAL, openai_usage(350, 8)))
    result = agent_on(server, "my-own-llama-finetune").run("What is 80.16 plus 15%?")
    turn = total(result.events)
    assert turn.cost is None and turn.unpriced == {"openai:my-own-llama-finetune"}
    assert turn.to_dict()["cost"] is None
    assert turn.tokens == 678


def test_the_local_model_and_scripted_replies_cost_nothing() -> None:
    assert cost(Usage(input_tokens=5000, output_tokens=300, model="local:SmolLM2-135M-Instruct.Q4_1")) == Decimal(0)
    assert cost(Usage(input_tokens=10, output_tokens=3, model="scripted")) == Decimal(0)
    assert cost(Usage(input_tokens=10, output_tokens=3, model="")) is None


def test_session_totals_are_the_sum_of_every_stored_call(tmp_path: Any) -> None:
    agent = Agent(model=ScriptedModel([ACT, FINAL, ACT, FINAL]), tools=[calculator], store=f"sqlite:///{tmp_path}/s.db")
    first = agent.run("What is 80.16 plus 15%?")
    second = agent.run("And again?", session=first.session)
    events = [*first.events, *second.events]
    stored = [e.usage for e in events if getattr(e, "usage", None) is not None]
    summary = SessionSummary.of(first.session, events)
    assert summary.usage.calls == len(stored) == 4
    assert summary.usage.output_tokens == sum(u.output_tokens for u in stored)
    assert summary.usage.input_tokens == sum(u.input_tokens for u in stored)
    assert summary.usage.cost == 0 and summary.turns == 2
