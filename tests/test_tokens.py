"""Token counts: the embedded model's own tokenizer, a ratio learned from reported usage
(kept in the store), and earlier turns as a share of the window."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.engine import tokens
from reactchat.messages import Reply, Request, TextPart, Usage
from reactchat.models.local import LocalModel
from reactchat.store import resolve_store

FINAL = "Thought: done\nFinal Answer: ok"


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    tokens.forget_calibration()
    yield
    tokens.forget_calibration()


def reporting(chars_per_token: float, name: str = "remote-x") -> ScriptedModel:
    """A model whose 'server' reports input tokens at ``chars_per_token`` characters each."""

    def reply(request: Request) -> Reply:
        sent = tokens.request_chars(request)
        usage = Usage(input_tokens=round(sent / chars_per_token), output_tokens=3)
        return Reply(parts=[TextPart(text=FINAL)], stop_reason="end", usage=usage)

    return ScriptedModel([reply] * 20, name=name)


def test_the_embedded_model_counts_with_its_own_tokenizer() -> None:
    model = LocalModel("smollm2-135m", n_threads=1)
    text = "Bonjour, où est la gare de Lyon-Part-Dieu ? 80.16 × 1.15 = 92.184"
    counted = tokens.count(model, text)
    runtime = model._runtime()
    assert counted == len(runtime.llama.tokenize(text.encode(), add_bos=False, special=False))
    assert counted != -(-len(text) // 4)  # not the characters / 4 estimate
    assert model.trained_context == 8192  # SmolLM2's GGUF says so
    assert tokens.window(model) == model.context_tokens == model.n_ctx


def test_a_remote_model_is_calibrated_from_reported_usage(store_url: str) -> None:
    store = resolve_store(store_url)
    text = "x" * 1000
    assert tokens.count(reporting(2.0), text) == 250  # nothing reported yet: 4 characters a token
    agent = Agent(model=reporting(2.0), store=store)
    for _ in range(3):
        agent.run("how many tokens is a long question like this one, with its tools and instructions?")
    assert tokens.ratio("remote-x") == pytest.approx(2.0, rel=0.05)
    assert tokens.count(reporting(2.0), text) == pytest.approx(500, rel=0.05)
    # a new process starts from what the store kept
    tokens.forget_calibration()
    asyncio.run(tokens.load(store, "remote-x"))
    assert tokens.ratio("remote-x") == pytest.approx(2.0, rel=0.05)
    asyncio.run(store.close())


def test_estimated_usage_teaches_nothing() -> None:
    agent = Agent(model=ScriptedModel([FINAL] * 3, name="plain"))
    for _ in range(3):
        agent.run("a question " * 40)
    assert tokens.ratio("plain") == tokens.CHARS_PER_TOKEN


def test_earlier_turns_fill_a_share_of_the_window_by_default() -> None:
    model = ScriptedModel([], name="w")
    model.context_tokens = 8000
    assert tokens.history_chars(model, None, 16_000) == 8000 * tokens.HISTORY_SHARE * 4
    assert tokens.history_chars(model, None, 4000) == 4000 * tokens.HISTORY_SHARE * 4  # the agent's own limit
    assert tokens.history_chars(model, 100, 16_000) == 400  # an int still means tokens


def test_the_default_history_keeps_more_turns_on_a_larger_window() -> None:
    def kept(window: int) -> int:
        model = ScriptedModel([FINAL] * 40, name=f"win-{window}")
        model.context_tokens = window
        agent = Agent(model=model)
        session = None
        for i in range(30):
            session = agent.run(f"turn {i}: " + "words " * 60, session=session).session
        prompt = model.requests[-1].messages
        return " ".join(str(m) for m in prompt).count("words words")

    assert kept(2000) < kept(16_000)
