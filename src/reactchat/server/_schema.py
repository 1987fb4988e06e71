"""What the OpenAPI document says each route returns: its error answers and content types.

Every error body has one shape (``ErrorBody``, the OpenAI one, so SDKs show the
message); each route lists the statuses it can answer with, those of the databases it
reads or writes included (``READS``, ``WRITES``), and routes that stream declare
``text/event-stream`` beside ``application/json``. ``tests/test_api_contract.py`` runs
Schemathesis against a live server to keep the document and the server in step, and
checks the answers of a database that is down or full, which Schemathesis cannot cause.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, model_validator

#: a session id a client may choose: 1-200 of ``A-Za-z0-9_.:-``, not starting with ``oa-`` (the
#: prefix of ids the OpenAI endpoint derives), written without look-ahead for JSON Schema tools
SESSION_ID = (
    r"^(?:[A-Za-np-z0-9_.:-][A-Za-z0-9_.:-]{0,199}|o(?:[A-Zb-z0-9_.:-][A-Za-z0-9_.:-]{0,198})?"
    r"|oa(?:[A-Za-z0-9_.:][A-Za-z0-9_.:-]{0,197})?)$"
)

#: ``SESSION_ID`` in words, for error messages
SESSION_ID_RULE = "a session id is 1-200 letters, digits, '_', '.', ':' or '-', not starting with 'oa-'"


class ErrorDetail(BaseModel):
    """What went wrong: a message for people, a machine-readable type, the HTTP status."""

    message: str
    type: str
    code: int


class ErrorBody(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


_WHY = {
    400: "The body is not JSON, or a file could not be read (damaged, empty, several file parts)",
    401: "A bearer token is required and was missing or wrong",
    403: "The Host is not this server's, a cross-origin write, or a non-local client of a server without a token",
    404: "No such session (or not one of the caller's)",
    409: (
        "The session is busy with another turn, the question was already answered, it has too many "
        "files, or a cost budget was asked of a model without prices"
    ),
    413: "The body, or what reading the file would take (pages, paragraphs, rows, characters, time), is too large",
    415: "The file's type is not one that is read",
    422: "The body does not match the schema",
    429: "Too many uploads at once, or too many new sessions from this client; see Retry-After",
    501: "File uploads need the files extra",
    502: "The model failed",
    503: (
        "A database (the store, the knowledge base, the memory) or Temporal is unreachable, or the server is "
        "draining and the request would start a turn; see Retry-After"
    ),
    507: "The disk holding a SQLite database is full: nothing of the request was stored; free space and send it again",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entries of a route's error statuses."""
    return {code: {"model": ErrorBody, "description": _WHY[code]} for code in codes}


#: statuses that any route under /v1/ can answer with (the guard's)
GUARDED = (401, 403)
#: statuses of a route that reads a database: it may be unreachable (PostgreSQL, Temporal)
READS = (503,)
#: statuses of a route that writes to a database: unreachable, or its disk full (SQLite: ``DiskFull``)
WRITES = (503, 507)

#: the media types of the files an upload may hold: the server reads these (sniffed from the
#: bytes, not taken from the part's header); anything else is a 415, an empty file a 400
UPLOAD_TYPES = (
    "text/plain",
    "text/markdown",
    "text/html",
    "text/csv",
    "application/json",
    "application/pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
)


def upload_body(field: str) -> dict[str, Any]:
    """The ``openapi_extra`` of an upload route: the media types its file part may have."""
    encoding = {field: {"contentType": ", ".join(UPLOAD_TYPES)}}
    return {"requestBody": {"content": {"multipart/form-data": {"encoding": encoding}}}}


#: one Server-Sent Event: its name (``message`` when absent) and its data (JSON text)
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}, "id": {"type": "string"}},
}


def streamed(description: str, status: int = 200) -> dict[int | str, dict[str, Any]]:
    """A success answer that is JSON, or Server-Sent Events when the request asks to stream."""
    return {
        status: {
            "description": description,
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": SSE_EVENT},
            },
        }
    }


#: ``messages`` of a chat completion must hold a user message with some text (the agent's input)
HAS_USER_TEXT: dict[str, Any] = {
    "contains": {
        "type": "object",
        "required": ["role", "content"],
        "properties": {
            "role": {"const": "user"},
            "content": {
                "anyOf": [
                    {"type": "string", "pattern": r"\S"},
                    {
                        "type": "array",
                        "contains": {
                            "type": "object",
                            "required": ["type", "text"],
                            "properties": {
                                "type": {"enum": ["text", "input_text"]},
                                "text": {"type": "string", "pattern": r"\S"},
                            },
                        },
                    },
                ]
            },
        },
    }
}


class Body(BaseModel):
    """A JSON request body: strings must be valid Unicode (a lone surrogate such as ``"\\ud800"``
    is a 422 here, not a 500 when the text is stored or hashed)."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        todo = [data]
        while todo:
            value = todo.pop()
            if isinstance(value, str):
                if _SURROGATE.search(value):
                    raise ValueError("the text holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode")
            elif isinstance(value, dict):
                todo += [*value.keys(), *value.values()]
            elif isinstance(value, list):
                todo += value
        return data


_SURROGATE = re.compile("[\ud800-\udfff]")


def error(status: int, message: str, kind: str) -> JSONResponse:
    """An error body in the OpenAI shape, so the official SDKs show the message."""
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)
