"""The seed scenarios end to end: a scripted model, real tools, the real loop."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from reactchat import Agent, ContextTooLong, ModelError, ScriptedModel, calculator, tool
from reactchat.messages import AnswerEvent, ErrorEvent, ObservationEvent
from reactchat.models import tool_call, tool_calls


@tool
def web_search(query: str) -> str:
    """Search the web for open information."""
    return "According to online sources, a bouquet of roses in the US costs 80.16 dollars."


def final(text: str) -> str:
    return f" I now know the final answer.\nFinal Answer: {text}"


def act(tool_name: str, arguments: object, thought: str = "I should use a tool.") -> str:
    value = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return f" {thought}\nAction: {tool_name}\nAction Input: {value}"


def test_rose_price_search_then_calculator() -> None:
    model = ScriptedModel(
        [
            act("web_search", {"query": "average price of roses"}),
            act("calculator", {"expression": "80.16 * 1.15"}, "I need a 15% markup."),
            final("Sell them at 92.184 dollars."),
        ]
    )
    agent = Agent(model=model, tools=[web_search, calculator])
    result = agent.run("What is the average price of roses? What price with a 15% markup?")

    assert result.status == "done"
    assert result.answer == "Sell them at 92.184 dollars."
    assert [s.tool for s in result.steps] == ["web_search", "calculator", None]
    assert result.steps[1].observation == "92.184"
    # the model saw the search result before it computed, and the computation before it answered
    last_prompt = model.requests[-1].messages[-1].text
    assert "80.16 dollars" in last_prompt and "Observation: 92.184" in last_prompt
    assert last_prompt.endswith("Thought:")
    model.assert_complete()


def test_get_planet_mass_self_correction() -> None:
    calls: list[str] = []

    @tool
    def get_planet_mass(planet: str) -> str:
        """Mass of a planet in kilograms."""
        calls.append(planet)
        return {"Earth": "5.972e24 kg"}.get(planet, "unknown planet")

    model = ScriptedModel(
        [
            act("get_planet_mass", "{planet: 'Earth'"),  # broken beyond unambiguous repair
            act("get_planet_mass", {"planet": "Earth"}, "The input must be valid JSON."),
            final("Earth weighs 5.972e24 kg."),
        ]
    )
    result = Agent(model=model, tools=[get_planet_mass]).run("How heavy is the Earth?")

    assert result.answer == "Earth weighs 5.972e24 kg."
    first = result.steps[0]
    assert first.is_error and "not valid JSON" in (first.observation or "")
    assert '"planet"' in (first.observation or "")  # the schema is shown so the model can fix it
    assert calls == ["Earth"]  # the broken call never reached the tool


def test_single_quoted_json_is_repaired_without_a_round_trip() -> None:
    model = ScriptedModel([act("calculator", "{'expression': '2 ** 10',}"), final("1024")])
    result = Agent(model=model, tools=[calculator]).run("2 to the 10th?")
    assert result.steps[0].observation == "1024" and not result.steps[0].is_error


def test_unknown_tool_lists_tools_and_nearest_name() -> None:
    model = ScriptedModel(
        [act("calculater", {"expression": "1+1"}), act("calculator", {"expression": "1+1"}), final("2")]
    )
    result = Agent(model=model, tools=[calculator, web_search]).run("1+1?")
    observation = result.steps[0].observation or ""
    assert result.steps[0].is_error
    assert "calculator, web_search" in observation and "Did you mean 'calculator'" in observation
    assert result.answer == "2"


def test_bad_arguments_show_the_error_and_schema() -> None:
    @tool
    def repeat(word: str, times: int) -> str:
        """Repeat a word."""
        return " ".join([word] * times)

    model = ScriptedModel(
        [act("repeat", {"word": "ha", "times": "many"}), act("repeat", {"word": "ha", "times": 3}), final("ha ha ha")]
    )
    result = Agent(model=model, tools=[repeat]).run("laugh thrice")
    observation = result.steps[0].observation or ""
    assert "times" in observation and "integer" in observation and '"required"' in observation
    assert result.steps[1].observation == "ha ha ha"


def test_tool_that_raises_becomes_an_observation() -> None:
    @tool
    def flaky(city: str) -> str:
        """Weather for a city."""
        raise ConnectionError("weather service unreachable")

    model = ScriptedModel([act("flaky", {"city": "Lyon"}), final("I could not get the weather.")])
    result = Agent(model=model, tools=[flaky]).run("Weather in Lyon?")
    assert result.steps[0].observation == "Error: flaky raised ConnectionError: weather service unreachable"
    assert result.status == "done"


@pytest.mark.parametrize("is_async", [False, True])
def test_tool_that_hangs_times_out(is_async: bool) -> None:
    if is_async:

        async def hang(seconds: float) -> str:
            """Sleep."""
            await asyncio.sleep(seconds)
            return "woke up"

    else:

        def hang(seconds: float) -> str:
            """Sleep."""
            time.sleep(seconds)
            return "woke up"

    slow = tool(hang, timeout=0.2)
    model = ScriptedModel([act("hang", {"seconds": 3}), final("It hung.")])
    started = time.perf_counter()
    result = Agent(model=model, tools=[slow]).run("wait")
    assert time.perf_counter() - started < 2.5
    assert "did not return within 0.2 s" in (result.steps[0].observation or "")
    assert result.answer == "It hung."


def test_dead_loop_is_stopped_with_a_clear_status() -> None:
    executed: list[str] = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        executed.append(key)
        return "nothing found"

    same = act("lookup", {"key": "x"}, "Maybe it works this time.")
    model = ScriptedModel([same] * 4 + [" Best effort: nothing was found."])
    result = Agent(model=model, tools=[lookup], max_steps=20, max_repeats=3).run("find x")

    assert executed == ["x"]  # the identical call ran once
    assert "already called lookup" in (result.steps[1].observation or "")
    assert result.status == "stopped" and result.reason == "repeated_action"
    assert result.answer == "Best effort: nothing was found."
    assert len(model.requests) == 5


def test_a_read_repeated_after_a_write_runs_again_and_a_repeated_write_does_not() -> None:
    stock = {"apples": 3}
    ran: list[str] = []

    @tool(effect="read")
    def count(item: str) -> str:
        """How many are left."""
        ran.append("count")
        return str(stock[item])

    @tool
    def sell(item: str) -> str:
        """Sell one."""
        ran.append("sell")
        stock[item] -= 1
        return "sold"

    look, sale = act("count", {"item": "apples"}), act("sell", {"item": "apples"})
    model = ScriptedModel([look, look, sale, look, sale, final("2 left")])
    result = Agent(model=model, tools=[count, sell], max_repeats=5).run("sell one apple")

    assert ran == ["count", "sell", "count"]  # nothing sold in between: the same count
    assert [s.observation for s in result.steps[:4]][2:] == ["sold", "2"]  # read again, fresh
    assert "already called count" in (result.steps[1].observation or "")
    assert "already called sell" in (result.steps[4].observation or "")  # a write is not repeated
    assert stock == {"apples": 2} and result.answer == "2 left"


def test_volatile_tool_may_repeat() -> None:
    ticks = iter(range(100))

    @tool(volatile=True)
    def clock() -> str:
        """The current tick."""
        return str(next(ticks))

    model = ScriptedModel([act("clock", {}), act("clock", {}), final("1")])
    result = Agent(model=model, tools=[clock]).run("tick twice")
    assert [s.observation for s in result.steps[:2]] == ["0", "1"]


def test_ten_megabyte_observation_is_truncated_head_and_tail() -> None:
    @tool
    def dump() -> str:
        """Dump everything."""
        return "HEAD" + "x" * 10_000_000 + "TAIL"

    model = ScriptedModel([act("dump", {}), final("It was big.")])
    result = Agent(model=model, tools=[dump], max_observation_chars=2000).run("dump it")
    observation = result.steps[0].observation or ""
    assert len(observation) < 2200
    assert observation.startswith("HEAD") and observation.endswith("TAIL")
    cut = len("HEAD") + 10_000_000 + len("TAIL") - 2000  # the head and tail kept fill the limit
    assert f"{cut:,} characters cut" in observation
    assert next(e for e in result.events if isinstance(e, ObservationEvent)).truncated == cut
    assert len(model.requests[1].messages[-1].text) < 10_000


def test_per_tool_observation_limit() -> None:
    @tool(max_chars=100)
    def chatty() -> str:
        """Talk a lot."""
        return "y" * 5000

    model = ScriptedModel([act("chatty", {}), final("ok")])
    result = Agent(model=model, tools=[chatty], max_observation_chars=4000).run("talk")
    event = next(e for e in result.events if isinstance(e, ObservationEvent))
    assert len(event.text) < 250 and event.truncated == 4900


def test_step_budget_ends_with_a_marked_best_effort_answer() -> None:
    model = ScriptedModel([act("calculator", {"expression": f"{i}+1"}) for i in range(3)] + [" About 4."])
    result = Agent(model=model, tools=[calculator], max_steps=3).run("count")
    assert result.status == "stopped" and result.reason == "max_steps"
    assert result.answer == "About 4."
    answer = next(e for e in result.events if isinstance(e, AnswerEvent))
    assert answer.best_effort
    final_prompt = model.requests[-1].messages[-1].text
    assert "step budget is used up" in final_prompt and final_prompt.endswith("Final Answer:")
    assert model.requests[-1].react_tools == []  # the last answer may not name a tool


def test_return_direct_skips_the_summarising_call() -> None:
    @tool(return_direct=True)
    def weather(city: str) -> str:
        """Current weather."""
        return f"Sunny in {city}, 21 °C."

    model = ScriptedModel([act("weather", {"city": "Lyon"})])
    result = Agent(model=model, tools=[weather]).run("Weather in Lyon?")
    assert result.answer == "Sunny in Lyon, 21 °C." and result.status == "done"
    assert len(model.requests) == 1


def test_multi_turn_history_holds_questions_and_answers_not_scratchpads() -> None:
    model = ScriptedModel(
        [
            act("calculator", {"expression": "80.16 * 1.15"}),
            final("92.184"),
            final("You asked about a 15% markup."),
        ]
    )
    agent = Agent(model=model, tools=[calculator])
    first = agent.run("What is 80.16 with a 15% markup?")
    second = agent.run("What did I ask before?", session=first.session)
    assert second.answer == "You asked about a 15% markup."
    prompt = model.requests[-1].messages[1].content
    assert "What is 80.16 with a 15% markup?" in prompt and "92.184" in prompt
    assert "Action Input" not in prompt and "Observation" not in prompt
    assert second.turn == 2


def test_ask_user_pauses_and_resumes_with_the_reasoning() -> None:
    @tool
    def distance(origin: str, destination: str) -> str:
        """Road distance between two cities."""
        return {("Lyon", "Paris"): "465 km"}.get((origin, destination), "unknown")

    model = ScriptedModel(
        [
            act("ask_user", {"question": "Where are you?"}, "I need the user's location."),
            act("distance", {"origin": "Lyon", "destination": "Paris"}),
            final("Paris is 465 km away."),
        ]
    )
    agent = Agent(model=model, tools=[distance])
    waiting = agent.run("How far is Paris?")
    assert waiting.status == "waiting" and waiting.question == "Where are you?" and waiting.answer is None

    done = agent.run("Lyon", session=waiting.session)
    assert done.status == "done" and done.answer == "Paris is 465 km away."
    assert done.turn == waiting.turn  # the same turn carried on
    resumed_prompt = model.requests[1].messages[-1].text
    assert "I need the user's location." in resumed_prompt and "Observation: Lyon" in resumed_prompt
    assert [s.tool for s in done.steps] == ["ask_user", "distance", None]


def test_format_error_sends_a_correction_and_counts_as_a_step() -> None:
    model = ScriptedModel(["I think it is four.", act("calculator", {"expression": "2+2"}), final("4")])
    result = Agent(model=model, tools=[calculator]).run("2+2?")
    assert result.steps[0].kind == "format_error"
    assert "Invalid format" in (model.requests[1].messages[-1].text)
    assert "calculator" in (result.steps[0].observation or "")  # correction names the tools
    assert result.answer == "4"


def test_native_protocol_parallel_calls_answered_in_order() -> None:
    model = ScriptedModel(
        [
            tool_calls(
                [("calculator", {"expression": "2+2"}), ("web_search", {"query": "roses"}), ("nope", {})],
                text="Two things at once.",
                ids=["a", "b", "c"],
            ),
            tool_call("calculator", {"expression": "80.16*1.15"}, id="d"),
            "The price is 92.184 dollars.",
        ]
    )
    result = Agent(model=model, tools=[calculator, web_search], protocol="native").run("roses?")
    assert result.answer == "The price is 92.184 dollars."
    messages = model.requests[1].messages
    roles = [m.role for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert [m.call_id for m in messages[3:]] == ["a", "b", "c"]  # type: ignore[union-attr]
    assert messages[3].content == "4"  # type: ignore[union-attr]
    assert "no tool named 'nope'" in messages[5].content  # type: ignore[union-attr]
    # user → assistant (tool request) → tool result → assistant (final)
    assert [m.role for m in model.requests[2].messages][-2:] == ["assistant", "tool"]


def test_native_ask_user_among_parallel_calls_keeps_pairing() -> None:
    model = ScriptedModel(
        [
            tool_calls(
                [("ask_user", {"question": "Which city?"}), ("calculator", {"expression": "1+1"})], ids=["q", "c"]
            ),
            "Noted: Lyon.",
        ]
    )
    agent = Agent(model=model, tools=[calculator], protocol="native")
    waiting = agent.run("help me")
    assert waiting.status == "waiting"
    done = agent.run("Lyon", session=waiting.session)
    assert done.answer == "Noted: Lyon."
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [(m.call_id, m.content) for m in tool_messages] == [("q", "Lyon"), ("c", "2")]  # type: ignore[union-attr]


def test_context_budget_elides_old_observations() -> None:
    @tool
    def page(n: int) -> str:
        """Read a page."""
        return f"page {n}: " + "z" * 3000

    model = ScriptedModel([act("page", {"n": i}) for i in range(6)] + [final("read")])
    result = Agent(model=model, tools=[page], context_tokens=3000, max_steps=10).run("read all")
    assert result.answer == "read"
    assert all(len(r.messages[-1].text) + len(r.messages[0].content) < 3000 * 4 for r in model.requests)
    assert "elided to fit the context budget" in model.requests[-1].messages[-1].text


def test_calling_a_failing_tool_again_is_the_hallucination_spiral() -> None:
    attempts: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Current weather."""
        attempts.append(city)
        raise TimeoutError("upstream timeout")

    same = act("get_weather", {"city": "Lyon"}, "Maybe it works now.")
    bad_args = act("get_weather", {"town": "Lyon"}, "Try another argument name.")
    model = ScriptedModel([same, same, bad_args, bad_args, same, " The weather service is down."])
    result = Agent(model=model, tools=[get_weather], max_steps=20, max_repeats=3).run("Weather in Lyon?")
    assert attempts == ["Lyon"]  # the failing call ran once; the identical retries were refused
    assert "already called get_weather" in (result.steps[1].observation or "")
    assert "upstream timeout" in (result.steps[1].observation or "")
    assert "already called" in (result.steps[3].observation or "")  # the same bad arguments, refused too
    assert result.status == "stopped" and result.reason == "repeated_action"


