"""A link of a message that is not read before the turn is said so in the turn: stored,
shown by ``reactchat show``, exported and replayed. Nothing is fetched: one link cannot be
parsed and the other is a loopback address no allow-list covers."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from reactchat import Agent, Reflexion, ScriptedModel
from reactchat.cli.main import main
from reactchat.knowledge import attach
from reactchat.messages import LinkSkippedEvent, UserEvent
from reactchat.testing import export_lines, line_schema, read_record, replay
from reactchat.toolbox import read_links_in_messages
from reactchat.toolbox._fetch import ENV_ALLOW

MESSAGE = "Compare http://0177.0.0.1/ with http://127.0.0.1:1/ please"
UNPARSABLE = "http://0177.0.0.1/"
PRIVATE = "http://127.0.0.1:1/"


@pytest.fixture(autouse=True)
def no_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_ALLOW, raising=False)


def reading_links(model: ScriptedModel, **options: object) -> Agent:
    agent = Agent(model=model, **options)  # type: ignore[arg-type]
    attach(agent)
    read_links_in_messages(agent)
    return agent


def skipped_of(events: list[object]) -> dict[str, LinkSkippedEvent]:
    return {e.url: e for e in events if isinstance(e, LinkSkippedEvent)}


def test_skipped_links_are_stored_after_the_message_and_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    model = ScriptedModel([" Neither could be read.\nFinal Answer: I could not read them."])
    result = reading_links(model, store=f"sqlite:///{db}").run(MESSAGE)
    assert result.status == "done" and result.answer == "I could not read them."
    assert isinstance(result.events[0], UserEvent) and [e.type for e in result.events[1:3]] == ["link_skipped"] * 2
    skipped = skipped_of(result.events)
    assert list(skipped) == [UNPARSABLE, PRIVATE]
    assert "is not a valid URL" in skipped[UNPARSABLE].reason
    assert "a loopback address" in skipped[PRIVATE].reason
    assert all(e.refused and e.turn == 1 and e.run == "" for e in skipped.values())
    # for people, not for the model: its prompt is the message as written
    assert "not read" not in json.dumps(model.requests[0].model_dump())

    # the stored turn, as `reactchat show` (and GET /v1/sessions/{id}) read it
    assert main(["show", result.session, "--db", str(db), "--json"]) == 0
    (turn,) = json.loads(capsys.readouterr().out)["turns"]
    assert [e["type"] for e in turn["events"]][:3] == ["user", "link_skipped", "link_skipped"]
    stored = {e["url"]: e for e in turn["events"] if e["type"] == "link_skipped"}
    assert {url: (e["reason"], e["refused"]) for url, e in stored.items()} == {
        url: (e.reason, True) for url, e in skipped.items()
    }
    assert main(["show", result.session, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    for url, event in skipped.items():
        assert f"The link {url} was not read: {event.reason}" in out


async def test_a_session_with_skipped_links_exports_and_replays() -> None:
    agent = reading_links(ScriptedModel(["Final Answer: no."]))
    session = (await agent.arun(MESSAGE)).session
    lines = await export_lines(agent.store, session)
    validator = jsonschema.Draft202012Validator(line_schema())
    for line in lines:
        validator.validate(json.loads(line))
    record = read_record(lines)
    assert list(skipped_of(list(record.events))) == [UNPARSABLE, PRIVATE]
    replayed = await replay(Agent(model=ScriptedModel([])), record, strict=True)
    assert replayed.model_calls == 1
    await agent.store.close()


async def test_a_reflexion_turn_records_its_skipped_links_after_the_message() -> None:
    reflect = Reflexion(evaluator=lambda answer: True, max_trials=2)
    agent = reading_links(ScriptedModel(["Final Answer: no."]), reflect=reflect)
    result = await agent.arun(MESSAGE)
    assert result.status == "done"
    stored = await agent.store.events(result.session)
    assert isinstance(stored[0], UserEvent) and [e.type for e in stored[1:3]] == ["link_skipped"] * 2
    assert list(skipped_of(stored)) == [UNPARSABLE, PRIVATE]
    await agent.store.close()
