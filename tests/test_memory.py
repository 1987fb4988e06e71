"""Memory across sessions: remember / recall tools, facts in the prompt, scopes kept apart,
forget, expiry, on every store."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from reactchat import Agent, ConfigError, Memory, ScriptedModel
from reactchat.store import Store, resolve_store

FACT = "The user lives in Lyon and cycles to work."


def remembering(fact: str) -> list[str]:
    return [
        f"Thought: worth keeping\nAction: remember\nAction Input: {json.dumps({'fact': fact})}",
        "Thought: kept\nFinal Answer: noted",
    ]


def recalling(query: str) -> list[str]:
    return [
        f"Thought: look it up\nAction: recall\nAction Input: {json.dumps({'query': query})}",
        "Thought: seen\nFinal Answer: done",
    ]


def prompt(model: ScriptedModel, index: int = -1) -> str:
    return "\n".join(str(m) for m in model.requests[index].messages)


def agent_on(store: Store, scope: str, replies: list[str], **options: object) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies)
    return Agent(model=model, store=store, memory=Memory(scope=scope, **options)), model  # type: ignore[arg-type]


def test_a_fact_remembered_in_one_session_is_in_the_next_sessions_prompt(store_url: str) -> None:
    store = resolve_store(store_url)
    agent, _ = agent_on(store, "user-42", remembering(FACT))
    first = agent.run("I live in Lyon and cycle to work; remember that.")
    facts = asyncio.run(agent.memory.facts()) if agent.memory else []
    assert [f.text for f in facts] == [FACT]
    assert facts[0].session == first.session and abs(facts[0].at - time.time()) < 60
    assert facts[0].scope == "user-42" and facts[0].expires is None

    later, model = agent_on(store, "user-42", ["Thought: I know\nFinal Answer: Lyon"])
    later.run("Which city do I cycle in?")  # a new session
    assert FACT in prompt(model)
    asyncio.run(store.close())


def test_scopes_do_not_see_each_others_facts(store_url: str) -> None:
    store = resolve_store(store_url)
    alice, _ = agent_on(store, "alice", remembering(FACT))
    alice.run("remember where I live")
    bob, model = agent_on(store, "bob", recalling("Lyon cycles"))
    bob.run("Where do I live?")
    assert FACT not in prompt(model, 0)
    assert "Nothing remembered" in prompt(model, 1)
    assert bob.memory is not None and asyncio.run(bob.memory.facts()) == []
    assert alice.memory is not None and asyncio.run(bob.memory.forget(asyncio.run(alice.memory.facts())[0].id)) is False
    assert len(asyncio.run(alice.memory.facts())) == 1  # bob's forget did not reach it
    asyncio.run(store.close())


def test_a_forgotten_fact_never_comes_back(store_url: str) -> None:
    store = resolve_store(store_url)
    agent, _ = agent_on(store, "user-7", remembering(FACT) + remembering("The user's dog is called Pixel."))
    agent.run("remember where I live")
    agent.run("remember my dog")
    assert agent.memory is not None
    lyon = next(f for f in asyncio.run(agent.memory.facts()) if "Lyon" in f.text)
    assert asyncio.run(agent.memory.forget(lyon.id)) is True
    assert asyncio.run(agent.memory.forget(lyon.id)) is False
    assert [f.text for f in asyncio.run(agent.memory.facts())] == ["The user's dog is called Pixel."]
    assert asyncio.run(agent.memory.search("Lyon cycles work", "any-session")) == []
    later, model = agent_on(store, "user-7", recalling("Lyon"))
    later.run("Where do I live? I cycle to work in Lyon")
    assert "Lyon and cycles" not in prompt(model, 0)  # not in the facts put in the prompt
    assert "Nothing remembered" in prompt(model, 1)  # nor found by recall
    asyncio.run(store.close())


def test_facts_expire_after_their_ttl(store_url: str) -> None:
    store = resolve_store(store_url)
    agent, _ = agent_on(store, "brief", remembering(FACT), ttl_days=0.5 / 86_400)  # half a second
    agent.run("remember where I live")
    assert agent.memory is not None
    fact = asyncio.run(agent.memory.facts())[0]
    assert fact.expires == pytest.approx(fact.at + 0.5)
    time.sleep(0.7)
    assert asyncio.run(agent.memory.facts()) == []
    later, model = agent_on(store, "brief", ["Thought: no\nFinal Answer: ?"])
    later.run("Where do I live? Lyon?")
    assert FACT not in prompt(model)
    asyncio.run(store.close())


def test_the_facts_in_the_prompt_stay_within_their_share_of_the_window() -> None:
    store = resolve_store("memory:")
    memory = Memory(scope="many", share=0.01, k=50).on(store)
    for i in range(50):
        asyncio.run(memory.remember(f"Lyon fact number {i}: " + "detail " * 20, "s"))
    model = ScriptedModel(["Thought: ok\nFinal Answer: ok"])
    model.context_tokens = 16_000  # 1 % of it: 160 tokens, about three facts
    Agent(model=model, store=store, memory=memory).run("tell me about Lyon")
    shown = prompt(model).count("Lyon fact number")
    assert 1 <= shown <= 4


def test_recall_ranks_the_matching_fact_first() -> None:
    memory = Memory(scope="ranked").on(resolve_store("memory:"))
    for text in ["The user prefers tea to coffee.", "The user's sister is called Inès.", "The user lives in Lyon."]:
        asyncio.run(memory.remember(text, "s"))
    found = asyncio.run(memory.search("what is my sister called?", "s"))
    assert found[0].text == "The user's sister is called Inès."


def test_one_scope_per_user_takes_the_user_from_the_session_id() -> None:
    store = resolve_store("memory:")
    memory = Memory(scope=None).on(store)
    asyncio.run(memory.remember(FACT, "alice:s1"))
    assert [f.scope for f in asyncio.run(memory.of("alice").facts())] == ["alice"]
    assert asyncio.run(memory.of("bob").facts()) == []
    with pytest.raises(ConfigError, match="one user"):
        asyncio.run(memory.facts())


def test_bad_memory_settings_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="ttl_days"):
        Memory(scope="x", ttl_days=0)
    with pytest.raises(ConfigError, match="share"):
        Memory(scope="x", share=2)
    with pytest.raises(ConfigError, match="non-empty"):
        Memory(scope="")


@pytest.mark.slow  # the embedding model, on torch
def test_embeddings_find_a_paraphrase_and_a_forgotten_fact_is_not_in_their_index(store_url: str) -> None:
    pytest.importorskip("sentence_transformers", reason="dense retrieval needs the embeddings extra")
    store = resolve_store(store_url)
    memory = Memory(scope="dense", embeddings=True).on(store)
    for text in ["The user resides in Lyon.", "The user's sister is called Inès.", "The user prefers tea."]:
        asyncio.run(memory.remember(text, "s"))
    assert asyncio.run(memory.search("which city is my home?", "s", k=1))[0].text == "The user resides in Lyon."
    lyon = next(f for f in asyncio.run(memory.facts()) if "Lyon" in f.text)
    assert lyon.vector is not None and len(lyon.vector) == 384 * 4
    asyncio.run(memory.forget(lyon.id))
    found = asyncio.run(memory.search("which city is my home? Lyon", "s", k=5))
    assert "The user resides in Lyon." not in [f.text for f in found]
    asyncio.run(store.close())
