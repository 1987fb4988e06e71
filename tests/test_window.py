"""A remote model's context window, read once from what its server publishes.

The servers are real HTTP servers on loopback answering the shapes vLLM, OpenRouter,
llama.cpp's server and Ollama document (recorded in ``SHAPES``), reached through the
official ``openai`` SDK's adapter; llama-cpp-python's own server is started for real
(``test_llama_cpp_python_publishes_no_window``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from fixtures.replay_server import openai_completion, openai_usage
from reactchat import Agent
from reactchat.engine import tokens
from reactchat.models import _window
from reactchat.models.anthropic import AnthropicModel
from reactchat.models.openai import OpenAIModel
from test_openai_model_llamacpp import llama_server  # noqa: F401  (the real server's fixture)


def answer(sent: bytes) -> dict[str, Any]:
    """A completion whose usage counts the request at 4 bytes a token (calibration learns 4)."""
    return openai_completion(" I can answer.\nFinal Answer: ok", usage=openai_usage(prompt=len(sent) // 4))


#: what each server answers about its models, as their documentation shows it
SHAPES: dict[str, dict[str, Any]] = {
    "vllm": {
        "GET /v1/models": {
            "object": "list",
            "data": [
                {
                    "id": "meta-llama/Llama-3.1-8B-Instruct",
                    "object": "model",
                    "created": 1715644056,
                    "owned_by": "vllm",
                    "root": "meta-llama/Llama-3.1-8B-Instruct",
                    "parent": None,
                    "max_model_len": 8192,
                    "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_sampling": True}],
                }
            ],
        }
    },
    "openrouter": {
        "GET /api/v1/models": {
            "data": [
                {"id": "openai/gpt-4o", "name": "OpenAI: GPT-4o", "context_length": 128000},
                {
                    "id": "meta-llama/llama-3.1-8b-instruct",
                    "name": "Meta: Llama 3.1 8B Instruct",
                    "context_length": 131072,
                    "architecture": {"modality": "text->text", "tokenizer": "Llama3"},
                    "pricing": {"prompt": "0.00000002", "completion": "0.00000005"},
                    "top_provider": {"context_length": 131072, "max_completion_tokens": 8192, "is_moderated": False},
                },
            ]
        }
    },
    "llama.cpp": {
        "GET /v1/models": {
            "object": "list",
            "data": [
                {
                    "id": "qwen2.5-7b-instruct-q4_k_m.gguf",
                    "object": "model",
                    "created": 1733000000,
                    "owned_by": "llamacpp",
                    "meta": {"vocab_type": 2, "n_vocab": 152064, "n_ctx_train": 32768, "n_embd": 3584},
                }
            ],
        },
        "GET /props": {
            "default_generation_settings": {"id": 0, "n_ctx": 4096, "speculative": False, "params": {"top_k": 40}},
            "total_slots": 1,
            "model_path": "qwen2.5-7b-instruct-q4_k_m.gguf",
            "chat_template": "{% for message in messages %}...",
            "build_info": "b4600-abc123",
        },
    },
    "ollama": {
        "GET /api/version": {"version": "0.12.6"},
        "GET /v1/models": {
            "object": "list",
            "data": [{"id": "llama3.2:latest", "object": "model", "created": 1733000000, "owned_by": "library"}],
        },
        "POST /api/show": {
            "modelfile": "FROM llama3.2\n",
            "parameters": 'num_ctx                        8192\nstop                           "<|eot_id|>"',
            "template": "{{ .Prompt }}",
            "details": {"format": "gguf", "family": "llama", "parameter_size": "3.2B"},
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        },
    },
}


class Published:
    """A real HTTP server answering ``routes`` (``"METHOD /path"`` → JSON) and chat completions;
    ``seen`` lists the requests, ``delay`` holds every answer but the chat's."""

    def __init__(self, routes: dict[str, Any], delay: float = 0.0) -> None:
        self.routes = routes
        self.delay = delay
        self.seen: list[str] = []
        #: the body of the latest chat completion request
        self.last_chat = ""
        published = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                route = f"{self.command} {self.path}"
                published.seen.append(route)
                if self.path.endswith("/chat/completions"):
                    published.last_chat = raw.decode()
                    self.send(200, answer(raw))
                    return
                time.sleep(published.delay)
                body = published.routes.get(route)
                self.send(200, body) if body is not None else self.send(404, {"error": "not found"})

            do_POST = do_GET

            def send(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (the slow server's test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def probes(self) -> list[str]:
        return [s for s in self.seen if not s.endswith("/chat/completions")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def publish() -> Iterator[Any]:
    servers: list[Published] = []

    def start(routes: dict[str, Any], delay: float = 0.0) -> Published:
        servers.append(Published(routes, delay))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def model_on(url: str, name: str, **options: Any) -> OpenAIModel:
    return OpenAIModel(name, base_url=url, api_key="sk-test", stream=False, **options)


@pytest.mark.parametrize(
    ("shape", "path", "name", "window"),
    [
        ("vllm", "/v1", "meta-llama/Llama-3.1-8B-Instruct", 8192),
        ("openrouter", "/api/v1", "meta-llama/llama-3.1-8b-instruct", 131072),
        ("llama.cpp", "/v1", "anything", 4096),  # a one-model server: the name is not checked
        ("ollama", "/v1", "llama3.2", 8192),
    ],
)
async def test_the_window_is_read_from_where_each_server_publishes_it(
    publish: Any, shape: str, path: str, name: str, window: int
) -> None:
    server = publish(SHAPES[shape])
    model = model_on(server.url + path, name)
    assert model.context_tokens is None  # nothing is asked before a run needs it
    assert server.seen == []
    assert await tokens.discover(model) == window
    assert model.context_tokens == window


@pytest.mark.parametrize(
    ("shape", "window"),
    [
        ("llama.cpp", 32768),  # an older llama.cpp server without /props: the trained window
        ("ollama", 131072),  # no num_ctx in the model's parameters: its trained context length
    ],
)
async def test_a_server_that_says_less_falls_back_to_what_else_it_says(publish: Any, shape: str, window: int) -> None:
    routes = {k: v for k, v in SHAPES[shape].items() if k != "GET /props"}
    if shape == "ollama":
        routes["POST /api/show"] = {**routes["POST /api/show"], "parameters": 'stop "<|eot_id|>"'}
    server = publish(routes)
    assert await tokens.discover(model_on(server.url + "/v1", "llama3.2")) == window


async def test_the_users_window_stands_when_smaller_and_yields_when_larger(publish: Any) -> None:
    server = publish(SHAPES["vllm"])
    url, name = server.url + "/v1", "meta-llama/Llama-3.1-8B-Instruct"
    assert await tokens.discover(model_on(url, name, context_tokens=4000)) == 4000
    assert await tokens.discover(model_on(url, name, context_tokens=100_000)) == 8192


async def test_the_server_is_asked_once_per_model_even_by_concurrent_runs(publish: Any) -> None:
    server = publish(SHAPES["llama.cpp"], delay=0.2)
    model = model_on(server.url + "/v1", "x")
    assert await asyncio.gather(*(tokens.discover(model) for _ in range(5))) == [4096] * 5
    agent = Agent(model, ask_user=False)
    session = None
    for _ in range(3):
        session = (await agent.arun("hello", session)).session
    assert server.probes() == ["GET /v1/models", "GET /props"]


def test_a_sync_agent_asks_once_across_its_event_loops(publish: Any) -> None:
    server = publish(SHAPES["vllm"])
    model = model_on(server.url + "/v1", "meta-llama/Llama-3.1-8B-Instruct")
    agent = Agent(model, ask_user=False)
    for _ in range(2):
        assert agent.run("hello").status == "done"
    assert server.probes() == ["GET /v1/models"]
    assert model.context_tokens == 8192


async def test_a_server_that_publishes_nothing_leaves_the_users_value(publish: Any) -> None:
    server = publish({"GET /v1/models": {"object": "list", "data": [{"id": "a"}, {"id": "b"}]}})
    model = model_on(server.url + "/v1", "c", context_tokens=6000)
    result = await Agent(model, ask_user=False).arun("hello")
    assert result.status == "done" and model.context_tokens == 6000
    assert server.probes() == ["GET /v1/models", "GET /props", "GET /api/version"]
    assert await tokens.discover(model_on(server.url + "/v1", "c")) is None


async def test_an_unreachable_or_slow_server_is_no_error(publish: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_window, "PROBE_SECONDS", 0.2)
    with socket_closed() as url:
        model = model_on(url, "m", context_tokens=3000, retries=0)
        assert await tokens.discover(model) == 3000
    slow = publish(SHAPES["vllm"], delay=2)
    started = time.perf_counter()
    model = model_on(slow.url + "/v1", "meta-llama/Llama-3.1-8B-Instruct")
    result = await Agent(model, ask_user=False).arun("hello")
    assert result.status == "done" and model.context_tokens is None
    assert time.perf_counter() - started < 1.9  # each question waited PROBE_SECONDS, not the server


class socket_closed:
    """The URL of a loopback port nobody listens on."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def __exit__(self, *exc: object) -> None:
        pass


def test_the_default_history_follows_the_published_window(publish: Any) -> None:
    def carried(window: int) -> int:
        shape = {"GET /v1/models": {"data": [{"id": "m", "max_model_len": window}]}}
        server = publish(shape)
        model = model_on(server.url + "/v1", "m")
        agent = Agent(model, ask_user=False)
        session = None
        for i in range(30):
            session = agent.run(f"turn {i}: " + "words " * 60, session=session).session
        return sum(1 for i in range(29) if f"turn {i}:" in server.last_chat)

    small, large = carried(2000), carried(16_000)
    assert 0 < small < large


async def test_the_local_server_of_openai_model_is_never_asked_for_openai_itself() -> None:
    model = OpenAIModel("gpt-4o-mini", api_key="sk-test", context_tokens=None)
    assert await tokens.discover(model) is None  # no request: OpenAI publishes no window


def test_claude_models_have_their_documented_window() -> None:
    assert AnthropicModel("claude-sonnet-4-5", api_key="k").context_tokens == 200_000
    assert AnthropicModel("claude-3-5-haiku-latest", api_key="k").context_tokens == 200_000
    assert AnthropicModel("claude-2.0", api_key="k").context_tokens == 100_000
    assert AnthropicModel("claude-opus-4-1", api_key="k", context_tokens=50_000).context_tokens == 50_000
    assert AnthropicModel("my-proxy-model", api_key="k").context_tokens is None


async def test_llama_cpp_python_publishes_no_window(llama_server: str) -> None:  # noqa: F811
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        seen.append(f"{request.method} {request.url.path}")

    client = httpx.AsyncClient(event_hooks={"request": [record]})
    model = OpenAIModel("local", base_url=llama_server, stream=False, http_client=client, context_tokens=1500)
    assert await tokens.discover(model) == 1500  # its /v1/models lists ids only; no /props; not Ollama
    assert await tokens.discover(model) == 1500
    assert seen == ["GET /v1/models", "GET /props", "GET /api/version"]
    await client.aclose()


async def test_claude_models_take_the_window_the_models_api_says(publish: Any) -> None:
    info = {
        "type": "model",
        "id": "claude-sonnet-4-5-20250929",
        "display_name": "Claude Sonnet 4.5",
        "created_at": "2025-09-29T00:00:00Z",
        "lifecycle": "active",
    }
    server = publish({"GET /v1/models/claude-sonnet-4-5": {**info, "max_input_tokens": 180_000, "max_tokens": 64_000}})
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", base_url=server.url)
    assert model.context_tokens == 200_000  # the documented window, until the API is asked
    assert await tokens.discover(model) == 180_000
    older = publish({"GET /v1/models/claude-sonnet-4-5": info})  # an API version that says no window
    assert await tokens.discover(AnthropicModel("claude-sonnet-4-5", api_key="k", base_url=older.url)) == 200_000
    with socket_closed() as url:
        gone = AnthropicModel("claude-3-haiku-20240307", api_key="k", base_url=url.removesuffix("/v1"), retries=0)
        assert await tokens.discover(gone) == 200_000
