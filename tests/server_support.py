"""Helpers for the server tests: a rule-driven model and a real uvicorn on loopback.

``RuleModel`` answers from the request itself (the question and the observations
so far), so any number of sessions and server processes can share it in any order.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from reactchat import Agent
from reactchat.messages import Reply, Request, TextPart
from reactchat.models import ModelError
from reactchat.server import ServerConfig, create_app
from reactchat.toolbox import calculator


def _question(request: Request) -> str:
    user = request.messages[1]
    text = getattr(user, "content", "")
    return text.rsplit("Question:", 1)[-1].strip()


def _observations(request: Request) -> list[str]:
    scratchpad = request.messages[-1]
    text = getattr(scratchpad, "text", "")
    return re.findall(r"Observation: (.*?)\nThought:", text, re.S)


def _act(thought: str, tool: str, value: dict[str, Any]) -> str:
    return f" {thought}\nAction: {tool}\nAction Input: {json.dumps(value)}"


class RuleModel:
    """A text-ReAct model whose replies follow from the question (see ``reply``)."""

    name = "rules"
    supports_tools = False
    context_tokens = None

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.calls = 0

    async def complete(self, request: Request) -> Reply:
        """Answer one request after ``delay`` seconds."""
        self.calls += 1
        # "slow" questions take a second a step, to observe a turn while it runs
        question = _question(request).lower()
        await asyncio.sleep(1.0 if "slow" in question else self.delay)
        text = reply(request)
        if "stream" in question:  # like the openai: and anthropic: adapters, word by word
            for piece in re.split(r"(?<=\s)", text):
                if request.on_delta is not None:
                    request.on_delta(piece)
                await asyncio.sleep(0.05)
        return Reply(parts=[TextPart(text=text)])


#: an answer with the Markdown a page must render, and HTML it must never run
MARKDOWN = (
    "Prices:\n\n- **rose**: 80.16\n- *tulip*: 3.10\n\n| flower | euros |\n|---|---|\n| rose | 80.16 |\n\n"
    "```python\nprint(80.16 * 1.15)\n```\n\n"
    '[the florist](https://example.org/florist) <img src=x onerror="window.pwned=1"> '
    "<script>window.pwned=2</script> [click](javascript:window.pwned=3)"
)


def reply(request: Request) -> str:
    """The rules: "how far" asks where the user is, "compute X" uses the calculator, "two
    questions" asks twice, "slow" takes a second per step,
    "stream" streams its text word by word, "fail" raises, "files" searches the uploads
    ("files cite" cites two passages), "markdown" answers ``MARKDOWN``, "price json" answers
    JSON that lacks a field, then (after a correction) the whole object;
    anything else is echoed back as the final answer."""
    question = _question(request)
    seen = _observations(request)
    lowered = question.lower()
    if request.react is None:
        return f" best effort for {question}"
    if "fail" in lowered:
        raise ModelError("the rule model was told to fail")
    if "how far" in lowered:
        if not seen:
            return _act("I need to know where the user is.", "ask_user", {"question": "Where are you?"})
        return f" The user is in {seen[-1]}.\nFinal Answer: From {seen[-1]}, Paris is 400 km away."
    if "two questions" in lowered:
        if not seen:
            return _act("First the city.", "ask_user", {"question": "Which city?"})
        if len(seen) == 1:
            return _act("Then the unit.", "ask_user", {"question": "Which unit?"})
        return f" Both known.\nFinal Answer: {seen[0]} in {seen[1]}"
    computed = re.search(r"compute (.+)", question)
    if computed:
        if not seen:
            return _act("Use the calculator.", "calculator", {"expression": computed.group(1)})
        return f" I know it.\nFinal Answer: {seen[-1]}"
    if "files" in lowered:
        if not seen:
            return _act("Search the files.", "search_files", {"query": question.split(":", 1)[-1].strip()})
        if "cite" in lowered:  # cite the first passage by number, the second by its heading
            heads = re.findall(r"^\[(\d+)\] (.+)$", seen[-1], re.M)
            return f" Found.\nFinal Answer: The rose costs 80.16 euros [1], see also [{heads[-1][1]}]."
        return f" Found.\nFinal Answer: {seen[-1][:300]}"
    if "price json" in lowered:  # the first answer misses a field the schema requires
        if not seen:
            return ' Priced.\nFinal Answer: {"flower": "rose"}'
        return ' Fixed.\nFinal Answer: {"flower": "rose", "euros": 92.184}'
    if "markdown" in lowered:
        return f" Formatted.\nFinal Answer: {MARKDOWN}"
    if seen:
        return f" Done.\nFinal Answer: {seen[-1]}"
    return f" Simple.\nFinal Answer: echo: {question}"


def make_agent(store: Any, delay: float = 0.0) -> Agent:
    """An agent with the rule model, the calculator and ask_user."""
    return Agent(model=RuleModel(delay), tools=[calculator], store=store)


def make_app(store: str = "memory:", token: str | None = None, delay: float = 0.0, **options: Any) -> Any:
    """An app over ``store`` with the rule model."""
    config = ServerConfig(model="rules", store=store, token=token, **options)
    return create_app(lambda s: make_agent(s, delay), config=config)


def app_from_env() -> Any:
    """For ``uvicorn --factory``: the rule model over ``REACTCHAT_DB``."""
    return make_app(os.environ["REACTCHAT_DB"], os.environ.get("REACTCHAT_TOKEN") or None)


def fetch_app_from_env() -> Any:
    """For ``uvicorn --factory``: the rule model with ``fetch_url`` (127.0.0.1 allowed; links in
    messages read before the turn) over ``REACTCHAT_DB``, parsers limited to
    ``REACTCHAT_PARSE_SECONDS`` CPU seconds."""
    from reactchat.knowledge import Limits
    from reactchat.toolbox import FetchPolicy, fetch_url_tool, read_links_in_messages

    policy = FetchPolicy(allow=["127.0.0.1"])

    def agent(store: Any) -> Agent:
        made = Agent(model=RuleModel(), tools=[calculator, fetch_url_tool(policy)], store=store)
        read_links_in_messages(made, policy)
        return made

    limits = Limits(seconds=float(os.environ["REACTCHAT_PARSE_SECONDS"]))
    return create_app(agent, config=ServerConfig(model="rules", store=os.environ["REACTCHAT_DB"], file_limits=limits))


def slow_app_from_env() -> Any:
    """For ``uvicorn --factory``: an agent on the OpenAI-compatible provider at
    ``REACTCHAT_SLOW_URL`` (``fixtures.slow_stream.SlowStream``) over ``REACTCHAT_DB``."""
    from reactchat.models.openai import OpenAIModel

    def agent(store: Any) -> Agent:
        model = OpenAIModel("slow-model", api_key="x", base_url=f"{os.environ['REACTCHAT_SLOW_URL']}/v1", retries=0)
        return Agent(model=model, store=store)

    return create_app(agent, config=ServerConfig(store=os.environ["REACTCHAT_DB"]))


def free_port() -> int:
    """A loopback port that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port; yields the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """SSE text → ``[(event, data), ...]`` (comments skipped)."""
    frames = []
    for block in text.strip().split("\n\n"):
        kind, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
        if data:
            frames.append((kind, json.loads(data)))
    return frames


def stop_workers(started: list[tuple[subprocess.Popen[bytes], str]]) -> None:
    """End the workers of ``start_worker``: SIGTERM to all, then SIGKILL to any not gone in 10 s."""
    for process, _ in started:
        process.terminate()
    for process, _ in started:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_worker(
    db: str, log: Path, factory: str = "server_support:app_from_env", **env_vars: str
) -> tuple[subprocess.Popen[bytes], str]:
    """A uvicorn worker process serving ``factory`` (a module of tests/) over ``db``."""
    port = free_port()
    env = {**os.environ, "REACTCHAT_DB": db, **env_vars}
    env.pop("REACTCHAT_TOKEN", None)
    command = [sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(Path(__file__).parent)]
    command += [
        factory,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with log.open("wb") as sink:  # a file, not a pipe: a chatty worker must never block on a full pipe
        process = subprocess.Popen(command, env=env, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError(f"worker did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
