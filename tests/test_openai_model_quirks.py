"""What OpenAI-compatible servers do differently from OpenAI, and what OpenAIModel does about it.

Each quirk is replayed here in the shape a real server sent it (llama-cpp-python's
server, captured on loopback; the refusals as OpenAI, Azure and pydantic servers word
them) through a real loopback HTTP server and the official SDK; retries are counted
from the requests the server saw. tests/test_openai_model_llamacpp.py runs the same
paths against llama-cpp-python's server itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.replay_server import Canned, ReplayServer, openai_call, openai_completion, openai_error, openai_stream
from reactchat import Agent, ModelError, calculator
from reactchat.messages import Request, ToolSpec, UserMessage
from reactchat.models.anthropic import from_spec as anthropic_spec
from reactchat.models.openai import OpenAIModel, from_spec

CALC = ToolSpec(name="calculator", description="Evaluate arithmetic.", input_schema={"type": "object"})
#: the start of what llama-cpp-python's server answers when a message has "content": null
VALIDATION_500 = {
    "error": {
        "message": "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
        "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', "
        "'input': None}",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ReplayServer() as replay:
        yield replay


def make(server: ReplayServer, **options: Any) -> OpenAIModel:
    options.setdefault("backoff", 0.001)
    options.setdefault("timeout", 5.0)
    options.setdefault("stream", False)
    return OpenAIModel("smollm2", base_url=f"{server.url}/v1", **options)


async def ask(model: OpenAIModel, tools: list[ToolSpec] | None = None) -> str:
    return (await model.complete(Request(messages=[UserMessage(content="Hi")], tools=tools or []))).text


def llama_stream(call_id: str, name: str, fragments: list[str]) -> list[Any]:
    """A streamed forced tool call as llama-cpp-python's server sends it: the id and the
    name in every delta (and the legacy ``function_call`` beside them), no usage chunk."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        empty = {"role": None, "content": None, "function_call": None, "tool_calls": None}
        choice = {"index": 0, "finish_reason": finish, "logprobs": None, "delta": {**empty, **delta}}
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}

    events: list[Any] = [chunk({"role": "assistant"})]
    for fragment in fragments:
        function = {"name": name, "arguments": fragment}
        call = {"index": 0, "id": call_id, "type": "function", "function": function}
        events.append(chunk({"function_call": function, "tool_calls": [call]}))
    return [*events, chunk({}, "tool_calls"), "[DONE]"]


# ------------------------------------------------------------------ what is sent


async def test_an_assistant_tool_call_goes_back_with_empty_content_not_null(server: ReplayServer) -> None:
    server.push(
        Canned(body=openai_completion(None, tool_calls=[openai_call("c1", "calculator", '{"expression": "12*7"}')])),
        Canned(body=openai_completion("84")),
    )
    result = await Agent(model=make(server), tools=[calculator], protocol="native").arun("12*7?")
    assert result.answer == "84"
    assistant = server.requests[1].json["messages"][-2]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "c1"
    assert assistant["content"] == ""


async def test_tool_choice_forces_the_named_tool_only_where_it_is_offered(server: ReplayServer) -> None:
    server.push(*[Canned(body=openai_completion("ok")) for _ in range(3)])
    forced = make(server, tool_choice="calculator", parallel_tool_calls=False)
    await ask(forced, [CALC])
    await ask(forced)  # no tools: nothing to choose from
    await ask(make(server, tool_choice="required"), [CALC])
    first, second, third = (r.json for r in server.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert first["parallel_tool_calls"] is False
    assert "tool_choice" not in second and "parallel_tool_calls" not in second
    assert third["tool_choice"] == "required" and "parallel_tool_calls" not in third


def test_tool_choice_and_parallel_tool_calls_ride_in_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = from_spec("smollm2?tool_choice=calculator&parallel_tool_calls=false")
    assert (model.tool_choice, model.parallel_tool_calls) == ("calculator", False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    with pytest.raises(ValueError, match="unknown model option"):
        anthropic_spec("claude?tool_choice=calculator")  # an OpenAI option only


@pytest.mark.parametrize(
    ("code", "body"),
    [
        # Azure OpenAI's older API versions
        (
            400,
            openai_error("Unrecognized request argument supplied: parallel_tool_calls", "invalid_request_error", None),
        ),
        # a server whose pydantic request model forbids extra fields
        (
            422,
            {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "parallel_tool_calls"],
                        "msg": "Extra inputs are not permitted",
                        "input": False,
                    }
                ]
            },
        ),
    ],
    ids=["azure-400", "pydantic-422"],
)
async def test_parallel_tool_calls_refused_is_dropped_and_remembered(
    server: ReplayServer, code: int, body: Any
) -> None:
    server.push(Canned(code, body), Canned(body=openai_completion("first")), Canned(body=openai_completion("second")))
    model = make(server, parallel_tool_calls=False)
    assert await ask(model, [CALC]) == "first"
    assert await ask(model, [CALC]) == "second"
    sent = [r.json for r in server.requests]
    assert sent[0]["parallel_tool_calls"] is False
    assert all("parallel_tool_calls" not in s and s["tools"] for s in sent[1:])


