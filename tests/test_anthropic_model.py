"""AnthropicModel against a real HTTP server replaying the Messages API's documented shapes.

Every test goes through the official ``anthropic`` SDK over a loopback socket; retries
are counted from the requests the server saw.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.replay_server import (
    Canned,
    ReplayServer,
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    load,
)
from reactchat import Agent, ModelError, calculator, tool
from reactchat.messages import AssistantMessage, Request, SystemMessage, TextPart, ToolSpec, UserMessage
from reactchat.models import ContextTooLong, resolve_model
from reactchat.models.anthropic import AnthropicModel, from_spec
from reactchat.react import Action, parse


@tool
def web_search(query: str) -> str:
    """Search the web and return the top result."""
    return "Roses cost 80.16 yuan a bunch in Beijing this week."


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with ReplayServer() as replay:
        yield replay


def make(server: ReplayServer, name: str = "claude-haiku-4-5", **options: Any) -> AnthropicModel:
    options.setdefault("api_key", "sk-ant-test")
    options.setdefault("backoff", 0.001)
    options.setdefault("timeout", 5.0)
    options.setdefault("stream", False)
    return AnthropicModel(name, base_url=server.url, **options)


def text(value: str, stop: str = "end_turn") -> Canned:
    return Canned(body=anthropic_message([{"type": "text", "text": value}], stop))


def tool_use(*calls: tuple[str, str, dict[str, Any]], say: str = "") -> Canned:
    content: list[dict[str, Any]] = [{"type": "text", "text": say}] if say else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": v} for i, n, v in calls]
    return Canned(body=anthropic_message(content, "tool_use"))


def authorized(headers: dict[str, str], key: str) -> bool:
    # older SDKs send x-api-key, newer ones a bearer token
    return headers.get("x-api-key") == key or headers.get("authorization") == f"Bearer {key}"


def react_request(scratchpad: str = "Thought:") -> Request:
    return Request(
        messages=[
            SystemMessage(content="Answer with tools."),
            UserMessage(content="Question: What is 2+2?"),
            AssistantMessage(parts=[TextPart(text=scratchpad)], prefill=True),
        ],
        stop=["\nObservation:"],
    )


# ------------------------------------------------------------------ text ReAct


async def test_text_react_uses_native_prefill_without_trailing_whitespace(server: ReplayServer) -> None:
    server.push(text(' I must add.\nAction: calculator\nAction Input: {"expression": "2+2"}', "stop_sequence"))
    reply = await make(server).complete(react_request("Thought: \n"))
    step = parse(reply.text)
    assert isinstance(step, Action) and step.input == {"expression": "2+2"}
    assert reply.stop_reason == "stop_sequence"
    sent = server.requests[0]
    assert sent.path == "/v1/messages" and authorized(sent.headers, "sk-ant-test")
    assert sent.json["system"] == "Answer with tools."
    assert sent.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Question: What is 2+2?"}]},
        {"role": "assistant", "content": "Thought:"},
    ]
    assert sent.json["stop_sequences"] == ["\nObservation:"]
    assert sent.json["max_tokens"] == 4096


async def test_a_model_that_refuses_prefill_gets_the_scratchpad_in_the_user_message(server: ReplayServer) -> None:
    refusal = anthropic_error(
        "invalid_request_error",
        "This model does not support assistant message prefill. The conversation must end with a user message.",
    )
    server.push(Canned(400, refusal), text(" Easy.\nFinal Answer: 4"), text("Thought: Still easy.\nFinal Answer: 4"))
    model = make(server, "claude-3-7-sonnet-latest")
    assert (await model.complete(react_request())).text == " Easy.\nFinal Answer: 4"
    assert (await model.complete(react_request())).text == " Still easy.\nFinal Answer: 4"
    assert len(server.requests) == 3  # one refusal, then the user form is remembered
    server.push(text(" Yes.\nFinal Answer: 4"))
    await make(server, "claude-3-7-sonnet-latest").complete(
        react_request()
    )  # a new object for the same model: no second refusal
    assert len(server.requests) == 4 and server.requests[3].json["messages"][-1]["role"] == "user"
    for sent in server.requests[1:]:
        assert sent.json["messages"][-1]["role"] == "user"
        assert sent.json["messages"][-1]["content"][-1]["text"] == "Question: What is 2+2?\nThought:"


async def test_claude_4_6_and_later_get_the_scratchpad_in_the_user_message_at_once(server: ReplayServer) -> None:
    server.push(text(" Easy.\nFinal Answer: 4"))
    assert (await make(server, "claude-opus-4-7").complete(react_request())).text == " Easy.\nFinal Answer: 4"
    assert len(server.requests) == 1
    assert server.requests[0].json["messages"][-1]["role"] == "user"


# ------------------------------------------------------------------ native calls


async def test_native_tool_use_from_the_documented_response(server: ReplayServer) -> None:
    server.push(Canned(body=load("anthropic_tool_use.json")))
    spec = ToolSpec(name="get_weather", description="Weather for a city.", input_schema={"type": "object"})
    reply = await make(server).complete(Request(messages=[UserMessage(content="Weather in SF?")], tools=[spec]))
    assert reply.text == "I'll check the current weather in San Francisco for you."
    assert [(c.id, c.name, c.input) for c in reply.tool_calls] == [
        ("toolu_01A09q90qw90lq917835lq9", "get_weather", {"location": "San Francisco, CA", "unit": "celsius"})
    ]
    assert reply.stop_reason == "tool_use"
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (384, 76)
    assert server.requests[0].json["tools"] == [
        {"name": "get_weather", "description": "Weather for a city.", "input_schema": {"type": "object"}}
    ]


async def test_native_agent_parallel_results_in_one_user_message_in_call_order(server: ReplayServer) -> None:
    server.push(
        tool_use(("toolu_a", "calculator", {"expression": "2*3"}), ("toolu_b", "calculator", {"expression": "10/4"})),
        text("6 and 2.5."),
    )
    result = await Agent(model=make(server), tools=[calculator], protocol="native").arun("2*3 and 10/4?")
    assert result.answer == "6 and 2.5."
    messages = server.requests[1].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"] == ["toolu_a", "toolu_b"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "6"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "2.5"},
    ]


async def test_a_failed_call_is_an_error_result_and_the_best_effort_call_has_no_tool_blocks(
    server: ReplayServer,
) -> None:
    server.push(tool_use(("toolu_1", "calculator", {"expression": "1/0"})), text("It cannot be computed."))
    result = await Agent(model=make(server), tools=[calculator], protocol="native", max_steps=1).arun("1/0?")
    assert result.status == "stopped" and result.answer == "It cannot be computed."
    final = server.requests[1].json
    assert "tools" not in final  # the API refuses tool blocks without tools: they become text
    blocks = [b for m in final["messages"] for b in m["content"]]
    assert all(b["type"] == "text" for b in blocks)
    assert any("[called calculator with" in b["text"] for b in blocks)
    assert any(b["text"].startswith("[calculator returned] Error") for b in blocks)


async def test_a_failed_call_reaches_claude_as_an_error_result(server: ReplayServer) -> None:
    server.push(tool_use(("toolu_1", "calculator", {"expression": "1/0"})), text("It cannot be computed."))
    result = await Agent(model=make(server), tools=[calculator], protocol="native").arun("1/0?")
    assert result.status == "done" and result.steps[0].is_error
    results = [b for m in server.requests[1].json["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [(b["tool_use_id"], b.get("is_error")) for b in results] == [("toolu_1", True)]


# ------------------------------------------------------------------ streaming


async def test_streaming_the_documented_sse_body(server: ReplayServer) -> None:
    server.push(Canned(body=load("anthropic_stream_hello.sse"), content_type="text/event-stream"))
    deltas: list[str] = []
    reply = await make(server, stream=True, on_delta=deltas.append).complete(
        Request(messages=[UserMessage(content="Hi")])
    )
    assert deltas == ["Hello", "!"] and reply.text == "Hello!" and reply.stop_reason == "end"
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (25, 15)
    assert server.requests[0].json["stream"] is True


async def test_streaming_parallel_tool_use_with_fragmented_and_broken_input(server: ReplayServer) -> None:
    blocks = [
        {"text": ["Computing", " both."]},
        {"tool_use": ("toolu_a", "calculator", ['{"expre', 'ssion": "2*3"}'])},
        {"tool_use": ("toolu_b", "calculator", ['{"expression": 7'])},
        {"tool_use": ("toolu_c", "ask_user", [])},
    ]
    server.push(Canned(sse=anthropic_stream(blocks, "tool_use")))
    reply = await make(server, stream=True).complete(Request(messages=[UserMessage(content="?")]))
    assert reply.text == "Computing both."
    assert [(c.id, c.input) for c in reply.tool_calls] == [
        ("toolu_a", {"expression": "2*3"}),
        ("toolu_b", '{"expression": 7'),
        ("toolu_c", {}),
    ]
    assert reply.stop_reason == "tool_use"


@pytest.mark.parametrize("protocol", ["react", "native"])
def test_rose_price_scenario_through_the_agent_streaming(server: ReplayServer, protocol: str) -> None:
    if protocol == "react":
        steps = [
            ' Find the price.\nAction: web_search\nAction Input: {"query": "rose price"}',
            ' Add 15%.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}',
            " I now know the final answer.\nFinal Answer: 92.184 yuan",
        ]
        server.push(*[Canned(sse=anthropic_stream([{"text": [s[:9], s[9:]]}], "stop_sequence")) for s in steps])
    else:
        server.push(
            Canned(sse=anthropic_stream([{"tool_use": ("t1", "web_search", ['{"query": "rose price"}'])}], "tool_use")),
            Canned(
                sse=anthropic_stream([{"tool_use": ("t2", "calculator", ['{"expression": "80.16*1.15"}'])}], "tool_use")
            ),
            Canned(sse=anthropic_stream([{"text": ["A bunch costs ", "92.184 yuan."]}])),
        )
    agent = Agent(model=make(server, stream=True), tools=[web_search, calculator], protocol=protocol)  # type: ignore[arg-type]
    result = agent.run("How much would roses cost with a 15% markup?")
    assert result.status == "done" and "92.184" in (result.answer or "")
    assert [s.tool for s in result.steps[:2]] == ["web_search", "calculator"]
    assert result.steps[1].observation == "92.184"
    assert "80.16 yuan" in json.dumps(server.requests[2].json["messages"])
    assert result.usage.input_tokens == 75


# ------------------------------------------------------------------ errors


async def ask(model: AnthropicModel) -> str:
    return (await model.complete(Request(messages=[UserMessage(content="Hi")]))).text


async def test_401_says_which_key_to_set_and_is_not_retried(server: ReplayServer) -> None:
    server.push(Canned(401, anthropic_error("authentication_error", "invalid x-api-key")))
    with pytest.raises(ModelError, match=r"ANTHROPIC_API_KEY") as caught:
        await ask(make(server))
    assert "invalid x-api-key" in str(caught.value) and len(server.requests) == 1


async def test_404_names_the_model(server: ReplayServer) -> None:
    server.push(Canned(404, anthropic_error("not_found_error", "model: claude-haiku-4-5")))
    with pytest.raises(ModelError, match=r"no model 'claude-haiku-4-5'"):
        await ask(make(server))
    assert len(server.requests) == 1


async def test_overloaded_529_and_rate_limit_are_retried(server: ReplayServer) -> None:
    server.push(
        Canned(529, anthropic_error("overloaded_error", "Overloaded")),
        Canned(429, anthropic_error("rate_limit_error", "Number of request tokens has exceeded your rate limit")),
        text("fine"),
    )
    assert await ask(make(server)) == "fine"
    assert len(server.requests) == 3


async def test_overloaded_gives_up_after_the_bound(server: ReplayServer) -> None:
    server.push(*[Canned(529, anthropic_error("overloaded_error", "Overloaded")) for _ in range(4)])
    with pytest.raises(ModelError, match=r"\(529\): Overloaded.*gave up after 4 attempts"):
        await ask(make(server))
    assert len(server.requests) == 4


async def test_timeout_is_retried(server: ReplayServer) -> None:
    server.push(Canned(body=anthropic_message([]), delay=1.0), text("on time"))
    assert await ask(make(server, timeout=0.3)) == "on time"
    assert len(server.requests) == 2


async def test_prompt_too_long_is_context_too_long(server: ReplayServer) -> None:
    server.push(
        Canned(400, anthropic_error("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"))
    )
    with pytest.raises(ContextTooLong, match="prompt is too long"):
        await ask(make(server))
    assert len(server.requests) == 1


async def test_other_400_is_not_retried(server: ReplayServer) -> None:
    server.push(Canned(400, anthropic_error("invalid_request_error", "max_tokens: must be at least 1")))
    with pytest.raises(ModelError, match=r"\(400\): max_tokens: must be at least 1"):
        await ask(make(server))
    assert len(server.requests) == 1


# ------------------------------------------------------------------ configuration


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelError, match="set ANTHROPIC_API_KEY"):
        resolve_model("anthropic:claude-sonnet-4-6")


async def test_key_from_the_environment_and_spec_options(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.push(text("hi"))
    model = resolve_model("anthropic:claude-haiku-4-5?max_tokens=256&stream=false")
    assert isinstance(model, AnthropicModel) and model.max_tokens == 256
    assert await ask(model) == "hi"
    assert authorized(server.requests[0].headers, "sk-ant-env")
    assert server.requests[0].json["max_tokens"] == 256
    with pytest.raises(ValueError, match="unknown model option"):
        from_spec("claude?top_k=3")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(ImportError, match=r"pip install 'reactchat\[anthropic\]'"):
        AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test")


async def test_an_error_event_before_any_text_is_retried(server: ReplayServer) -> None:
    broken = anthropic_stream([{"text": ["never sent"]}])[:2]  # message_start, ping
    broken.append(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    server.push(Canned(sse=broken), Canned(sse=anthropic_stream([{"text": ["Second ", "try."]}])))
    assert await ask(make(server, stream=True)) == "Second try."
    assert len(server.requests) == 2


async def test_an_error_event_after_text_is_not_retried(server: ReplayServer) -> None:
    events = anthropic_stream([{"text": ["Half a"]}])[:5]  # up to the first text delta
    events.append(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    server.push(Canned(sse=events), Canned(sse=anthropic_stream([{"text": ["again"]}])))
    deltas: list[str] = []
    with pytest.raises(ModelError, match="stream broke after 6 characters"):
        await ask(make(server, stream=True, on_delta=deltas.append))
    assert deltas == ["Half a"] and len(server.requests) == 1


async def test_an_auth_token_alone_is_enough(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "oauth-token")
    server.push(text("hi"))
    model = AnthropicModel("claude-sonnet-4-6", base_url=server.url, stream=False)
    assert await ask(model) == "hi"
    assert server.requests[0].headers["authorization"] == "Bearer oauth-token"


def test_the_adapter_module_does_not_import_the_sdk() -> None:
    code = "import reactchat, reactchat.models.anthropic, sys; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