def test_a_failing_last_call_still_closes_the_turn() -> None:
    def broken(request: object) -> str:
        raise ModelError("the model server went away")

    model = ScriptedModel([act("calculator", {"expression": "1+1"}), broken, final("a new turn works")])
    agent = Agent(model=model, tools=[calculator], max_steps=1)
    stopped = agent.run("1+1?")
    assert stopped.status == "stopped" and stopped.reason == "max_steps"
    assert "could not give a final answer" in (stopped.answer or "") and "went away" in (stopped.answer or "")
    after = agent.run("next question", session=stopped.session)
    assert after.status == "done" and after.answer == "a new turn works" and after.turn == 2


def test_context_too_long_elides_and_retries_once_without_leaving_an_error() -> None:
    @tool
    def page(n: int) -> str:
        """Read a page."""
        return f"page {n}: " + "z" * 3000

    def too_long_once(request: object) -> str:
        if not getattr(too_long_once, "done", False):
            too_long_once.done = True  # type: ignore[attr-defined]
            raise ContextTooLong("prompt is too long")
        return final("read them")

    model = ScriptedModel([act("page", {"n": 1}), act("page", {"n": 2}), too_long_once, too_long_once])
    result = Agent(model=model, tools=[page]).run("read two pages")
    assert result.answer == "read them"
    assert "elided to fit the context budget" in model.requests[-1].messages[-1].text
    assert not [e for e in result.events if isinstance(e, ErrorEvent)]
