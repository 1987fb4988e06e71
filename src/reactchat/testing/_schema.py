"""The JSON Schema of one line of an exported session, the ``reactchat.session`` format.

docs/session.schema.json is this schema as this version writes it (a test keeps the two
equal): the header, an event (the ``reactchat.messages`` events, discriminated by
``type``), a recorded request, an uploaded file or an artifact. ``read_record`` checks more
than a schema can say (the order of the lines, the header's counts, base64 data).
"""

from __future__ import annotations

from typing import Any

from reactchat.messages import EVENTS, Request
from reactchat.testing._export import FORMAT, VERSION

_COUNT = {"type": "integer", "minimum": 0}
_DATA = {"type": "string", "contentEncoding": "base64"}

HEADER = {
    "type": "object",
    "description": "The first line. Version 2 adds the count of request lines.",
    "properties": {
        "format": {"const": FORMAT},
        "version": {"type": "integer", "minimum": 1, "maximum": VERSION},
        "session": {"type": "string", "description": "the exported session's id"},
        "exported_at": {"type": "number", "description": "Unix time"},
        "events": _COUNT,
        "requests": _COUNT,
        "files": _COUNT,
        "artifacts": _COUNT,
    },
    "required": ["format", "version", "session"],
}
FILE = {
    "type": "object",
    "description": "An uploaded file still live in the session.",
    "properties": {
        "file": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kind": {"type": "string"},
                "retention": {"type": "integer", "minimum": 1},
                "rounds_left": {"type": "integer", "minimum": 1},
                "source": {"type": ["string", "null"]},
                "data": _DATA,
            },
            "required": ["name", "data"],
        }
    },
    "required": ["file"],
    "additionalProperties": False,
}
ARTIFACT = {
    "type": "object",
    "description": "A file the session's tools made.",
    "properties": {
        "artifact": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "at": {"type": "number"}, "data": _DATA},
            "required": ["name", "data"],
        }
    },
    "required": ["artifact"],
    "additionalProperties": False,
}


def line_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that every line of an exported session matches."""
    events = EVENTS.json_schema()
    request = Request.model_json_schema(mode="serialization")
    definitions: dict[str, Any] = {**events.pop("$defs"), **request.pop("$defs")}
    definitions |= {"Header": HEADER, "Event": events, "Request": request, "File": FILE, "Artifact": ARTIFACT}
    definitions["RequestLine"] = {
        "type": "object",
        "description": "Version 2: one request the model was sent, in order (recorded by a Recorder).",
        "properties": {"request": {"$ref": "#/$defs/Request"}},
        "required": ["request"],
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"A line of an exported reactchat session ({FORMAT}, versions 1 to {VERSION})",
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in ("Header", "Event", "RequestLine", "File", "Artifact")],
        "$defs": dict(sorted(definitions.items())),
    }
