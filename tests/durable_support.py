"""Helpers of the durable-session tests: run the scripted agent of ``durable_child.py`` in
a fresh process, read what it reported, and look at a store from outside."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from reactchat.messages import EVENTS, Event
from reactchat.store import resolve_store

CHILD = str(Path(__file__).with_name("durable_child.py"))


@dataclass
class Child:
    code: int
    events: list[Event]
    status: str


async def run_child(url: str, session: str, message: str | None, effects: Path, *args: str) -> Child:
    """Run the scripted agent in a fresh process and collect what it reported."""
    argv = [CHILD, url, session, *([message] if message is not None else []), "--effects", str(effects), *args]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return parse_child(proc.returncode, out.decode(), err.decode())


def parse_child(code: int | None, out: str, err: str = "") -> Child:
    lines = out.splitlines()
    assert lines[:1] == ["ready"] or code == -9, f"child failed to start ({code}): {err}"
    events = [EVENTS.validate_json(line) for line in lines if line.startswith("{")]
    status = next((line.split()[1] for line in lines if line.startswith("status ")), "")
    assert code in (0, 3, 5, 6, -9), f"child crashed ({code}): {err}"
    return Child(code if code is not None else -1, events, status)


def effects_of(path: Path) -> Counter[str]:
    """How many times each bump call ran (call id → count)."""
    if not path.exists():
        return Counter()
    return Counter(line.split()[0] for line in path.read_text().splitlines())


async def new_session(url: str) -> str:
    store = resolve_store(url)
    try:
        return await store.create_session()
    finally:
        await store.close()


async def stored(url: str, session: str) -> list[Event]:
    store = resolve_store(url)
    try:
        return await store.events(session)
    finally:
        await store.close()
