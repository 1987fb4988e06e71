"""The built-in calculator runs inline on the event loop: no expression may take long.

The known attacks first, then a fuzz test over generated expressions (extreme
literals, every operator and function, deep nesting) with a time limit per expression.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attack_support import Watch, serve
from reactchat.toolbox import CalculatorError, evaluate
from reactchat.toolbox._calculator import MAX_LENGTH

#: CPU seconds: far above what a bounded expression takes (tens of microseconds), far below a
#: blocked event loop; CPU time, so that a machine busy with other work does not count
LIMIT = 0.05


def timed(expression: str) -> float:
    start = time.thread_time()
    with contextlib.suppress(CalculatorError):
        evaluate(expression)
    return time.thread_time() - start


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("round(7, -10**1000)", "digits"),
        ("round(1, -10**7)", "digits"),
        ("round(1, -101)", "digits"),
        ("round(2.5, 0.5)", "whole number"),
        ("9**999 * 9**999 * 9**999 * 9**999 * 9**999", "too large"),
        ("(9**999) * (9**999)", "too large"),
        ("9**999 * 2**929 + 9**999 * 2**929", "too large"),
        ("1e999", "finite"),
        ("floor(1e308) ** 5", "too large"),
        ("-" * 400 + "1" + "+1" * 40, ""),
    ],
)
def test_attacks_from_the_issue_are_refused_at_once(expression: str, message: str) -> None:
    start = time.thread_time()
    if message:
        with pytest.raises(CalculatorError, match=message):
            evaluate(expression)
    else:
        evaluate(expression)
    assert time.thread_time() - start < LIMIT


def test_round_still_rounds() -> None:
    assert evaluate("round(1234.5678, -2)") == 1200
    assert evaluate("round(12345, -100)") == 0
    assert evaluate("round(2.5555, 2)") == 2.56


_NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=10**40).map(str),
    st.sampled_from(["0", "1", "2", "7", "9" * 200, "10" + "0" * 300, "1e308", "1e-308", "0.5", "3.14159", "1e16"]),
    st.floats(min_value=0, max_value=1e308, allow_nan=False, allow_infinity=False).map(repr),
)
_BINARY = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "^", "×", "÷"])
_FUNCTIONS = st.sampled_from(
    ["abs", "round", "min", "max", "sqrt", "log", "log10", "exp", "sin", "cos", "tan", "floor", "ceil"]
)


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, _BINARY, children).map(lambda t: f"({t[0]} {t[1]} {t[2]})")
    unary = st.tuples(st.sampled_from(["-", "+"]), children).map(lambda t: f"{t[0]}{t[1]}")
    call = st.tuples(_FUNCTIONS, st.lists(children, min_size=1, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})")
    percent = st.tuples(children, st.sampled_from([" + ", " - ", " * "]), _NUMBERS).map(
        lambda t: f"{t[0]}{t[1]}{t[2]}%"
    )
    return st.one_of(binary, unary, call, percent)


EXPRESSIONS = st.recursive(_NUMBERS, _extend, max_leaves=12).filter(lambda e: len(e) <= MAX_LENGTH)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(EXPRESSIONS)
def test_every_generated_expression_answers_within_the_limit(expression: str) -> None:
    elapsed = timed(expression)
    assert elapsed < LIMIT, f"{expression!r} took {elapsed * 1000:.1f} ms"


def test_a_calculator_attack_on_a_real_server_leaves_other_sessions_answering(tmp_path: Path) -> None:
    with serve(tmp_path) as served, Watch(served) as watch, httpx.Client(base_url=served.url, timeout=30) as client:
        session = client.post("/v1/sessions").json()["session"]
        for expression in ("round(7, -10**1000)", "round(1, -10**7)"):
            start = time.perf_counter()
            reply = client.post(
                f"/v1/sessions/{session}/messages", json={"message": f"compute {expression}", "stream": False}
            )
            assert time.perf_counter() - start < 1.0
            assert reply.status_code == 200
            assert "digits" in reply.json()["answer"], reply.json()
        time.sleep(0.6)  # a few more probes after the attack
    watch.assert_responsive()
    assert watch.peak_server < 300 * 2**20
