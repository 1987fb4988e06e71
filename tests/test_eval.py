"""reactchat.evals from Python: cases, scorers and the runner, on every store."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from reactchat import Agent, ScriptedModel
from reactchat.engine.session import SessionState
from reactchat.engine.usage import total
from reactchat.evals import BadCases, Case, EvalReport, compare, load_cases, parse_cases, run_eval, score
from reactchat.messages import Event, Request
from reactchat.toolbox import calculator

ASK = ' I need the city.\nAction: ask_user\nAction Input: {"question": "Which city?"}'


def last_user_text(request: Request) -> str:
    """The question and the scratchpad so far (the text protocol prefills the assistant's steps)."""
    texts = []
    for message in request.messages[1:]:
        content = getattr(message, "content", None)
        texts.append(content if isinstance(content, str) else "".join(p.text for p in getattr(message, "parts", [])))
    return "\n".join(texts)


def arithmetic(request: Request) -> str:
    """A model that computes 'What is A * B?' with the calculator, then answers."""
    text = last_user_text(request)
    if "Observation:" in text:
        value = re.findall(r"Observation: (\S+)", text) or ["?"]
        return f" I know it.\nFinal Answer: It is {value[-1]}."
    a, b = re.findall(r"\d+(?:\.\d+)?", text)[-2:]
    return f' I will compute it.\nAction: calculator\nAction Input: {{"expression": "{a} * {b}"}}'


def test_scorers_judge_answers() -> None:
    number = Case(id="n", input=["q"], expected=92.184)
    assert score(number, "80.16 * 1.15 gives 92.184.") and not score(number, "It is 92.18.")
    assert score(Case(id="t", input=["q"], expected=92.18, tolerance=0.01), "about 92.184")
    assert score(Case(id="k", input=["q"], expected=1234.5), "1,234.5 in all")
    assert not score(number, "no number here") and not score(number, None)
    assert score(Case(id="e", input=["q"], expected="Lyon", scorer="exact"), " Lyon\n")
    assert not score(Case(id="e", input=["q"], expected="Lyon", scorer="exact"), "Lyon.")
    contains = Case(id="c", input=["q"], expected=["paris", "465"], scorer="contains")
    assert score(contains, "Paris is 465 km away") and not score(contains, "Paris is far")
    assert not score(Case(id="p", input=["q"], expected=3, scorer="python:tests.test_eval:has_length"), "four")
    assert score(Case(id="p", input=["q"], expected=3, scorer="python:tests.test_eval:has_length"), "two")


def has_length(answer: str, case: Case) -> bool:
    """A ``python:`` scorer for the test above: the answer has ``expected`` letters."""
    return len(answer) == case.expected


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": "a", "input": "q", "expected": 1', "not JSON"),
        ('{"id": "a", "expected": 1}', '"input" must be'),
        ('{"id": "a", "input": "q", "expected": "ten"}', "needs a number"),
        ('{"id": "a", "input": "q", "expected": 1, "scorer": "fuzzy"}', "unknown scorer"),
        ('{"id": "a", "input": "q", "expected": 1, "scorer": "python:no_such_module:f"}', "cannot import"),
        ('{"id": "a", "input": "q", "expected": 1, "answer": ["x"]}', "unknown field 'answer'"),
        ('{"id": "b", "input": "q", "expected": 2}', "used twice"),
    ],
)
def test_a_bad_line_is_refused_with_its_number(line: str, reason: str) -> None:
    text = '{"id": "b", "input": "q", "expected": 1}\n\n' + line
    with pytest.raises(BadCases, match=rf"<cases>:3: .*{re.escape(reason)}"):
        parse_cases(text)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(BadCases, match="cannot read"):
        load_cases(tmp_path / "none.jsonl")


def test_cases_run_concurrently_and_each_keeps_its_session(store_url: str) -> None:
    model = ScriptedModel([arithmetic] * 40, delay=0.05)
    agent = Agent(model=model, tools=[calculator], store=store_url)
    lines = [
        {"id": f"m{i}", "input": f"What is {i} * 1.5?", "expected": i * 1.5, "tags": ["math"]} for i in range(1, 11)
    ]
    lines[3]["expected"] = 99  # a wrong expectation: this case must fail
    cases = parse_cases("\n".join(json.dumps(line) for line in lines))
    seen: list[str] = []

    async def main() -> tuple[EvalReport, SessionState]:
        try:
            report = await run_eval(agent, cases, concurrency=10, on_result=lambda r: seen.append(r.id))
            return report, await agent.state(report.cases[3].session)
        finally:
            await agent.store.close()

    report, failed_state = asyncio.run(main())
    assert (report.passed, report.total) == (9, 10)
    assert [c.id for c in report.cases] == [c.id for c in cases] and sorted(seen) == sorted(c.id for c in cases)
    assert report.seconds < 0.05 * 20 * 0.8  # 20 model calls of 50 ms: overlapped, not one after another
    assert report.by_tag() == {"math": (9, 10)}
    failed = report.cases[3]
    assert not failed.passed and failed.answer == "It is 6."
    # the failed case's session is stored: its steps say what the agent did
    assert failed_state.turns[-1].steps()[0].tool == "calculator"
    assert report.cases[0].usage["calls"] == 2 and report.tokens > 0


