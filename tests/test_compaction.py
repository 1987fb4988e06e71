"""Compaction by summary: long conversations and long turns stay within the context window,
and what the oldest turns and steps said stays reachable through stored summaries."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from reactchat import Agent, tool
from reactchat.agent import _thread_loop
from reactchat.cli.report import session_tree
from reactchat.errors import ConfigError
from reactchat.messages import (
    AnswerEvent,
    AssistantMessage,
    CompactionEvent,
    Reply,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
)
from reactchat.models import ModelError
from reactchat.protocols.packs import PACKS
from reactchat.server import create_app
from server_support import running

SUMMARY = PACKS["en"].summary_system
SUMMARIES = {pack.summary_system for pack in PACKS.values()}
FACT = re.compile(r"code (\d+) is (\d+)")
SHORT = re.compile(r"\b(\d+)=(\d+)\b")


def value(n: int) -> int:
    """The number planted at turn (or step) ``n``."""
    return (n * 7919) % 100_000


def prompt_text(request: Request) -> str:
    """Everything a request sends, as text."""
    parts = []
    for message in request.messages:
        if isinstance(message, AssistantMessage):
            parts += [p.text if isinstance(p, TextPart) else f"{p.name}{p.input}" for p in message.parts]
        else:
            parts.append(message.content)
    return "\n".join(parts)


def known(text: str) -> dict[int, int]:
    """The facts a prompt holds, in either form (``code N is X`` or a summary's ``N=X``)."""
    pairs = FACT.findall(text) + SHORT.findall(text)
    return {int(n): int(v) for n, v in pairs}


class Oracle:
    """A scripted model that answers summary requests distinctly: a summary is every fact
    of the request written short (``N=X``); a turn's message ``remember code N is X`` is
    acknowledged, ``what is code N?`` answered from the prompt; with ``steps``, the first
    turn calls ``read(n)`` that many times before answering."""

    name = "oracle"
    supports_tools = True
    context_tokens: int | None = None

    def __init__(self, steps: int = 0, fail: str = "") -> None:
        self.steps = steps
        #: ``error``: every summary call fails; ``long``: every summary is far too long;
        #: ``forgetful``: every summary keeps no number
        self.fail = fail
        self.requests: list[Request] = []
        self.summaries: list[Request] = []
        self.calls = 0

    async def complete(self, request: Request) -> Reply:
        """A summary, a tool call or an answer."""
        usage = Usage(input_tokens=len(prompt_text(request)) // 4, output_tokens=10)
        if request.messages[0].content in SUMMARIES:
            self.summaries.append(request)
            if self.fail == "error":
                raise ModelError("the summary call failed")
            text = " ".join(f"{n}={v}" for n, v in known(request.messages[1].content).items())
            if self.fail == "forgetful":  # a small model's summary: the numbers are gone
                text = "The user told me many codes."
            return Reply(parts=[TextPart(text=text * (50 if self.fail == "long" else 1))], usage=usage)
        self.requests.append(request)
        native = bool(request.tools)
        if self.calls < self.steps:
            self.calls += 1
            if native:
                call = ToolCallPart(id=f"c{self.calls}", name="read", input={"n": self.calls})
                return Reply(parts=[call], stop_reason="tool_use", usage=usage)
            text = f' I read page {self.calls}.\nAction: read\nAction Input: {{"n": {self.calls}}}'
            return Reply(parts=[TextPart(text=text)], usage=usage)
        return Reply(parts=[TextPart(text=self.answer(request, native))], usage=usage)

    def answer(self, request: Request, native: bool) -> str:
        prompt = prompt_text(request)
        question = prompt.rsplit("Question: ", 1)[-1] if not native else self.question(request)
        asked = re.search(r"what is code (\d+)\?", question)
        if asked:
            found = known(prompt).get(int(asked.group(1)))
            text = f"code {asked.group(1)} is {found}" if found is not None else "I do not know"
        elif self.steps:
            text = f"read {len(known(prompt))} pages"
        else:
            text = "noted: " + question.split("remember ", 1)[-1].split("\n", 1)[0]
        return text if native else f" I can answer.\nFinal Answer: {text}"

    @staticmethod
    def question(request: Request) -> str:
        users = [m.content for m in request.messages if m.role == "user"]
        return users[-1] if users else ""


@tool
def read(n: int) -> str:
    """Read page n."""
    return f"code {n} is {value(n)}\n" + "lorem ipsum " * 1700  # 20 KB


def within(requests: list[Request], tokens: int) -> int:
    """The largest prompt sent, in tokens (4 characters each), checked against ``tokens``."""
    largest = max(len(prompt_text(r)) // 4 for r in requests)
    assert largest <= tokens, f"a prompt of {largest} tokens passed the window of {tokens}"
    return largest


async def test_a_200_turn_conversation_stays_within_the_window_with_every_answer_reachable(store_url: str) -> None:
    oracle = Oracle()
    agent = Agent(oracle, store=store_url, compact_at=0.8, context_tokens=3000, ask_user=False)
    session = None
    for n in range(1, 201):
        result = await agent.arun(f"remember code {n} is {value(n)}", session)
        session = result.session
        assert result.status == "done"
    assert session is not None
    within(oracle.requests, 3000)
    reachable = known(prompt_text(oracle.requests[-1]))
    assert all(reachable.get(n) == value(n) for n in range(1, 201)), sorted(set(range(1, 201)) - set(reachable))
    result = await agent.arun("what is code 3?", session)
    assert result.answer == f"code 3 is {value(3)}"
    events = await agent.store.events(session)
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    assert len(compactions) == len(oracle.summaries) >= 1
    assert [c.through_turn for c in compactions] == sorted({c.through_turn for c in compactions})
    assert all(c.covers == "turns" and c.usage is not None for c in compactions)
    # nothing is deleted: every turn's answer is still stored
    assert len([e for e in events if isinstance(e, AnswerEvent)]) == 201
    await agent.store.close()


async def test_without_compaction_the_oldest_turns_are_forgotten() -> None:
    oracle = Oracle()
    agent = Agent(oracle, context_tokens=3000, history_tokens=300, ask_user=False)
    session = None
    for n in range(1, 41):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    result = await agent.arun("what is code 3?", session)
    assert result.answer == "I do not know" and not oracle.summaries


@pytest.mark.parametrize("protocol", ["react", "native"])
async def test_a_60_step_turn_with_20_kb_observations_finishes(protocol: str) -> None:
    oracle = Oracle(steps=59)
    agent = Agent(
        oracle,
        [read],
        protocol=protocol,  # type: ignore[arg-type]
        compact_at=0.8,
        context_tokens=16_000,
        max_steps=60,
        max_observation_chars=25_000,
        ask_user=False,
    )
    result = await agent.arun("read every page")
    assert result.status == "done", result.reason
    within(oracle.requests, 16_000)
    # the first pages' facts reached the answer through the summaries
    assert result.answer == "read 59 pages"
    steps = [e for e in result.events if isinstance(e, CompactionEvent)]
    assert steps and all(e.covers == "steps" and e.through_step > 0 for e in steps)
    last = oracle.requests[-1]
    if protocol == "native":  # every tool call the prompt shows still has its result
        assistants = [m for m in last.messages if isinstance(m, AssistantMessage)]
        called = {p.id for m in assistants for p in m.parts if isinstance(p, ToolCallPart)}
        answered = {m.call_id for m in last.messages if isinstance(m, ToolResultMessage)}
        assert called == answered


async def test_a_failed_summary_falls_back_to_dropping_without_an_error() -> None:
    for fail in ("error", "long"):
        oracle = Oracle(fail=fail)
        agent = Agent(oracle, compact_at=0.8, context_tokens=2000, ask_user=False)
        session = None
        for n in range(1, 121):
            result = await agent.arun(f"remember code {n} is {value(n)}", session)
            session = result.session
            assert result.status == "done"
        within(oracle.requests, 2000)
        assert oracle.summaries
        events = await agent.store.events(result.session)
        assert not [e for e in events if isinstance(e, CompactionEvent)]


async def test_compact_now_summarises_every_answered_turn() -> None:
    oracle = Oracle()
    agent = Agent(oracle, compact_at=0.8, context_tokens=3000, ask_user=False)
    session = None
    for n in range(1, 6):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    assert session is not None
    event = await agent.compact(session)
    assert event is not None and event.through_turn == 5 and event.turn == 5
    assert known(event.summary) == {n: value(n) for n in range(1, 6)}
    assert await agent.compact(session) is None  # nothing new to summarise
    result = await agent.arun("what is code 2?", session)
    assert result.answer == f"code 2 is {value(2)}"
    prompt = oracle.requests[-1].messages[1].content
    assert "Summary of the earlier conversation:" in prompt and "Conversation so far:" not in prompt


async def test_compaction_while_an_ask_user_question_is_pending() -> None:
    asked = 0

    class Asker(Oracle):
        async def complete(self, request: Request) -> Reply:
            nonlocal asked
            question = prompt_text(request).rsplit("Question: ", 1)[-1]
            if request.messages[0].content != SUMMARY and "ask me" in question and "Observation:" not in question:
                asked += 1
                self.requests.append(request)
                text = ' I must ask.\nAction: ask_user\nAction Input: {"question": "Which code?"}'
                return Reply(parts=[TextPart(text=text)])
            return await super().complete(request)

    oracle = Asker()
    agent = Agent(oracle, compact_at=0.8, context_tokens=3000)
    session = None
    for n in range(1, 6):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    waiting = await agent.arun("ask me what is code 4?", session)
    assert waiting.status == "waiting" and asked == 1
    event = await agent.compact(waiting.session)
    assert event is not None and event.through_turn == 5  # the waiting turn is not summarised
    state = await agent.state(waiting.session)
    assert state.last is not None and state.last.status == "waiting"
    result = await agent.arun("code 4, please", waiting.session, reply_to=waiting.pending.call_id)  # type: ignore[union-attr]
    assert result.status == "done" and result.answer == f"code 4 is {value(4)}"


async def test_compaction_of_steps_survives_a_pause_and_replay() -> None:
    class PausingOracle(Oracle):
        async def complete(self, request: Request) -> Reply:
            if request.messages[0].content != SUMMARY and self.calls == 10 and not self.paused:
                self.paused = True
                self.requests.append(request)
                text = ' I must ask.\nAction: ask_user\nAction Input: {"question": "Go on?"}'
                return Reply(parts=[TextPart(text=text)])
            return await super().complete(request)

    oracle = PausingOracle(steps=20)
    oracle.paused = False  # type: ignore[attr-defined]
    agent = Agent(oracle, [read], compact_at=0.8, context_tokens=16_000, max_steps=30, max_observation_chars=25_000)
    waiting = await agent.arun("read every page")
    assert waiting.status == "waiting"
    assert any(isinstance(e, CompactionEvent) for e in waiting.events)
    before = len(oracle.requests)
    result = await agent.arun("yes", waiting.session)
    assert result.status == "done" and result.answer == "read 20 pages"
    # the replayed transcript carried the stored summary: the first prompt after the reply fits
    within(oracle.requests[before:], 16_000)
    assert "Summary of the earlier steps" in prompt_text(oracle.requests[before])


def test_compact_at_out_of_range_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="compact_at"):
        Agent(Oracle(), compact_at=1.5)


def test_show_and_the_session_endpoint_show_the_summary(tmp_path: Path) -> None:
    agent = Agent(Oracle(), store=f"sqlite:///{tmp_path / 's.db'}", compact_at=0.8, context_tokens=3000, ask_user=False)
    session = None
    for n in range(1, 4):
        session = agent.run(f"remember code {n} is {value(n)}", session).session
    assert session is not None
    _thread_loop().run(agent.compact(session))
    state = _thread_loop().run(agent.state(session))
    assert f"Summary of turns 1-3: 1={value(1)} 2={value(2)} 3={value(3)}" in session_tree(state)
    with running(create_app(agent)) as url:
        body = httpx.get(f"{url}/v1/sessions/{session}").json()
    stored = [e for turn in body["turns"] for e in turn["events"] if e["type"] == "compaction"]
    assert stored == [
        {**stored[0], "covers": "turns", "through_turn": 3, "summary": f"1={value(1)} 2={value(2)} 3={value(3)}"}
    ]


async def test_the_summary_prompt_and_its_header_come_from_the_prompt_pack() -> None:
    oracle = Oracle()
    agent = Agent(oracle, language="fr", compact_at=0.8, context_tokens=3000, ask_user=False)
    session = None
    for n in range(1, 4):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    assert session is not None and await agent.compact(session) is not None
    assert oracle.summaries[-1].messages[1].content.startswith("Résumé jusqu'ici :")
    result = await agent.arun("what is code 1?", session)
    assert result.answer == f"code 1 is {value(1)}"
    assert "Résumé de la conversation précédente :" in oracle.requests[-1].messages[1].content


async def test_a_failed_summary_of_steps_is_not_asked_again_in_the_run() -> None:
    oracle = Oracle(steps=20, fail="error")
    agent = Agent(oracle, [read], compact_at=0.8, context_tokens=16_000, max_steps=30, max_observation_chars=25_000)
    result = await agent.arun("read every page")
    assert result.status == "done" and len(oracle.summaries) == 1
    within(oracle.requests, 16_000)  # old observations were elided instead
    assert not [e for e in result.events if isinstance(e, CompactionEvent)]


async def test_the_compaction_streams_with_its_turn_after_the_message() -> None:
    agent = Agent(Oracle(), compact_at=0.8, context_tokens=1200, ask_user=False)
    session, streamed = None, []
    for n in range(1, 30):
        result = await agent.arun(f"remember code {n} is {value(n)}" + " and so on" * 40, session)
        session = result.session
        streamed += [[e.type for e in result.events]]
    made = [types for types in streamed if "compaction" in types]
    assert made and all(types[:2] == ["user", "compaction"] for types in made), made
    assert session is not None
    stored = [e for e in await agent.store.events(session) if isinstance(e, CompactionEvent)]
    assert len(stored) == len(made)


class CharTokens(Oracle):
    """An oracle whose tokenizer counts a token a character, as tokenizers nearly do on Japanese."""

    def count_tokens(self, text: str) -> int:
        return len(text)


async def test_compaction_keeps_prompts_within_the_window_by_the_models_own_token_count() -> None:
    oracle = CharTokens()
    agent = Agent(oracle, compact_at=0.8, context_tokens=3000, ask_user=False)
    session = None
    for n in range(1, 61):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    largest = max(len(prompt_text(r)) for r in oracle.requests)
    assert largest <= 3000, f"a prompt of {largest} tokens passed the window of 3000"
    reachable = known(prompt_text(oracle.requests[-1]))
    assert all(reachable.get(n) == value(n) for n in range(1, 61))
    assert oracle.summaries


async def test_a_fact_the_summary_lost_is_recalled_from_the_turn_that_said_it(store_url: str) -> None:
    oracle = Oracle(fail="forgetful")
    agent = Agent(oracle, store=store_url, compact_at=0.8, context_tokens=800, ask_user=False)
    session = None
    for n in range(1, 41):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    assert oracle.summaries and session is not None
    result = await agent.arun("what is code 3?", session)
    assert result.answer == f"code 3 is {value(3)}"
    prompt = oracle.requests[-1].messages[1].content
    assert "The user told me many codes." in prompt  # the summary, which lost it
    recalled = prompt.split(PACKS["en"].recalled_header, 1)[1].split(PACKS["en"].history_header, 1)[0]
    assert f"remember code 3 is {value(3)}" in recalled
    assert recalled.count("User:") <= 2
    await agent.store.close()


async def test_without_compaction_the_history_fits_its_tokens_by_the_models_own_count() -> None:
    oracle = CharTokens()  # a token a character: history_tokens=300 is 300 characters, not 1,200
    agent = Agent(oracle, history_tokens=300, ask_user=False)
    session = None
    for n in range(1, 21):
        session = (await agent.arun(f"remember code {n} is {value(n)}", session)).session
    last = oracle.requests[-1].messages[1].content
    history = last.split(PACKS["en"].history_header, 1)[1] if PACKS["en"].history_header in last else ""
    carried = sum(
        len(line.split(": ", 1)[-1]) for line in history.splitlines() if line.startswith(("User:", "Assistant:"))
    )
    assert 0 < carried <= 300, carried
