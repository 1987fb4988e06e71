"""OpenAIModel against a real HTTP server replaying the API's documented response shapes.

Every test goes through the official ``openai`` SDK over a loopback socket; retries are
counted from the requests the server saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.replay_server import (
    Canned,
    ReplayServer,
    load,
    openai_call,
    openai_completion,
    openai_stream,
    openai_usage,
)
from reactchat import Agent, calculator, tool
from reactchat.messages import AssistantMessage, Request, SystemMessage, TextPart, ToolSpec, UserMessage
from reactchat.models._http_prefill import continuation
from reactchat.models.openai import OpenAIModel
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


async def test_a_request_can_collect_deltas_from_a_shared_model(server: ReplayServer) -> None:
    server.push(Canned(sse=openai_stream(["a", "b"])), Canned(sse=openai_stream(["c"])))
    model = make(server, stream=True)
    mine: list[str] = []
    await model.complete(Request(messages=[UserMessage(content="?")], on_delta=mine.append))
    await model.complete(Request(messages=[UserMessage(content="?")]))  # another request: not collected
    assert mine == ["a", "b"]
