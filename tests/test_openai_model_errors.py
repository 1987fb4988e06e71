"""OpenAIModel's errors and configuration, against a real loopback HTTP server.

401/404/other 4xx fail at once with what to fix; 429, 5xx, timeouts and dropped
connections are retried a bounded number of times (counted from the requests the
server saw); a prompt that does not fit is ``ContextTooLong``, which the engine answers
by eliding old observations and trying once more.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.replay_server import Canned, ReplayServer, openai_completion, openai_error
from reactchat import Agent, ModelError, tool
from reactchat.messages import Request, UserMessage
from reactchat.models import ContextTooLong, resolve_model
from reactchat.models.openai import OpenAIModel, from_spec


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
    # each body its own: a 500 that repeats its body is given up sooner (test_openai_model_quirks.py)
    server.push(*[status(code, openai_error(f"busy ({n})", "server_error", None)) for n in range(5)])
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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_two_event_loops_get_two_clients(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion("one")), Canned(body=openai_completion("two")))
    model = make(server)
    assert asyncio.run(ask(model)) == "one"
    assert asyncio.run(ask(model)) == "two"
