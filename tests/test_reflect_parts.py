"""Reflexion's parts: evaluators of each kind, prompts in each language, memory across sessions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reactchat import ScriptedModel, tool
from reactchat.orchestration.reflexion import (
    Command,
    ReflectionMemory,
    Reflexion,
    evaluate,
    fingerprint,
    lessons,
    reflection_request,
)
from reactchat.protocols.packs import get_pack
from reactchat.store import resolve_store

EN = get_pack("en")


async def verdict(evaluator: object, answer: str, model: ScriptedModel | None = None) -> tuple[bool, str]:
    reflexion = Reflexion(evaluator=evaluator)  # type: ignore[arg-type]
    result = await evaluate(reflexion, answer, "What is 80.16 * 1.15?", (model or ScriptedModel([])).complete, EN)
    return result.accepted, result.feedback


async def test_function_evaluators_sync_async_and_with_the_task() -> None:
    assert await verdict(lambda a: True if "92.18" in a else "the number is wrong", "92.184") == (True, "")
    assert await verdict(lambda a: True if "92.18" in a else "the number is wrong", "80") == (
        False,
        "the number is wrong",
    )

    async def check(answer: str, task: str) -> bool | str:
        return True if "80.16" in task and answer == "92.184" else f"not for {task}"

    assert await verdict(check, "92.184") == (True, "")
    assert (await verdict(check, "1"))[1] == "not for What is 80.16 * 1.15?"
    assert (await verdict(lambda a: False, "1"))[0] is False


async def test_an_evaluator_that_raises_rejects_with_its_error() -> None:
    def broken(answer: str) -> bool:
        raise KeyError("grader")

    assert await verdict(broken, "x") == (False, "the evaluator raised KeyError: 'grader'")


async def test_tool_evaluator() -> None:
    @tool
    def grade(answer: str) -> bool | str:
        """Grade an answer."""
        return True if answer.strip() == "92.184" else "expected three decimals"

    assert await verdict(grade, "92.184") == (True, "")
    assert await verdict(grade, "92.18") == (False, "expected three decimals")


async def test_command_evaluator_reads_stdin_and_the_task(tmp_path: Path) -> None:
    script = tmp_path / "check.py"
    script.write_text(
        "import os, sys\n"
        "answer = sys.stdin.read()\n"
        "if '80.16' not in os.environ['REACTCHAT_TASK']: sys.exit(9)\n"
        "if answer.strip() != '92.184': print('wrong number:', answer); sys.exit(1)\n"
    )
    assert await verdict(Command([sys.executable, str(script)]), "92.184") == (True, "")
    assert await verdict(Command([sys.executable, str(script)]), "90") == (False, "wrong number: 90")
    slow = Command([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.2)
    assert await verdict(slow, "x") == (False, "the evaluator command did not finish within 0.2 s")


async def test_the_model_as_judge() -> None:
    judge = ScriptedModel(["ACCEPT", "REJECT: the 15% was added twice", "no idea"])
    assert await verdict("model", "92.184", judge) == (True, "")
    assert await verdict("model", "106", judge) == (False, "the 15% was added twice")
    assert await verdict("model", "?", judge) == (False, "no idea")
    asked = judge.requests[0].messages[1].content  # type: ignore[union-attr]
    assert "What is 80.16 * 1.15?" in asked and "92.184" in asked


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_trials"):
        Reflexion(evaluator="model", max_trials=0)
    with pytest.raises(ValueError, match="unknown evaluator 'judge'"):
        Reflexion(evaluator="judge")
    assert Reflexion(evaluator="model").kind == "model"
    assert Reflexion(evaluator=Command(["true"])).kind == "command"
    assert Reflexion(evaluator=lambda a: True).kind == "function"


@pytest.mark.parametrize("language", ["en", "fr", "ja"])
def test_reflection_prompt_and_lessons_in_each_language(language: str) -> None:
    pack = get_pack(language)
    request = reflection_request(pack, "Q?", "Action: calculator", "80", "the number is wrong")
    text = request.messages[1].content  # type: ignore[union-attr]
    assert "Q?" in text and "Action: calculator" in text and "80" in text and "the number is wrong" in text
    shown = lessons(pack, ["Use the\n calculator.", "Check the units."])
    assert shown.splitlines()[1:] == ["1. Use the calculator.", "2. Check the units."]
    assert lessons(pack, []) == ""


def test_fingerprint_normalises_the_task_and_separates_agents() -> None:
    assert fingerprint("a", "What is  80.16 * 1.15?") == fingerprint("a", "what is 80.16 * 1.15? ")
    assert fingerprint("a", "ＡＢＣ") == fingerprint("a", "abc")
    assert fingerprint("a", "x") != fingerprint("b", "x")
    assert fingerprint("a", "x") != fingerprint("a", "y")


async def test_memory_is_bounded_expires_and_survives_a_restart(store_url: str) -> None:
    now = [1000.0]
    reflexion = Reflexion(evaluator="model", window=2, remember=True, memory_size=3, memory_ttl=100.0)
    store = resolve_store(store_url)
    memory = ReflectionMemory(store, reflexion, clock=lambda: now[0])
    key, other = fingerprint("a", "task"), fingerprint("a", "other")
    await memory.keep(other, "elsewhere")  # at 1000
    for i in range(5):
        now[0] += 1
        await memory.keep(key, f"lesson {i}")  # lesson 2 at 1003 … lesson 4 at 1005
    assert await memory.recall(key) == ["lesson 3", "lesson 4"]  # the window: the newest two, oldest first
    wide = ReflectionMemory(store, Reflexion(evaluator="model", window=10, remember=True), clock=lambda: now[0])
    assert await wide.recall(key) == ["lesson 2", "lesson 3", "lesson 4"]  # the bound: three kept
    if not store_url.startswith("memory"):
        await store.close()
        store = resolve_store(store_url)  # another process, later
        wide.store = store
        assert await wide.recall(key) == ["lesson 2", "lesson 3", "lesson 4"]
    now[0] += 99.5  # lessons 2 and 3 are now older than the ttl
    memory.store = store
    assert await memory.recall(key) == ["lesson 4"]
    await memory.keep(other, "new")  # adding prunes expired rows everywhere
    assert await ReflectionMemory(store, wide.reflexion, clock=lambda: 0.0).recall(key) == ["lesson 4"]
    assert await memory.recall(other) == ["new"]
    assert await ReflectionMemory(store, Reflexion(evaluator="model"), clock=lambda: now[0]).recall(key) == []
    await store.close()


async def test_a_store_without_memory_is_a_clear_error() -> None:
    memory = ReflectionMemory(object(), Reflexion(evaluator="model", remember=True))
    with pytest.raises(TypeError, match="cannot remember reflections"):
        await memory.recall("k")
