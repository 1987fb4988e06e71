"""The OpenAI-compatible endpoint, driven by the official ``openai`` SDK against a real uvicorn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from server_support import make_app, running


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with running(make_app(token="tok")) as url:
        yield url


@pytest.fixture
def client(base: str) -> Iterator[OpenAI]:
    with OpenAI(base_url=f"{base}/v1", api_key="tok", max_retries=0, timeout=20) as c:
        yield c


def ask(client: OpenAI, messages: list[dict[str, str]], **extra: Any) -> tuple[str, str, dict[str, Any]]:
    """content, reasoning, reactchat extra."""
    completion = client.chat.completions.create(model="rules", messages=messages, **extra)  # type: ignore[arg-type]
    message = completion.choices[0].message
    assert message.role == "assistant"
    assert completion.choices[0].finish_reason == "stop"
    return message.content or "", getattr(message, "reasoning_content", ""), completion.model_extra["reactchat"]


def ask_streaming(
    client: OpenAI, messages: list[dict[str, str]], **extra: Any
) -> tuple[str, list[str], dict[str, Any]]:
    """content, reasoning deltas, reactchat extra of the last chunk."""
    content, reasoning, last = "", [], {}
    for chunk in client.chat.completions.create(model="rules", messages=messages, stream=True, **extra):  # type: ignore[call-overload]
        delta = chunk.choices[0].delta
        content += delta.content or ""
        if getattr(delta, "reasoning_content", None):
            reasoning.append(delta.reasoning_content)
        if chunk.model_extra and "reactchat" in chunk.model_extra:
            last = chunk.model_extra["reactchat"]
    return content, reasoning, last


def test_models_lists_the_served_model(client: OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["rules"]


def test_a_plain_completion_answers_with_the_reasoning_beside_it(client: OpenAI) -> None:
    content, reasoning, extra = ask(client, [{"role": "user", "content": "compute 80.16 * 1.15"}])
    assert content == "92.184"
    assert reasoning.splitlines() == [
        "Thought: Use the calculator.",
        "Action: calculator",
        'Action Input: {"expression": "80.16 * 1.15"}',
        "Observation: 92.184",
        "Thought: I know it.",
    ]
    assert extra["status"] == "done"
    assert extra["session"].startswith("oa-")


def test_a_streamed_completion_sends_each_step_then_the_answer(client: OpenAI) -> None:
    content, reasoning, extra = ask_streaming(client, [{"role": "user", "content": "stream compute 6*7"}])
    assert content == "42"
    assert reasoning[0] == "Thought: Use the calculator.\n"
    assert reasoning[2] == "Observation: 42\n"
    assert extra["status"] == "done"


@pytest.mark.parametrize("streaming", [False, True])
def test_a_question_is_the_reply_and_the_next_message_answers_it(client: OpenAI, streaming: bool) -> None:
    call = ask_streaming if streaming else ask
    history = [{"role": "user", "content": f"How far is Paris? ({streaming})"}]
    content, _, extra = call(client, history)
    assert content == "Where are you?"
    assert extra["status"] == "waiting"
    history += [{"role": "assistant", "content": content}, {"role": "user", "content": "Lyon"}]
    content, _, resumed = call(client, history)
    assert content == "From Lyon, Paris is 400 km away."
    assert resumed["status"] == "done"
    assert resumed["session"] == extra["session"], "the answer resumes the paused run"
    assert resumed["turn"] == 1


def test_two_questions_in_one_turn(client: OpenAI) -> None:
    history = [{"role": "user", "content": "two questions please"}]
    first, _, extra = ask(client, history)
    assert first == "Which city?"
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": "Lyon"}]
    second, _, _ = ask(client, history)
    assert second == "Which unit?"
    history += [{"role": "assistant", "content": second}, {"role": "user", "content": "km"}]
    answer, _, done = ask(client, history)
    assert answer == "Lyon in km"
    assert done["session"] == extra["session"]


def test_a_new_turn_gets_the_earlier_exchanges_as_history(base: str, client: OpenAI) -> None:
    history = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "compute 2+3"},
        {"role": "assistant", "content": "5"},
        {"role": "user", "content": "and now?"},
    ]
    raw = client.chat.completions.with_raw_response.create(model="rules", messages=history)  # type: ignore[arg-type]
    session = raw.headers["x-session-id"]
    assert raw.parse().choices[0].message.content == "echo: and now?"
    view = httpx.get(f"{base}/v1/sessions/{session}", headers={"Authorization": "Bearer tok"}).json()
    assert view["history"] == [["compute 2+3", "5"], ["and now?", "echo: and now?"]]


def test_the_same_conversation_twice_gets_two_sessions(client: OpenAI) -> None:
    messages = [{"role": "user", "content": "How far is Paris? (twice)"}]
    _, _, first = ask(client, messages)
    _, _, second = ask(client, messages)
    assert first["session"] != second["session"]
    assert second["session"] == first["session"] + "-2"
    messages += [{"role": "assistant", "content": "Where are you?"}, {"role": "user", "content": "Lille"}]
    _, _, answered = ask(client, messages)
    _, _, answered_twin = ask(client, messages)
    assert {answered["session"], answered_twin["session"]} == {first["session"], second["session"]}


def test_an_explicit_session_keeps_the_history_on_the_server(client: OpenAI) -> None:
    session = {"session_id": "explicit-openai-1"}
    content, _, extra = ask(client, [{"role": "user", "content": "How far is Paris?"}], metadata=session)
    assert content == "Where are you?"
    assert extra["session"] == "explicit-openai-1"
    content, _, extra = ask(client, [{"role": "user", "content": "Brest"}], extra_body=session)
    assert content == "From Brest, Paris is 400 km away."


def test_errors_reach_the_sdk_with_their_message(base: str, client: OpenAI) -> None:
    with (
        OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0) as intruder,
        pytest.raises(openai.AuthenticationError, match="bearer token"),
    ):
        intruder.models.list()
    with pytest.raises(openai.UnprocessableEntityError, match="no user message with text"):
        client.chat.completions.create(model="rules", messages=[{"role": "assistant", "content": "hi"}])
    with pytest.raises(openai.UnprocessableEntityError, match="messages"):
        client.chat.completions.create(model="rules", messages=[])
    with pytest.raises(openai.APIStatusError, match="told to fail") as failed:
        client.chat.completions.create(model="rules", messages=[{"role": "user", "content": "fail now"}])
    assert failed.value.status_code == 502
    with pytest.raises(openai.APIError, match="told to fail"):
        for _ in client.chat.completions.create(
            model="rules", messages=[{"role": "user", "content": "fail streaming"}], stream=True
        ):
            pass


def test_a_malformed_explicit_session_id_is_refused(client: OpenAI) -> None:
    with pytest.raises(openai.UnprocessableEntityError, match="session id"):
        client.chat.completions.create(
            model="rules", messages=[{"role": "user", "content": "hi"}], extra_headers={"X-Session-Id": "../../etc"}
        )


def test_a_system_message_that_changes_per_request_does_not_lose_the_question(client: OpenAI) -> None:
    history = [
        {"role": "system", "content": "Today is Monday."},
        {"role": "user", "content": "How far is Paris? (sys)"},
    ]
    asked, _, extra = ask(client, history)
    history = [{"role": "system", "content": "Today is Tuesday."}, *history[1:]]
    history += [{"role": "assistant", "content": asked}, {"role": "user", "content": "Metz"}]
    answer, _, resumed = ask(client, history)
    assert answer == "From Metz, Paris is 400 km away."
    assert resumed["session"] == extra["session"]


def test_streaming_usage_comes_in_a_last_chunk_without_choices(client: OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="rules",
            messages=[{"role": "user", "content": "compute 1+2"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == chunks[-1].usage.prompt_tokens + chunks[-1].usage.completion_tokens
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "3"