def test_several_turns_and_scripted_answers_to_questions() -> None:
    def replies(request: Request) -> str:
        text = last_user_text(request)
        if "Observation: Lyon" in text:
            return " Lyon it is.\nFinal Answer: Paris is 465 km from Lyon."
        if "How far" in text:
            return ASK
        return " A greeting.\nFinal Answer: Hello."

    agent = Agent(model=ScriptedModel([replies] * 10), tools=[calculator])
    both = Case(id="two", input=["Hi", "How far is Paris?"], answers=["Lyon"], expected="465 km", scorer="contains")
    unanswered = Case(id="open", input=["How far is Paris?"], expected="465", scorer="contains")
    report = asyncio.run(run_eval(agent, [both, unanswered]))
    first, second = report.cases
    assert first.passed and first.answer == "Paris is 465 km from Lyon."
    assert len(asyncio.run(agent.state(first.session)).turns) == 2
    assert not second.passed and second.status == "waiting" and second.answer is None


def test_a_case_whose_model_fails_is_reported_and_the_others_run() -> None:
    agent = Agent(model=ScriptedModel([" Easy.\nFinal Answer: 4"]), tools=[calculator])
    report = asyncio.run(
        run_eval(
            agent,
            parse_cases('{"id": "a", "input": "2+2?", "expected": 4}\n{"id": "b", "input": "3+3?", "expected": 6}'),
            concurrency=1,
        )
    )
    assert [c.passed for c in report.cases] == [True, False]
    assert report.cases[1].error is not None and "no reply left" in report.cases[1].error


def test_a_case_reports_the_usage_its_stored_session_shows(store_url: str) -> None:
    """The runner counts the events its turns yielded, not a read of the store: the same totals
    as the stored session (``reactchat show --json``), sub-agents and a second turn included."""

    def helper_replies(request: Request) -> str:
        return " Adding.\nFinal Answer: 3"

    def boss_replies(request: Request) -> str:
        text = last_user_text(request)
        if "Observation: Lyon" in text:
            return " Both known.\nFinal Answer: 3 in Lyon"
        if "Observation: 3" in text:
            return ASK
        if "Add 1 and 2" in text:
            return ' Delegate.\nAction: helper\nAction Input: {"task": "add 1 and 2"}'
        return " A greeting.\nFinal Answer: Hello."

    helper = Agent(model=ScriptedModel([helper_replies] * 4), name="helper", description="Adds.")
    agent = Agent(model=ScriptedModel([boss_replies] * 8), tools=[helper], name="boss", store=store_url)
    turns = ["Hi", "Add 1 and 2 where I am."]
    case = Case(id="team", input=turns, answers=["Lyon"], expected="3 in Lyon", scorer="exact")

    async def main() -> tuple[EvalReport, list[Event]]:
        try:
            report = await run_eval(agent, [case])
            return report, await agent.store.events(report.cases[0].session)
        finally:
            await agent.store.close()

    report, stored = asyncio.run(main())
    done = report.cases[0]
    assert done.passed, done
    assert done.usage == total(stored).to_dict()
    assert done.usage["calls"] == 5 and set(done.usage["agents"]) == {"boss", "boss/helper"}


def test_a_case_that_fails_in_its_first_turn_still_names_its_stored_session() -> None:
    agent = Agent(model=ScriptedModel([]), tools=[calculator])
    report = asyncio.run(run_eval(agent, parse_cases('{"id": "a", "input": "2+2?", "expected": 4}')))
    failed = report.cases[0]
    assert not failed.passed and failed.error is not None and failed.session
    events = asyncio.run(agent.store.events(failed.session))
    assert [e.type for e in events][:1] == ["user"] and events[0].text == "2+2?"


def test_compare_lists_what_changed() -> None:
    agent = Agent(model=ScriptedModel([" Easy.\nFinal Answer: 4", " Easy.\nFinal Answer: 5"]), tools=[calculator])
    cases = parse_cases('{"id": "a", "input": "2+2?", "expected": 4}\n{"id": "b", "input": "3+3?", "expected": 6}')
    report = asyncio.run(run_eval(agent, cases, concurrency=1))
    changes = compare({"a": False, "b": True, "c": True}, report)
    assert (changes.fixed, changes.broken, changes.added, changes.removed) == (["a"], ["b"], [], ["c"])
