"""Typed final answers: validation and the corrections a model gets back."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from pydantic import BaseModel

from reactchat import Agent, ScriptedModel
from reactchat.engine.output import Output, OutputInvalid
from reactchat.messages import ErrorEvent
from reactchat.models.local import LocalModel
from server_support import make_app, running


class Price(BaseModel):
    flower: str
    euros: float


def test_a_pydantic_answer_validates_and_dumps_compactly() -> None:
    output = Output(Price)
    value = output.validate('```json\n{"flower": "rose", "euros": 92.184}\n```')
    assert value == Price(flower="rose", euros=92.184)
    assert output.dump(value) == '{"flower":"rose","euros":92.184}'
    assert '"euros"' in output.instructions() and "JSON schema" in output.instructions()


def test_an_invalid_answer_says_what_to_fix() -> None:
    output = Output(Price)
    with pytest.raises(OutputInvalid) as invalid:
        output.validate('{"flower": "rose", "euros": "a lot"}')
    assert "euros" in str(invalid.value) and "Price schema" in str(invalid.value)
    with pytest.raises(OutputInvalid) as broken:
        output.validate("It costs 92.184 euros.")
    assert "not valid JSON" in str(broken.value)


# ------------------------------------------------------------------ through a run


def test_an_invalid_final_answer_goes_back_as_a_correction_then_result_output_is_the_object() -> None:
    model = ScriptedModel(
        [
            ' I know it.\nFinal Answer: {"flower": "rose", "euros": "ninety-two"}',
            ' Fixed.\nFinal Answer: {"flower": "rose", "euros": 92.184}',
        ]
    )
    agent = Agent(model=model, output_type=Price)
    result = agent.run("What does a rose cost with 15% on 80.16 euros?")
    assert result.status == "done"
    assert result.output == Price(flower="rose", euros=92.184)
    assert result.answer == '{"flower":"rose","euros":92.184}'
    # the schema was in the prompt, and the second call saw the correction
    assert '"euros"' in str(model.requests[0].messages[0])
    assert "euros" in str(model.requests[1].messages) and "Price schema" in str(model.requests[1].messages)
    refused = [e for e in result.events if isinstance(e, ErrorEvent)]
    assert [e.kind for e in refused] == ["output"] and "ninety-two" in refused[0].raw
    assert [s.kind for s in result.steps] == ["format_error", "final"]


def test_past_the_retries_the_answer_stands_as_stopped_and_output_is_none() -> None:
    bad = ' I know it.\nFinal Answer: {"flower": "rose"}'
    agent = Agent(model=ScriptedModel([bad, bad, bad]), output_type=Price, output_retries=2)
    result = agent.run("Price of a rose?")
    assert result.status == "stopped" and result.reason == "invalid_output" and result.output is None
    assert sum(isinstance(e, ErrorEvent) for e in result.events) == 2


def test_a_json_schema_output_type_and_a_typed_answer_resumed_in_another_process(tmp_path: Path) -> None:
    schema = {
        "title": "Route",
        "type": "object",
        "properties": {"city": {"type": "string"}, "km": {"type": "integer", "minimum": 0}},
        "required": ["city", "km"],
    }
    store = f"sqlite:///{tmp_path / 's.db'}"
    ask = ' I need the city.\nAction: ask_user\nAction Input: {"question": "Where are you?"}'
    waiting = Agent(model=ScriptedModel([ask]), store=store, output_type=schema).run("How far is Paris?")
    assert waiting.status == "waiting"
    replies = [
        ' Got it.\nFinal Answer: {"city": "Lyon", "km": -465}',
        ' Fixed.\nFinal Answer: {"city": "Lyon", "km": 465}',
    ]
    done = Agent(model=ScriptedModel(replies), store=store, output_type=schema).run("Lyon", session=waiting.session)
    assert done.output == {"city": "Lyon", "km": 465}
    refused = next(e for e in done.events if isinstance(e, ErrorEvent))
    assert refused.kind == "output" and "km" in refused.message


PRICE_SCHEMA = {
    "type": "object",
    "properties": {"flower": {"type": "string"}, "euros": {"type": "number"}},
    "required": ["flower", "euros"],
}


def test_over_http_and_the_openai_endpoint_the_answer_is_json_that_matches_the_schema() -> None:
    with running(make_app()) as url:
        with httpx.Client(base_url=url, timeout=30) as http:
            session = http.post("/v1/sessions").json()["session"]
            body = {"message": "price json for a rose", "stream": False, "output_schema": PRICE_SCHEMA}
            turn = http.post(f"/v1/sessions/{session}/messages", json=body).json()
            assert turn["status"] == "done"
            assert json.loads(turn["answer"]) == {"flower": "rose", "euros": 92.184}
            assert [e["kind"] for e in turn["events"] if e["type"] == "error"] == ["output"]

        client = OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        completion = client.chat.completions.create(
            model="reactchat",
            messages=[{"role": "user", "content": "price json for a rose"}],
            response_format={"type": "json_schema", "json_schema": {"name": "price", "schema": PRICE_SCHEMA}},
        )
        content = completion.choices[0].message.content
        assert content is not None and json.loads(content) == {"flower": "rose", "euros": 92.184}


def test_the_local_model_decodes_a_typed_answer_under_the_schema_grammar() -> None:
    local = LocalModel(n_threads=1, max_tokens=160)
    agent = Agent(model=local, output_type=Price, ask_user=False)
    request = agent.transcript([], [], "A rose costs 80.16 euros. Answer with the flower and its price.").request()
    request.output_schema = Price.model_json_schema()
    grammar = local.grammar_for(request)
    assert grammar is not None and "answer-json" in grammar and "euros" in grammar
    result = agent.run("A rose costs 80.16 euros. Answer with the flower and its price.")
    # whatever a 135M model thinks, its answer is a Price: the grammar allows nothing else
    assert result.status == "done", result.events
    assert isinstance(result.output, Price)
    assert not [e for e in result.events if isinstance(e, ErrorEvent)]
