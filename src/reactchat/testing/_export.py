"""A session as JSON lines: ``reactchat export`` writes it, ``reactchat import`` reads it back.

The format (``reactchat.session``, versions 1 and 2; docs/testing.md) is one JSON object a line:

1. a header ``{"format": "reactchat.session", "version": V, "session": ID, "exported_at": T,
   "events": N, "files": F, "artifacts": A}`` (version 2 adds ``"requests": R``);
2. the session's ``N`` events in log order, each as the store keeps it (``stored_json``: every
   field but ``seq``, which is the line's place);
3. version 2 only: ``R`` lines ``{"request": {...}}``, the requests the model was sent, in
   order (a ``Recorder`` kept them: a store does not);
4. ``F`` lines ``{"file": {"name", "kind", "retention", "rounds_left", "source", "data"}}``: the
   uploaded files still live, ``data`` in base64;
5. ``A`` lines ``{"artifact": {"name", "at", "data"}}``: the files its tools made.

A file without requests is written as version 1, which every reactchat since the format
began reads. Reading checks every line before anything is stored, and a bad line is refused
with its number (``BadRecord``). A later version of reactchat reads every earlier version.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from reactchat.errors import ReactchatError
from reactchat.messages import EVENTS, Event, Request, stored_json
from reactchat.store import Store
from reactchat.store._artifacts import ArtifactStore
from reactchat.testing._record import request_json

FORMAT = "reactchat.session"
#: the newest version this reactchat writes and reads (it reads every one before it too)
VERSION = 2


class BadRecord(ReactchatError, ValueError):
    """A line of an exported session cannot be read; nothing was stored."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}; nothing was stored")
        self.line = line
        self.problem = problem


@dataclass(frozen=True)
class StoredFile:
    """An uploaded file of an exported session."""

    name: str
    data: bytes
    retention: int
    kind: str = ""
    source: str | None = None


@dataclass(frozen=True)
class Record:
    """An exported session: its header, events, uploaded files and artifacts, and the requests
    its model was sent when it was recorded through a ``Recorder`` (as JSON; none otherwise)."""

    session: str
    events: list[Event]
    files: list[StoredFile] = field(default_factory=list)
    artifacts: list[tuple[str, float, bytes]] = field(default_factory=list)
    exported_at: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def export_lines(
    store: Store, session: str, knowledge: Any = None, *, requests: Sequence[dict[str, Any]] = ()
) -> list[str]:
    """The lines of ``session`` in the export format (``SessionNotFound`` if there is none).

    ``knowledge`` is the store's ``KnowledgeBase`` (its uploaded files), when there is one;
    ``requests`` what the model was sent (``Recorder.requests``), for ``replay(strict=True)``."""
    events = await store.events(session)
    files: list[str] = []
    if knowledge is not None:
        for info in await knowledge.files(session):
            data = await knowledge.data(session, info.id)
            if data is None:  # expired between the listing and the read
                continue
            file = {"name": info.name, "kind": info.kind, "retention": info.retention}
            file |= {"rounds_left": info.rounds_left, "source": info.source, "data": _b64(data)}
            files.append(json.dumps({"file": file}, ensure_ascii=False))
    artifacts: list[str] = []
    if isinstance(store, ArtifactStore):
        for listed in await store.artifacts(session):
            artifact = await store.artifact(session, listed.name)
            if artifact is not None:
                body = {"name": artifact.name, "at": artifact.at, "data": _b64(artifact.data)}
                artifacts.append(json.dumps({"artifact": body}))
    header: dict[str, Any] = {"format": FORMAT, "version": 2 if requests else 1, "session": session}
    header |= {"exported_at": time.time(), "events": len(events), "files": len(files), "artifacts": len(artifacts)}
    if requests:
        header["requests"] = len(requests)
    asked = [json.dumps({"request": r}, ensure_ascii=False) for r in requests]
    return [json.dumps(header), *(stored_json(e) for e in events), *asked, *files, *artifacts]


