"""OpenAIModel against a real HTTP server replaying the API's documented response shapes.

Every test goes through the official ``openai`` SDK over a loopback socket; retries are
counted from the requests the server saw.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.replay_server import (
    Canned,
    ReplayServer,
    load,
    openai_call,
    openai_completion,
    openai_error,
    openai_stream,
    openai_usage,
)
from reactchat import Agent, ModelError, calculator, tool
from reactchat.messages import AssistantMessage, Request, SystemMessage, TextPart, ToolSpec, UserMessage
from reactchat.models import ContextTooLong, resolve_model
from reactchat.models._http_prefill import continuation
from reactchat.models.openai import OpenAIModel, from_spec
from reactchat.react import Action, FinalAnswer, parse


@tool
def web_search(query: str) -> str:
    """Search the web and return the top result."""
    return "Roses cost 80.16 yuan a bunch in Beijing this week."


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ReplayServer() as replay:
        yield replay


def make(server: ReplayServer, **options: Any) -> OpenAIModel:
    options.setdefault("api_key", "sk-test")
    options.setdefault("backoff", 0.001)
    options.setdefault("timeout", 5.0)
    options.setdefault("stream", False)
    return OpenAIModel("gpt-4o-mini", base_url=f"{server.url}/v1", **options)


def react_request(scratchpad: str = "Thought:") -> Request:
    return Request(
        messages=[
            SystemMessage(content="Answer with tools."),
            UserMessage(content="Question: What is 2+2?"),
            AssistantMessage(parts=[TextPart(text=scratchpad)], prefill=True),
        ],
        stop=["\nObservation:"],
    )


CALC = ToolSpec(name="calculator", description="Evaluate arithmetic.", input_schema={"type": "object"})


# ------------------------------------------------------------------ text ReAct


async def test_text_react_appends_the_scratchpad_to_the_user_message(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion(' I must add.\nAction: calculator\nAction Input: {"expression": "2+2"}')))
    reply = await make(server).complete(react_request())
    step = parse(reply.text)
    assert isinstance(step, Action) and step.input == {"expression": "2+2"}
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json["messages"] == [
        {"role": "system", "content": "Answer with tools."},
        {"role": "user", "content": "Question: What is 2+2?\nThought:"},
    ]
    assert sent.json["stop"] == ["\nObservation:"]
    assert "tools" not in sent.json


async def test_text_react_strips_a_repeated_scratchpad_and_label(server: ReplayServer) -> None:
    scratchpad = (
        'Thought: I must add.\nAction: calculator\nAction Input: {"expression": "2+2"}\nObservation: 4\nThought:'
    )
    echoed = scratchpad + " I know it now.\nFinal Answer: 4"
    server.push(
        Canned(body=openai_completion(echoed)), Canned(body=openai_completion("Thought: Easy.\nFinal Answer: 4"))
    )
    model = make(server)
    first = parse((await model.complete(react_request(scratchpad))).text)
    assert first == FinalAnswer(answer="4", thought="I know it now.", raw=" I know it now.\nFinal Answer: 4")
    second = await model.complete(react_request(scratchpad))
    assert second.text == " Easy.\nFinal Answer: 4"


async def test_text_react_cuts_at_the_stop_sequence_when_the_server_ignores_it(server: ReplayServer) -> None:
    server.push(
        Canned(body=openai_completion(" Add.\nAction: calculator\nAction Input: {}\nObservation: 5\nThought: x"))
    )
    reply = await make(server).complete(react_request())
    assert reply.text == " Add.\nAction: calculator\nAction Input: {}"
    assert reply.stop_reason == "stop_sequence"


async def test_assistant_prefill_mode_sends_the_scratchpad_as_an_assistant_message(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion(" Done.\nFinal Answer: 4")))
    reply = await make(server, prefill="assistant").complete(react_request())
    assert reply.text == " Done.\nFinal Answer: 4"
    assert server.requests[0].json["messages"][-1] == {"role": "assistant", "content": "Thought:"}


# ------------------------------------------------------------------ native calls


async def test_native_tool_call_from_the_documented_response(server: ReplayServer) -> None:
    server.push(Canned(body=load("openai_tool_call.json")))
    request = Request(messages=[UserMessage(content="Weather in Boston?")], tools=[CALC])
    reply = await make(server).complete(request)
    assert reply.stop_reason == "tool_use"
    assert [(c.id, c.name, c.input) for c in reply.tool_calls] == [
        ("call_abc123", "get_current_weather", {"location": "Boston, MA"})
    ]
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (82, 17)
    assert server.requests[0].json["tools"] == [
        {
            "type": "function",
            "function": {"name": "calculator", "description": "Evaluate arithmetic.", "parameters": {"type": "object"}},
        }
    ]


async def test_invalid_json_arguments_stay_the_raw_string(server: ReplayServer) -> None:
    call = openai_call("call_1", "calculator", "{'expression': 2+}")
    server.push(Canned(body=openai_completion(tool_calls=[call])))
    reply = await make(server).complete(Request(messages=[UserMessage(content="?")], tools=[CALC]))
    assert reply.tool_calls[0].input == "{'expression': 2+}"


async def test_native_agent_parallel_calls_results_go_back_in_call_order(server: ReplayServer) -> None:
    calls = [
        openai_call("call_a", "calculator", '{"expression": "2*3"}'),
        openai_call("call_b", "calculator", '{"expression": "10/4"}'),
    ]
    server.push(
        Canned(body=openai_completion(tool_calls=calls)),
        Canned(body=openai_completion("2*3 is 6 and 10/4 is 2.5.")),
    )
    agent = Agent(model=make(server), tools=[calculator], protocol="native")
    result = await agent.arun("What are 2*3 and 10/4?")
    assert result.status == "done" and result.answer == "2*3 is 6 and 10/4 is 2.5."
    second = server.requests[1].json["messages"]
    assert second[-3]["role"] == "assistant"
    assert [c["id"] for c in second[-3]["tool_calls"]] == ["call_a", "call_b"]
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in second[-2:]] == [
        ("tool", "call_a", "6"),
        ("tool", "call_b", "2.5"),
    ]


async def test_native_agent_tells_the_model_about_invalid_arguments(server: ReplayServer) -> None:
    server.push(
        Canned(body=openai_completion(tool_calls=[openai_call("call_x", "calculator", '{"expression": ')])),
        Canned(body=openai_completion(tool_calls=[openai_call("call_y", "calculator", '{"expression": "1+1"}')])),
        Canned(body=openai_completion("It is 2.")),
    )
    result = await Agent(model=make(server), tools=[calculator], protocol="native").arun("1+1?")
    assert result.answer == "It is 2."
    told = server.requests[1].json["messages"][-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "call_x"
    assert "JSON" in told["content"] or "invalid" in told["content"].lower()
    assert server.requests[1].json["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"expression": '


# ------------------------------------------------------------------ streaming


async def test_streaming_the_documented_sse_body(server: ReplayServer) -> None:
    server.push(Canned(body=load("openai_stream_hello.sse"), content_type="text/event-stream"))
    deltas: list[str] = []
    reply = await make(server, stream=True, on_delta=deltas.append).complete(
        Request(messages=[UserMessage(content="Hi")])
    )
    assert deltas == ["Hello", "!"] and reply.text == "Hello!"
    assert reply.stop_reason == "end"
    assert reply.usage is not None and (reply.usage.input_tokens, reply.usage.output_tokens) == (9, 2)
    assert server.requests[0].json["stream"] is True
    assert server.requests[0].json["stream_options"] == {"include_usage": True}


async def test_streaming_parallel_tool_calls_with_fragmented_arguments(server: ReplayServer) -> None:
    events = openai_stream(
        ["Let me compute."],
        [
            ("call_a", "calculator", ['{"expr', 'ession": "2*3"}']),
            ("call_b", "calculator", ['{"expression":', ' "7"}']),
        ],
        usage=openai_usage(50, 30, cached=40),
    )
    server.push(Canned(sse=events))
    reply = await make(server, stream=True).complete(Request(messages=[UserMessage(content="?")], tools=[CALC]))
    assert reply.text == "Let me compute."
    assert [(c.id, c.input) for c in reply.tool_calls] == [
        ("call_a", {"expression": "2*3"}),
        ("call_b", {"expression": "7"}),
    ]
    assert reply.stop_reason == "tool_use"
    assert reply.usage is not None and reply.usage.evaluated_tokens == 10


async def test_streaming_react_agent_with_async_delta_callback(server: ReplayServer) -> None:
    server.push(
        Canned(sse=openai_stream([" I need", ' the sum.\nAction: calculator\nAction Input: {"expression": "2+2"}'])),
        Canned(sse=openai_stream([" I know.", "\nFinal Answer: 4"])),
    )
    seen: list[str] = []

    async def on_delta(text: str) -> None:
        seen.append(text)

    result = await Agent(model=make(server, stream=True, on_delta=on_delta), tools=[calculator]).arun("2+2?")
    assert result.answer == "4" and result.steps[0].observation == "4"
    assert "".join(seen).endswith("Final Answer: 4")
    assert result.usage.input_tokens == 40  # both calls' usage chunks


# ------------------------------------------------------------------ the full agent


@pytest.mark.parametrize("protocol", ["react", "native"])
def test_rose_price_scenario_through_the_agent(server: ReplayServer, protocol: str) -> None:
    if protocol == "react":
        server.push(
            Canned(
                body=openai_completion(' Find the price.\nAction: web_search\nAction Input: {"query": "rose price"}')
            ),
            Canned(
                body=openai_completion(
                    ' Add 15%.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}\nObservation: 92'
                )
            ),
            Canned(body=openai_completion(" I now know the final answer.\nFinal Answer: 92.184 yuan")),
        )
    else:
        server.push(
            Canned(body=openai_completion(tool_calls=[openai_call("c1", "web_search", '{"query": "rose price"}')])),
            Canned(
                body=openai_completion(tool_calls=[openai_call("c2", "calculator", '{"expression": "80.16*1.15"}')])
            ),
            Canned(body=openai_completion("With the 15% markup a bunch costs 92.184 yuan.")),
        )
    agent = Agent(model=make(server), tools=[web_search, calculator], protocol=protocol)  # type: ignore[arg-type]
    result = agent.run("How much would roses cost with a 15% markup?")
    assert result.status == "done" and "92.184" in (result.answer or "")
    assert [s.tool for s in result.steps[:2]] == ["web_search", "calculator"]
    assert result.steps[1].observation == "92.184"
    last = json.dumps(server.requests[2].json["messages"])
    assert "80.16 yuan" in last and "92.184" in last  # both observations reached the model
    # a second sync run makes a new event loop: the adapter must not reuse the old loop's client
    server.push(Canned(body=openai_completion(" Known.\nFinal Answer: yes" if protocol == "react" else "yes")))
    assert agent.run("Still?", session=result.session).answer == "yes"


# ------------------------------------------------------------------ errors


def status(code: int, body: Any, headers: dict[str, str] | None = None) -> Canned:
    return Canned(code, body, headers=headers or {})


async def ask(model: OpenAIModel) -> str:
    return (await model.complete(Request(messages=[UserMessage(content="Hi")]))).text


async def test_401_says_which_key_to_set_and_is_not_retried(server: ReplayServer) -> None:
    body = openai_error("Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key")
    server.push(status(401, body))
    with pytest.raises(ModelError, match="OPENAI_API_KEY") as caught:
        await ask(make(server))
    assert "Incorrect API key" in str(caught.value)
    assert len(server.requests) == 1


async def test_404_names_the_model(server: ReplayServer) -> None:
    body = openai_error("The model `gpt-4o-mini` does not exist.", "invalid_request_error", "model_not_found")
    server.push(status(404, body))
    with pytest.raises(ModelError, match=r"no model 'gpt-4o-mini'.*404"):
        await ask(make(server))
    assert len(server.requests) == 1


async def test_429_is_retried_then_succeeds(server: ReplayServer) -> None:
    limit = openai_error("Rate limit reached for gpt-4o-mini.", "tokens", "rate_limit_exceeded")
    server.push(status(429, limit), status(429, limit, {"retry-after-ms": "1"}), Canned(body=openai_completion("ok")))
    assert await ask(make(server)) == "ok"
    assert len(server.requests) == 3


@pytest.mark.parametrize("code", [429, 500, 502, 503])
async def test_retryable_errors_give_up_after_the_bound(server: ReplayServer, code: int) -> None:
    server.push(*[status(code, openai_error("busy", "server_error", None)) for _ in range(5)])
    with pytest.raises(ModelError, match=rf"\({code}\).*gave up after 3 attempts"):
        await ask(make(server, retries=2))
    assert len(server.requests) == 3


async def test_insufficient_quota_is_not_retried(server: ReplayServer) -> None:
    body = openai_error("You exceeded your current quota.", "insufficient_quota", "insufficient_quota")
    server.push(status(429, body))
    with pytest.raises(ModelError, match="out of quota"):
        await ask(make(server))
    assert len(server.requests) == 1


async def test_timeouts_are_retried_then_reported(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion("late"), delay=1.0), Canned(body=openai_completion("late"), delay=1.0))
    with pytest.raises(ModelError, match=r"timed out.*gave up after 2 attempts"):
        await ask(make(server, timeout=0.2, retries=1))
    assert len(server.requests) == 2


async def test_a_timeout_then_an_answer(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion("late"), delay=1.0), Canned(body=openai_completion("on time")))
    assert await ask(make(server, timeout=0.3)) == "on time"


async def test_other_4xx_are_not_retried(server: ReplayServer) -> None:
    server.push(status(400, openai_error("Invalid value for 'temperature'.", "invalid_request_error", None)))
    with pytest.raises(ModelError, match=r"rejected the request \(400\): Invalid value") as caught:
        await ask(make(server))
    assert not isinstance(caught.value, ContextTooLong)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "body",
    [
        openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        # llama.cpp's server
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size",
                "type": "exceed_context_size_error",
            }
        },
    ],
)
async def test_context_length_exceeded_is_context_too_long(server: ReplayServer, body: Any) -> None:
    server.push(status(400, body))
    with pytest.raises(ContextTooLong):
        await ask(make(server))
    assert len(server.requests) == 1


async def test_unreachable_server_says_so(server: ReplayServer) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff=0.001)
    with pytest.raises(ModelError, match=rf"cannot reach .*127.0.0.1:{port}.*gave up after 2 attempts"):
        await ask(model)


async def test_an_unsupported_parameter_is_renamed_once_and_remembered(server: ReplayServer) -> None:
    message = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    )
    server.push(
        status(400, openai_error(message, "invalid_request_error", "unsupported_parameter", "max_tokens")),
        Canned(body=openai_completion("first")),
        Canned(body=openai_completion("second")),
    )
    model = make(server, max_tokens=64)
    assert await ask(model) == "first" and await ask(model) == "second"
    sent = [r.json for r in server.requests]
    assert sent[0]["max_tokens"] == 64
    assert all("max_tokens" not in s and s["max_completion_tokens"] == 64 for s in sent[1:])


async def test_engine_elides_observations_and_retries_once_on_context_too_long(server: ReplayServer) -> None:
    big = tool(lambda: "x" * 3000, name="big", description="Return a long text.")
    too_long = openai_error("maximum context length is 1000 tokens", "invalid_request_error", "context_length_exceeded")
    server.push(
        Canned(body=openai_completion(" Fetch.\nAction: big\nAction Input: {}")),
        status(400, too_long),
        Canned(body=openai_completion(" Enough.\nFinal Answer: long")),
    )
    result = await Agent(model=make(server), tools=[big]).arun("Get it")
    assert result.answer == "long" and len(server.requests) == 3
    assert "x" * 3000 in json.dumps(server.requests[1].json)
    assert "x" * 3000 not in json.dumps(server.requests[2].json)
    assert "elided" in json.dumps(server.requests[2].json)


# ------------------------------------------------------------------ configuration


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="set OPENAI_API_KEY"):
        resolve_model("openai:gpt-4o-mini")


async def test_a_local_base_url_needs_no_key(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    server.push(Canned(body=openai_completion("local")))
    model = resolve_model("openai:smollm?stream=false")
    assert isinstance(model, OpenAIModel)
    assert await ask(model) == "local"
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


def test_spec_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = from_spec("gpt-4o?max_tokens=64&stream=false&prefill=assistant")
    assert (model.model, model.max_tokens, model.stream, model.prefill) == ("gpt-4o", 64, False, "assistant")
    with pytest.raises(ValueError, match="unknown model option"):
        from_spec("gpt-4o?colour=blue")
    with pytest.raises(ValueError, match="must be a int"):
        from_spec("gpt-4o?max_tokens=lots")


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # what an absent package looks like to import
    with pytest.raises(ImportError, match=r"pip install 'reactchat\[openai\]'"):
        OpenAIModel("gpt-4o-mini", api_key="sk-test")


def test_the_adapter_module_does_not_import_the_sdk() -> None:
    code = "import reactchat.models.openai, sys; print('openai' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_two_event_loops_get_two_clients(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion("one")), Canned(body=openai_completion("two")))
    model = make(server)
    assert asyncio.run(ask(model)) == "one"
    assert asyncio.run(ask(model)) == "two"


# ------------------------------------------------------------------ reading a continuation

PAD = 'Thought: Add.\nAction: calculator\nAction Input: {"expression": "2+2"}\nObservation: 4\nThought:'


@pytest.mark.parametrize(
    ("said", "continued"),
    [
        (" So it is 4.\nFinal Answer: 4", " So it is 4.\nFinal Answer: 4"),
        ("thought: So it is 4.\nFinal Answer: 4", " So it is 4.\nFinal Answer: 4"),
        ("<think>easy</think>\nThought: So it is 4.\nFinal Answer: 4", " So it is 4.\nFinal Answer: 4"),
        (PAD + " So it is 4.\nFinal Answer: 4", " So it is 4.\nFinal Answer: 4"),
        # echoed without the first label, with its own spacing
        (
            ' Add.\nAction: calculator\nAction Input: {"expression":  "2+2"}\n\nObservation: 4\nThought: It is 4.',
            " It is 4.",
        ),
    ],
)
def test_continuation_removes_what_chat_models_add(said: str, continued: str) -> None:
    assert continuation(said, PAD) == continued


def test_continuation_of_the_final_request() -> None:
    pad = PAD + " No more steps: answer now.\nFinal Answer:"
    assert continuation("Final Answer: 4", pad) == " 4"
    assert continuation(" 4", pad) == " 4"


async def test_tool_calls_without_ids_get_unique_ones_from_the_engine(server: ReplayServer) -> None:
    def no_id(arguments: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": "calculator", "arguments": arguments}}

    server.push(
        Canned(body=openai_completion(tool_calls=[no_id('{"expression": "1+1"}')])),
        Canned(body=openai_completion(tool_calls=[no_id('{"expression": "2+2"}')])),
        Canned(body=openai_completion("2 and 4")),
        Canned(sse=openai_stream(tool_calls=[("", "calculator", ['{"expression": "3+3"}'])])),
    )
    result = await Agent(model=make(server), tools=[calculator], protocol="native").arun("1+1 then 2+2?")
    assert result.answer == "2 and 4"
    ids = [m["tool_call_id"] for m in server.requests[2].json["messages"] if m["role"] == "tool"]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(ids)
    streamed = await make(server, stream=True).complete(Request(messages=[UserMessage(content="?")], tools=[CALC]))
    assert [(c.id, c.input) for c in streamed.tool_calls] == [("", {"expression": "3+3"})]
