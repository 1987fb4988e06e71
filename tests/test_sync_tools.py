"""Sync tools run on worker threads: a quick one costs little, a hung one stalls nobody."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time
import warnings

from loop_watch import loop_gaps
from reactchat import Agent, ScriptedModel, tool
from reactchat.tools import ToolTimeout
from reactchat.tools.threads import ThreadCall, ToolThreads


def act(tool_name: str, value: dict[str, object]) -> str:
    return f" Use it.\nAction: {tool_name}\nAction Input: {json.dumps(value)}"


async def test_a_hung_sync_tool_stalls_neither_its_agent_nor_other_sessions() -> None:
    release = threading.Event()

    @tool(timeout=1.0)
    def hang() -> str:
        """Never returns on its own."""
        release.wait(30)
        return "late"

    @tool
    def quick(key: str) -> str:
        """Returns at once."""
        return f"value-{key}"

    async with loop_gaps() as gaps:
        stuck = Agent(model=ScriptedModel([act("hang", {}), " Gave up.\nFinal Answer: hung"]), tools=[hang])
        hung = asyncio.create_task(stuck.arun("wait"))
        await asyncio.sleep(0.1)  # the hung call is on its thread now
        busy = Agent(
            model=ScriptedModel([act("quick", {"key": str(i)}) for i in range(20)] + [" Done.\nFinal Answer: ok"]),
            tools=[quick],
            max_steps=25,
        )
        started = time.perf_counter()
        other = await busy.arun("go")
        assert other.answer == "ok" and time.perf_counter() - started < 0.9  # done while the hung call waits
        assert [s.observation for s in other.steps[:3]] == ["value-0", "value-1", "value-2"]
        result = await hung
        release.set()
    assert "did not return within 1 s" in (result.steps[0].observation or "")
    assert result.answer == "hung"
    assert max(gaps) < 0.25, f"the event loop stalled {max(gaps):.3f} s"


async def test_a_step_streams_its_thought_and_action_before_its_tool_runs() -> None:
    seen: list[str] = []

    @tool
    def look(key: str) -> str:
        """Record that the call ran."""
        seen.append(f"ran {key}")
        return f"value-{key}"

    agent = Agent(model=ScriptedModel([act("look", {"key": "a"}), " Done.\nFinal Answer: ok"]), tools=[look])
    async for event in agent.stream("go"):
        seen.append(event.type)
    assert seen == ["user", "thought", "action", "ran a", "observation", "answer"]


async def test_the_threads_of_a_pool_nobody_holds_end_once_their_calls_return() -> None:
    release = threading.Event()

    @tool(timeout=0.1)
    def slow(wait: bool) -> str:
        """Returns at once, or when released."""
        if wait:
            release.wait(5)
        return "back"

    def alive() -> int:  # this pool's threads: those started during this test
        return sum(t.name == "reactchat-tool" and t not in before for t in threading.enumerate())

    async def threads_left(expected: int) -> int:
        for _ in range(200):
            gc.collect()
            if alive() == expected:
                break
            await asyncio.sleep(0.01)
        return alive()

    before = set(threading.enumerate())
    threads = ToolThreads(4)
    hung, quick = await asyncio.gather(
        slow.run({"wait": True}, None, threads), slow.run({"wait": False}, None, threads), return_exceptions=True
    )
    assert isinstance(hung, ToolTimeout) and quick == "back"  # one thread still busy, one idle
    assert alive() == 2
    del threads, hung  # the agent that owned the pool is gone
    release.set()
    assert await threads_left(0) == 0  # the idle one, and the busy one once its call returned


def test_a_forked_child_runs_its_own_calls_and_leaves_the_parents_threads_alone() -> None:
    threads = ToolThreads(2)

    def where() -> str:
        return threading.current_thread().name

    def returned(call: ThreadCall) -> object:
        return asyncio.run(call.settled(2, TimeoutError("the call did not return within 2 s")))

    assert returned(threads.start(where)) == "reactchat-tool"  # the pool has an idle thread
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads
        pid = os.fork()
    if pid == 0:  # the child: the parent's thread did not come along
        try:
            os.write(write, b"ran" if returned(threads.start(where)) == "reactchat-tool" else b"other")
        except BaseException:
            os.write(write, b"hung")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 10) == b"ran"
    os.close(read)
    os.close(write)
    assert returned(threads.start(where)) == "reactchat-tool"  # the parent's thread still waits for its calls