def read_record(lines: Iterable[str]) -> Record:
    """An exported session read back from its lines; ``BadRecord`` names the first bad line."""
    numbered = ((n, line) for n, line in enumerate(lines, 1) if line.strip())
    first = next(numbered, None)
    if first is None:
        raise BadRecord(1, f"the file is empty: expected a {FORMAT!r} header")
    header = _header(*first)
    events: list[Event] = []
    requests: list[dict[str, Any]] = []
    files: list[StoredFile] = []
    artifacts: list[tuple[str, float, bytes]] = []
    for number, line in numbered:
        value = _json(number, line)
        if "file" in value:
            files.append(_file(number, value["file"]))
        elif "artifact" in value:
            artifacts.append(_artifact(number, value["artifact"]))
        elif files or artifacts:
            raise BadRecord(number, "an event or request after the files: events and requests come first")
        elif "request" in value and header["version"] >= 2:
            requests.append(_request(number, value["request"]))
        elif requests:
            raise BadRecord(number, "an event after the requests: events come first")
        else:
            events.append(_event(number, line))
    for name, held in (("events", events), ("requests", requests)):
        if len(held) != header.get(name, len(held)):
            raise BadRecord(first[0], f"the header counts {header[name]} {name} but the file holds {len(held)}")
    at = float(header.get("exported_at", 0.0))
    return Record(str(header["session"]), events, files, artifacts, at, requests)


def _json(number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadRecord(number, f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise BadRecord(number, "expected a JSON object")
    return value


def _header(number: int, line: str) -> dict[str, Any]:
    header = _json(number, line)
    if header.get("format") != FORMAT:
        raise BadRecord(number, f"not an exported session: the first line must be a {FORMAT!r} header")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= VERSION:
        raise BadRecord(number, f"format version {version!r} is not one this reactchat reads (1 to {VERSION})")
    if not isinstance(header.get("session"), str):
        raise BadRecord(number, "the header has no session id")
    return header


def _event(number: int, line: str) -> Event:
    try:
        event = EVENTS.validate_json(line)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise BadRecord(number, f"not an event: {where}: {error['msg']}") from None
    if event.type == "delta":
        raise BadRecord(number, "a delta event is never stored")
    return event


def _request(number: int, value: Any) -> dict[str, Any]:
    """A recorded request, checked as a ``Request`` and kept as its JSON."""
    try:
        return request_json(Request.model_validate(value))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise BadRecord(number, f"not a request: {where}: {error['msg']}") from None


def _data(number: int, value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise BadRecord(number, "data is not base64") from None


def _file(number: int, value: Any) -> StoredFile:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise BadRecord(number, "a file needs a name and its data")
    left = value.get("rounds_left", value.get("retention", 1))
    if not isinstance(left, int) or left < 1:
        raise BadRecord(number, f"rounds_left must be a positive integer, not {left!r}")
    source = value.get("source")
    return StoredFile(value["name"], _data(number, value.get("data")), left, str(value.get("kind", "")), source)


def _artifact(number: int, value: Any) -> tuple[str, float, bytes]:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise BadRecord(number, "an artifact needs a name and its data")
    at = value.get("at", 0.0)
    if not isinstance(at, int | float):
        raise BadRecord(number, f"an artifact's at must be a time, not {at!r}")
    return value["name"], float(at), _data(number, value.get("data"))


async def import_record(store: Store, record: Record, knowledge: Any = None, session: str | None = None) -> str:
    """Store ``record`` as a new session (all its events in one transaction, then its files
    and artifacts) and return the new id; if a file is refused, the new session is deleted."""
    new = await store.create_session(session)
    try:
        if record.events:
            await store.append(*_moved(record.events, new))
        for file in record.files:
            if knowledge is None:
                raise ReactchatError(f"the session has uploaded files ({file.name}) but this store keeps none")
            await knowledge.add_file(new, file.name, file.data, retention=file.retention, source=file.source)
        for name, at, data in record.artifacts:
            if not isinstance(store, ArtifactStore):
                raise ReactchatError(f"the session has artifacts ({name}) but this store keeps none")
            await store.put_artifact(new, name, data, at)
    except BaseException:
        if knowledge is not None:
            await knowledge.clear(new)
        await store.delete_session(new)
        raise
    return new


def _moved(events: list[Event], session: str) -> Iterator[Event]:
    """The events as the new session's: its id, and no place in a log until appended."""
    for event in events:
        yield event.model_copy(update={"session": session, "seq": 0})
