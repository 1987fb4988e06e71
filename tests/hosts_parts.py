"""What runs inside the hosts of the multi-host harness (``hosts_support``).

* ``python hosts_parts.py model PORT``: an OpenAI-compatible chat endpoint on the worker
  host's loopback, standing in for the paid API at its HTTP boundary. Its replies follow
  from the request alone (the question and how many observations the scratchpad holds), so
  any worker can carry on a turn another began; every thought names the host that wrote it.
* ``record``: the turn's tool, an unsafe one (the default effect): each call appends a
  line to a log on the filesystem every host shares, so a call that ran twice shows.
* ``python hosts_parts.py balancer SOCKET CONFIG INTER``: the client host's TCP balancer
  (asyncio): the ``server`` lines of ``deploy/haproxy.cfg``, each checked with ``GET
  /readyz`` every ``INTER`` seconds (``fall``/``rise`` from the file); each connection that
  comes in on the Unix socket ``SOCKET`` (the test process lives outside the hosts' network)
  goes to the next server that is up, another one if it cannot connect.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from reactchat import tool

#: model calls (and so tool calls) a turn makes before its final answer
STEPS = 3


# ------------------------------------------------------------------ the tool


@tool
def record(key: str) -> str:
    """Record that step ``key`` happened (a side effect: one line in the shared log)."""
    line = f"{key} {os.environ.get('HOSTS_NAME', '?')} {os.getpid()}\n"
    fd = os.open(os.environ["HOSTS_EFFECT_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return f"recorded {key}"


# ------------------------------------------------------------------ the model


def answer(messages: list[dict[str, Any]], host: str) -> str:
    """The ReAct step for a request: ``record`` once per step, then the final answer."""
    user = next(m for m in reversed(messages) if m.get("role") == "user")
    text = str(user.get("content", ""))
    after = text.rsplit("Question:", 1)[-1]
    question = after.split("\n", 1)[0].strip()
    done = after.count("\nObservation:")
    if done < STEPS:
        key = json.dumps({"key": f"{question}#{done + 1}"})
        return f" step {done + 1} on {host}\nAction: record\nAction Input: {key}"
    return f" all {STEPS} recorded, on {host}\nFinal Answer: {question} done"


class ModelHandler(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions`` (not streamed) after ``HOSTS_MODEL_DELAY`` seconds."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        time.sleep(float(os.environ.get("HOSTS_MODEL_DELAY", "0.5")))
        text = answer(body["messages"], os.environ.get("HOSTS_NAME", "?"))
        reply = {
            "id": "hosts",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "hosts"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(str(body)) // 4, "completion_tokens": len(text) // 4, "total_tokens": 1},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


# ------------------------------------------------------------------ the balancer


def servers(config: Path) -> tuple[list[tuple[str, int]], int, int]:
    """The ``server`` lines of a haproxy config, and the ``fall`` and ``rise`` of their checks."""
    found = re.findall(r"^\s*server\s+\S+\s+([\d.]+):(\d+)(.*)$", config.read_text(), re.M)
    options = found[0][2] if found else ""
    return [(host, int(port)) for host, port, _ in found], _option(options, "fall"), _option(options, "rise")


def _option(line: str, name: str) -> int:
    found = re.search(rf"\b{name} (\d+)", line)
    return int(found[1]) if found else 2


class Balancer:
    """Round robin over the servers that pass their checks."""

    def __init__(self, targets: list[tuple[str, int]], inter: float, fall: int, rise: int) -> None:
        self.targets, self.inter, self.fall, self.rise = targets, inter, fall, rise
        self.up = {t: False for t in targets}
        self.streak = {t: 0 for t in targets}  # > 0: checks passed in a row, < 0: failed
        self.turn = itertools.count()

    async def check(self, target: tuple[str, int]) -> None:
        while True:
            ok = await ready(target, timeout=1.0)
            s = self.streak[target]
            self.streak[target] = (max(s, 0) + 1) if ok else (min(s, 0) - 1)
            if ok and (self.streak[target] >= self.rise or not any(self.up.values())):
                self.up[target] = True
            if not ok and -self.streak[target] >= self.fall:
                self.up[target] = False
            await asyncio.sleep(self.inter)

    async def relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up = [t for t in self.targets if self.up[t]]
        start = next(self.turn)
        for i in range(len(up)):
            host, port = up[(start + i) % len(up)]
            try:
                upstream = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
            except (OSError, TimeoutError):
                continue
            both = [asyncio.create_task(pipe(reader, upstream[1])), asyncio.create_task(pipe(upstream[0], writer))]
            await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
            for task in both:  # one side ended: so does the other (a cut-off server never sends its end)
                task.cancel()
            upstream[1].close()
            writer.close()
            return
        writer.close()  # no server up: the client tries again

    async def serve(self, path: str) -> None:
        checks = [asyncio.create_task(self.check(t)) for t in self.targets]
        server = await asyncio.start_unix_server(self.relay, path=path)
        os.chmod(path, 0o666)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()
        for task in checks:
            task.cancel()


async def ready(target: tuple[str, int], timeout: float) -> bool:
    """Whether ``GET /readyz`` on ``target`` answers 200 within ``timeout`` seconds."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*target), timeout)
    except (OSError, TimeoutError):
        return False
    try:
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: chat.example.com\r\nConnection: close\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), timeout)
        return status.split()[1:2] == [b"200"]
    except (OSError, TimeoutError, IndexError):
        return False
    finally:
        writer.close()


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then close the writing side."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def main(argv: list[str]) -> None:
    """``model PORT`` or ``balancer SOCKET CONFIG INTER``."""
    if argv[0] == "model":
        server = ThreadingHTTPServer(("127.0.0.1", int(argv[1])), ModelHandler)
        server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        print("ready", flush=True)
        server.serve_forever()
    elif argv[0] == "balancer":
        targets, fall, rise = servers(Path(argv[2]))
        asyncio.run(Balancer(targets, float(argv[3]), fall, rise).serve(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
