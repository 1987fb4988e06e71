"""Export and import of sessions: the JSON-lines format round-trips on every store, bad lines lose nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from reactchat import Agent, Reflexion, ScriptedModel, tool
from reactchat.knowledge import KnowledgeBase
from reactchat.messages import stored_json
from reactchat.testing import FORMAT, BadRecord, Recorder, export_lines, import_record, line_schema, read_record


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def comparable(events: list[object]) -> list[dict[str, object]]:
    """Events as stored, without what belongs to their session (its id)."""
    rows = []
    for event in events:
        row = json.loads(stored_json(event))  # type: ignore[arg-type]
        row.pop("session")
        rows.append(row)
    return rows


async def planned_reflexive_session(store: str) -> tuple[Agent, str]:
    """A session with a sub-agent, a plan, Reflexion trials and usage."""
    helper = Agent(
        model=ScriptedModel(['Action: add\nAction Input: {"a": 1, "b": 2}', "Final Answer: 3"]),
        tools=[add],
        name="helper",
        description="Adds.",
    )
    boss = Agent(
        model=ScriptedModel(
            [
                json.dumps({"steps": [{"task": "add 1 and 2", "agent": "helper"}]}),
                '{"action": "answer", "answer": "three"}',
            ]
        ),
        tools=[helper],
        name="boss",
        plan=True,
        store=store,
    )
    result = await boss.arun("What is 1 + 2?")
    assert result.status == "done"
    checker = Agent(
        model=ScriptedModel(["Final Answer: 4", "I added wrongly.", "Final Answer: 3"]),
        name="checker",
        store=boss.store,
        reflect=Reflexion(evaluator=lambda answer: answer == "3" or "wrong", max_trials=2),
    )
    second = await checker.arun("And again?", result.session)
    assert (second.status, second.answer) == ("done", "3")
    return boss, result.session


async def test_round_trip_with_plan_trials_nested_runs_files_and_artifacts(store_url: str) -> None:
    boss, session = await planned_reflexive_session(store_url)
    store = boss.store
    files = KnowledgeBase.for_store(store)
    await files.add_file(session, "notes.txt", b"The sky is green on Tuesdays.", retention=3)
    await store.put_artifact(session, "plot.png", b"\x89PNG\r\n\x1a\nxyz", 12.5)  # type: ignore[attr-defined]
    lines = await export_lines(store, session, files)
    header = json.loads(lines[0])
    assert (header["format"], header["version"], header["session"]) == (FORMAT, 1, session)
    assert (header["files"], header["artifacts"]) == (1, 1)

    record = read_record(lines)
    new = await import_record(store, record, files)
    assert new != session
    assert comparable(await store.events(new)) == comparable(await store.events(session))
    types = {row["type"] for row in comparable(await store.events(new))}
    assert {"plan", "trial", "action", "observation", "answer"} <= types
    assert {e.agent for e in await store.events(new)} >= {"boss/step 1/helper", "checker/trial 1"}
    (copied,) = await files.files(new)
    assert (copied.name, await files.data(new, copied.id)) == ("notes.txt", b"The sky is green on Tuesdays.")
    assert next(h.text for h in await files.search(new, "sky green")).startswith("The sky is green")
    artifact = await store.artifact(new, "plot.png")  # type: ignore[attr-defined]
    assert (artifact.data, artifact.at) == (b"\x89PNG\r\n\x1a\nxyz", 12.5)
    # the imported session is a session like any other: its state reads the same
    assert (await boss.state(new)).history() == (await boss.state(session)).history()
    await files.close()
    await store.close()


@pytest.mark.parametrize(
    ("change", "line", "problem"),
    [
        (lambda ls: [*ls[:2], "{not json", *ls[3:]], 3, "not JSON"),
        (lambda ls: [*ls[:2], '{"type": "thought"}', *ls[3:]], 3, "not an event"),
        (lambda ls: [*ls[:3], '{"type": "answer", "text": 5}', *ls[4:]], 4, "not an event"),
        (lambda ls: ['{"format": "other"}', *ls[1:]], 1, "not an exported session"),
        (lambda ls: [ls[0].replace('"version": 1', '"version": 99'), *ls[1:]], 1, "version 99"),
        (lambda ls: ls[:-1], 1, "the header counts"),
        (lambda ls: [*ls, '{"file": {"name": "a.txt", "data": "***"}}'], None, "not base64"),
    ],
)
async def test_a_bad_line_is_refused_with_its_number_and_nothing_is_stored(change, line, problem) -> None:  # type: ignore[no-untyped-def]
    agent = Agent(model=ScriptedModel(["Final Answer: hi", "Final Answer: again"]), ask_user=False)
    first = await agent.arun("hello")
    await agent.arun("more", first.session)
    lines = change(await export_lines(agent.store, first.session))
    before = await agent.store.list_sessions()
    with pytest.raises(BadRecord) as caught:
        await import_record(agent.store, read_record(lines))
    assert problem in str(caught.value) and "nothing was stored" in str(caught.value)
    assert caught.value.line == (line if line is not None else len(lines))
    assert await agent.store.list_sessions() == before


async def test_a_refused_file_deletes_the_new_session(tmp_path: Path) -> None:
    agent = Agent(model=ScriptedModel(["Final Answer: hi"]), ask_user=False, store=f"sqlite:///{tmp_path}/s.db")
    session = (await agent.arun("hello")).session
    lines = await export_lines(agent.store, session)
    lines[0] = lines[0].replace('"files": 0', '"files": 1')
    lines.append(json.dumps({"file": {"name": "empty.txt", "data": ""}}))  # an empty file is refused
    files = KnowledgeBase.for_store(agent.store)
    with pytest.raises(ValueError, match="empty"):
        await import_record(agent.store, read_record(lines), files)
    assert await agent.store.list_sessions() == [session]
    await files.close()
    await agent.store.close()


def run_command(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {"PYTHONPATH": src, "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    return subprocess.run(
        [sys.executable, "-m", "reactchat", *args], input=stdin, capture_output=True, text=True, env=env, timeout=120
    )


def test_export_and_import_commands(tmp_path: Path) -> None:
    db, other = tmp_path / "a.db", tmp_path / "b.db"
    agent = Agent(model=ScriptedModel(["Final Answer: hi"]), ask_user=False, store=f"sqlite:///{db}")
    session = agent.run("hello").session
    exported = run_command("export", session, "--db", str(db))
    assert exported.returncode == 0, exported.stderr
    assert read_record(exported.stdout.splitlines()).session == session
    (tmp_path / "s.jsonl").write_text(exported.stdout)
    imported = run_command("import", str(tmp_path / "s.jsonl"), "--db", str(other))
    assert imported.returncode == 0, imported.stderr
    new = imported.stdout.strip()
    shown = run_command("show", new, "--json", "--db", str(other))
    assert json.loads(shown.stdout)["turns"][0]["answer"] == "hi"
    broken = exported.stdout.replace('"type":"answer"', '"type":"answr"')
    refused = run_command("import", "-", "--db", str(other), stdin=broken)
    assert refused.returncode == 1 and "line 3" in refused.stderr and "nothing was stored" in refused.stderr
    missing = run_command("export", "nope", "--db", str(db))
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr


async def test_recorded_requests_round_trip_and_a_bad_one_is_refused_with_its_line() -> None:
    recorder = Recorder(ScriptedModel(["Final Answer: hi"]))
    agent = Agent(model=recorder, ask_user=False)
    session = (await agent.arun("hello")).session
    lines = await export_lines(agent.store, session, requests=recorder.requests)
    assert json.loads(lines[0])["version"] == 2 and len(recorder.requests) == 1
    assert read_record(lines).requests == recorder.requests
    bad = [*lines[:-1], '{"request": {"messages": 5}}']
    with pytest.raises(BadRecord) as caught:
        read_record(bad)
    assert caught.value.line == len(lines) and "not a request: messages" in str(caught.value)
    with pytest.raises(BadRecord, match=f"line {len(lines) + 1}: an event after the requests"):
        read_record([*lines, lines[1]])
    # version 1 has no request lines: one is not an event, and is refused as such
    with pytest.raises(BadRecord, match=f"line {len(lines)}: not an event"):
        read_record([lines[0].replace('"version": 2', '"version": 1'), *lines[1:]])
    # without requests the file is version 1, which every reactchat reads
    assert json.loads((await export_lines(agent.store, session))[0])["version"] == 1


async def test_every_line_matches_the_schema_in_docs(tmp_path: Path) -> None:
    """docs/session.schema.json is the schema this version writes, and its lines match it:
    the version-1 fixture's, and a version-2 file's with requests, a file and an artifact."""
    docs = Path(__file__).resolve().parents[1] / "docs" / "session.schema.json"
    assert json.loads(docs.read_text(encoding="utf-8")) == line_schema(), "regenerate docs/session.schema.json"
    validator = jsonschema.Draft202012Validator(line_schema())
    fixture = Path(__file__).parent / "fixtures" / "session_v1.jsonl"
    recorder = Recorder(ScriptedModel(["Final Answer: hi"]))
    agent = Agent(model=recorder, ask_user=False, store=f"sqlite:///{tmp_path}/s.db")
    session = (await agent.arun("hello")).session
    files = KnowledgeBase.for_store(agent.store)
    await files.add_file(session, "notes.txt", b"roses cost 80.16", retention=2)
    await agent.store.put_artifact(session, "plot.png", b"\x89PNG", 1.0)  # type: ignore[attr-defined]
    lines = await export_lines(agent.store, session, files, requests=recorder.requests)
    await files.close()
    await agent.store.close()
    kinds = [next(iter(json.loads(line))) for line in lines[-2:]]
    assert kinds == ["file", "artifact"] and any(line.startswith('{"request"') for line in lines)
    for line in [*fixture.read_text(encoding="utf-8").splitlines(), *lines]:
        validator.validate(json.loads(line))
    assert not validator.is_valid({"type": "answer", "text": 5})
    assert not validator.is_valid({"request": {"messages": 5}})