# ------------------------------------------------------------------ what comes back


async def test_a_name_repeated_in_every_delta_is_named_once(server: ReplayServer) -> None:
    server.push(Canned(sse=llama_stream("call__0_calculator", "calculator", ["{", ' "expression": "12*7"', "}"])))
    reply = await make(server, stream=True).complete(Request(messages=[UserMessage(content="?")], tools=[CALC]))
    assert [(c.id, c.name, c.input) for c in reply.tool_calls] == [
        ("call__0_calculator", "calculator", {"expression": "12*7"})
    ]
    assert reply.stop_reason == "tool_use"
    assert reply.usage is None  # none was sent: the engine estimates it


async def test_a_stream_without_usage_is_counted_as_an_estimate(server: ReplayServer) -> None:
    events = [e for e in openai_stream(["It is 84."]) if not (isinstance(e, dict) and e.get("usage"))]
    server.push(Canned(sse=events))
    result = await Agent(model=make(server, stream=True), tools=[calculator], protocol="native").arun("12*7?")
    assert result.answer == "It is 84."
    assert result.usage.estimated and result.usage.input_tokens > 0 and result.usage.output_tokens > 0


# ------------------------------------------------------------------ errors


async def test_a_500_validation_error_is_not_retried(server: ReplayServer) -> None:
    server.push(*[Canned(500, VALIDATION_500) for _ in range(4)])
    with pytest.raises(ModelError) as caught:
        await ask(make(server, retries=3))
    assert len(server.requests) == 1
    message = str(caught.value)
    assert message.startswith(f"the OpenAI-compatible server at {server.url}/v1 rejected the request (500): ")
    assert "7 validation errors" in message and "server server" not in message


async def test_a_500_with_the_same_body_twice_is_not_retried_again(server: ReplayServer) -> None:
    crash = openai_error("'dict object' has no attribute 'content'", "internal_server_error", None)
    server.push(*[Canned(500, crash) for _ in range(4)])
    with pytest.raises(ModelError) as caught:
        await ask(make(server, retries=3))
    assert len(server.requests) == 2
    assert str(caught.value) == (
        f"the OpenAI-compatible server at {server.url}/v1 had an error (500): 'dict object' has no attribute "
        "'content' internal_server_error (gave up after 2 attempts: the same error twice in a row)"
    )


async def test_an_overloaded_server_saying_the_same_thing_is_still_retried(server: ReplayServer) -> None:
    busy = openai_error("The server is overloaded.", "server_error", None)
    server.push(Canned(503, busy), Canned(503, busy), Canned(body=openai_completion("back")))
    assert await ask(make(server, retries=3)) == "back"
    assert len(server.requests) == 3


async def test_tool_calls_that_finish_with_stop_are_still_tool_use(server: ReplayServer) -> None:
    call = openai_call("c1", "calculator", '{"expression": "12*7"}')
    server.push(Canned(body=openai_completion(tool_calls=[call], finish="stop")))  # as Ollama says it
    reply = await make(server).complete(Request(messages=[UserMessage(content="?")], tools=[CALC]))
    assert reply.stop_reason == "tool_use" and reply.tool_calls[0].name == "calculator"


async def test_stream_options_refused_is_dropped_and_remembered(server: ReplayServer) -> None:
    refusal = openai_error("Unrecognized request argument supplied: stream_options", "invalid_request_error", None)
    server.push(Canned(400, refusal), Canned(sse=openai_stream(["one"])), Canned(sse=openai_stream(["two"])))
    model = make(server, stream=True)
    assert await ask(model) == "one" and await ask(model) == "two"
    assert [("stream_options" in r.json) for r in server.requests] == [True, False, False]
