"""Models the engine builds without validation, and events read back from a store: the set of
their given fields is one per class (``AllFields``), and behaves as pydantic's own set does."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest

from reactchat.messages import (
    ActionEvent,
    AnswerEvent,
    Request,
    Usage,
    UserMessage,
    stored_event,
    stored_json,
)
from reactchat.messages._fast import AllFields
from reactchat.store import resolve_store


def action(call: str = "c1") -> ActionEvent:
    return ActionEvent.built(session="s", turn=1, step=1, call_id=call, tool="calculator", input={"expression": "1"})


def answer() -> AnswerEvent:
    return AnswerEvent(session="s", turn=1, step=2, text="2", usage=Usage(input_tokens=3, output_tokens=1, model="m"))


def test_models_built_from_every_field_share_one_set_of_field_names() -> None:
    first, second = action("c1"), action("c2")
    assert isinstance(first.model_fields_set, AllFields)
    assert first.model_fields_set is second.model_fields_set
    assert first.model_fields_set == set(ActionEvent.model_fields)
    request = Request.built([UserMessage(content="hi")])
    assert request.model_fields_set is Request.built([]).model_fields_set
    assert Usage(input_tokens=1).stamped("a").model_fields_set is Usage().stamped("b").model_fields_set


def test_a_shared_set_changes_nothing_pydantic_does_with_it() -> None:
    event, other = action("c1"), action("c2")
    event.tool = "search"  # pydantic adds the name to the set: it is there already
    assert event.tool == "search" and other.tool == "calculator"
    assert event.model_fields_set == set(ActionEvent.model_fields)
    changed = event.model_copy(update={"step": 5})
    assert type(changed.model_fields_set) is set and changed.step == 5 and event.step == 1
    changed.model_fields_set.discard("step")  # the copy's own set: the shared one keeps every name
    assert "step" in other.model_fields_set
    for again in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
        assert again == event and again.model_fields_set == event.model_fields_set
    assert event.model_dump(exclude_unset=True) == event.model_dump()
    with pytest.raises(TypeError, match="not a field"):
        event.model_fields_set.add("not_a_field")
    with pytest.raises(TypeError, match="shared"):
        event.model_fields_set.discard("tool")
    assert "tool" in other.model_fields_set


def test_events_read_back_share_the_set_when_every_field_was_stored() -> None:
    for event in (action(), answer()):
        first, second = stored_event(7, stored_json(event)), stored_event(8, stored_json(event))
        assert first.model_fields_set is second.model_fields_set
        assert first.model_fields_set == set(type(event).model_fields)
        assert first == event.model_copy(update={"seq": 7})
    read = stored_event(2, stored_json(answer()))
    assert isinstance(read, AnswerEvent) and read.usage is not None
    assert read.usage.model_fields_set is Usage().stamped("m").model_fields_set


def test_an_event_stored_without_some_fields_keeps_a_set_of_its_own() -> None:
    # as a store written before ``agent`` and ``run`` existed holds it
    body = json.loads(stored_json(action()))
    del body["agent"], body["run"]
    read = stored_event(3, json.dumps(body))
    assert not isinstance(read.model_fields_set, AllFields)
    assert read.model_fields_set == set(ActionEvent.model_fields) - {"agent", "run"}
    assert "agent" not in read.model_dump(exclude_unset=True) and read.seq == 3


async def test_a_sessions_events_from_sqlite_share_their_classes_sets(tmp_path: Path) -> None:
    store = resolve_store(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        session = await store.create_session()
        await store.append(*(action(f"c{i}").model_copy(update={"session": session}) for i in range(3)))
        events = await store.events(session)
        assert [e.seq for e in events] == [1, 2, 3]
        assert len({id(e.model_fields_set) for e in events}) == 1
    finally:
        await store.close()
