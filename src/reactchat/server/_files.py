"""Uploaded files: the routes over ``reactchat.knowledge``, when it is installed, and images.

A file uploaded to a session becomes a temporary knowledge base that the agent can
search; it is forgotten after its retention in rounds, or when the context is cleared.
An image (PNG, JPEG or WebP, by its bytes) is checked from its header and kept as the
session's artifact instead, for a message to send it to the model (``"images": [NAME]``).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BeforeValidator, Field

from reactchat.messages import ImagePart
from reactchat.messages.images import ImageRejected, checked, media_type
from reactchat.server._schema import GUARDED, WRITES, error, errors, streamed, upload_body
from reactchat.server._turns import frame
from reactchat.store import SessionNotFound
from reactchat.store._artifacts import ArtifactStore, safe_name

if TYPE_CHECKING:
    from reactchat.agent import Agent
    from reactchat.server._server import Server

log = logging.getLogger("reactchat.server")


#: progress(done, total) while a file is read and indexed
Progress = Callable[[int, int], None]
#: a session's files as JSON (``file_view`` each)
FileList = list[dict[str, Any]]


class Files:
    """The server's view of a session's uploaded files."""

    def __init__(self, kb: Any, module: Any) -> None:
        self.kb = kb
        self.module = module

    @classmethod
    def attach(cls, agent: Agent, max_bytes: int, limits: Any = None) -> Files | None:
        """Give ``agent`` the session's files (``search_files``, rounds counted per turn).

        None when ``reactchat.knowledge`` is not installed: the server then runs without uploads.
        """
        try:
            module = importlib.import_module("reactchat.knowledge")
        except ImportError:
            return None
        if not hasattr(module, "attach"):  # a partial install (or a namespace package)
            return None
        kb = getattr(agent, "services", {}).get("knowledge")
        if kb is None:
            options: dict[str, Any] = {"max_bytes": max_bytes}
            if limits is not None:
                options["limits"] = limits
            kb = module.attach(agent, module.KnowledgeBase.for_store(agent.store, **options))
        return cls(kb, module)

    async def list(self, session: str) -> list[dict[str, Any]]:
        """Each file of the session: name, size, chunks and rounds left."""
        return [file_view(info) for info in await self.kb.files(session)]

    def left_after(self, session: str) -> Callable[[], Awaitable[FileList]]:
        """Once a turn has begun (its tools chosen, its first event out): what ``list`` gives
        at its end, without a read when the turn began without files and this process
        added or deleted none meanwhile (an upload, a page the turn fetched, a clear): its
        round then counted nothing. A file another worker adds during the turn shows at
        the end of the session's next turn."""
        fileless, changes = self.kb.known_fileless(session), self.kb.changes

        async def left() -> FileList:
            return [] if fileless and changes == self.kb.changes else await self.list(session)

        return left

    async def add(
        self, session: str, name: str, data: bytes, retention: int | None, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Index one file; raises the knowledge module's ``FileRejected`` for bad input."""
        return file_view(await self.kb.add_file(session, name, data, retention=retention, progress=progress))

    async def clear(self, session: str) -> None:
        """Forget the session's files."""
        await self.kb.clear(session)


def file_view(info: Any) -> dict[str, Any]:
    """A ``FileInfo`` as JSON."""
    keys = ("id", "name", "size", "chunks", "pages", "rounds_left", "retention", "source")
    return {key: getattr(info, key, None) for key in keys}


def file_routes(app: FastAPI, server: Server) -> None:
    """``POST /v1/sessions/{id}/files`` and ``DELETE /v1/sessions/{id}/context``."""

    @app.post(
        "/v1/sessions/{session}/files",
        status_code=201,
        response_model=None,
        responses={
            **streamed("The file's info and the session's files; with Accept: text/event-stream, progress", 201),
            **errors(400, *GUARDED, 404, 409, 413, 415, 422, 429, 501, *WRITES),
        },
        openapi_extra=upload_body("file"),
    )
    async def upload(
        request: Request,
        session: str,
        file: Annotated[
            UploadFile,
            File(description="A non-empty document (txt, md, html, csv, json, pdf, docx) or image (png, jpeg, webp)"),
        ],
        retention: Annotated[
            Annotated[int, Field(ge=1, le=MAX_RETENTION)] | None,
            BeforeValidator(_absent),
            Form(json_schema_extra=NOT_GIVEN),
        ] = None,
    ) -> Any:
        """Add a file to the session's knowledge; ``retention`` is in rounds. An image is kept
        as the session's file instead (``GET .../artifacts/{name}``), for a message to send
        it to the model (``"images": [name]``); it answers 201 with its size at once.

        With ``Accept: text/event-stream`` the answer streams ``progress`` events
        (``{"done": n, "total": m}``, pages then passages) while the file is read, then
        ``file`` (the same body as the JSON answer) or ``error`` (``{"status", "message"}``).
        """
        if not await server.store.exists(session):
            raise SessionNotFound(session)
        if len((await request.form()).getlist("file")) > 1:
            return error(400, "send one file per request (this one has several 'file' parts)", "invalid_request_error")
        data = await file.read()
        if media_type(data) is not None:
            streaming = "text/event-stream" in request.headers.get("accept", "")
            return await _image_upload(server, session, file.filename or "image", data, streaming)
        if server.files is None:
            return error(501, "file uploads need reactchat.knowledge: pip install 'reactchat[files]'", "unavailable")
        name, keep = file.filename or "", retention or server.config.file_retention
        if "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(_indexing(server.files, session, name, data, keep), media_type="text/event-stream")
        try:
            info = await server.files.add(session, name, data, keep)
        except server.files.module.FileRejected as exc:
            return error(rejection_status(exc), str(exc), "file_rejected")
        return {"file": info, "files": await server.files.list(session)}

    @app.delete("/v1/sessions/{session}/context", responses=errors(*GUARDED, 404, *WRITES))
    async def clear_context(session: str) -> dict[str, Any]:
        """Forget the session's uploaded files."""
        if not await server.store.exists(session):
            raise SessionNotFound(session)
        if server.files is not None:
            await server.files.clear(session)
        return {"session": session, "files": []}


async def _indexing(files: Files, session: str, name: str, data: bytes, retention: int | None) -> AsyncIterator[str]:
    """SSE frames for one upload while it is read and indexed."""
    updates: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()

    def progress(done: int, total: int) -> None:
        updates.put_nowait((done, total))

    work = asyncio.create_task(files.add(session, name, data, retention, progress))
    work.add_done_callback(lambda _: updates.put_nowait(None))
    while (update := await updates.get()) is not None:
        yield frame("progress", json.dumps({"done": update[0], "total": update[1]}))
    try:
        info = await work
    except files.module.FileRejected as exc:
        status = rejection_status(exc)
        yield frame("error", json.dumps({"status": status, "message": str(exc)}))
        return
    except Exception as exc:  # the 200 headers are gone: say it in the stream, keep details in the log
        log.exception("upload of %s to session %s failed", name, session)
        message = f"internal error ({type(exc).__name__}) while reading the file; nothing was stored"
        yield frame("error", json.dumps({"status": 500, "message": message}))
        return
    yield frame("file", json.dumps({"file": info, "files": await files.list(session)}))


async def _image_upload(server: Server, session: str, name: str, data: bytes, streaming: bool) -> Any:
    """Keep an uploaded image as the session's artifact, once it is checked: 201 with its
    size, or 413 (over a bound) or 400 (not readable) with the reason; as the one ``file``
    or ``error`` frame of an SSE answer when ``streaming`` (there is nothing to index)."""
    try:
        image = checked(safe_name(name), data)
    except ImageRejected as exc:
        status = 413 if "over the limit" in exc.reason else 400
        if streaming:
            return _one_frame("error", {"status": status, "message": str(exc)})
        return error(status, str(exc), "file_rejected")
    store = server.store
    if not isinstance(store, ArtifactStore):
        return error(501, "this server's store keeps no files, so no images", "unavailable")
    kept = await store.put_artifact(session, image.name, data, time.time())
    view = {"name": kept.name, "size": kept.size, "image": image.model_dump(include={"media_type", "width", "height"})}
    files = await server.files.list(session) if server.files is not None else []
    if streaming:
        return _one_frame("file", {"file": view, "files": files})
    return JSONResponse({"file": view, "files": files}, status_code=201)


def _one_frame(kind: str, data: dict[str, Any]) -> StreamingResponse:
    async def frames() -> AsyncIterator[str]:
        yield frame(kind, json.dumps(data))

    return StreamingResponse(frames(), media_type="text/event-stream")


async def session_images(store: Any, session: str, names: list[str]) -> list[ImagePart] | tuple[int, str]:
    """The session's uploaded images of these names, checked again; else the status and why
    not (409: the session holds no image of that name; 400: a kept one no longer passes the checks)."""
    images: list[ImagePart] = []
    for name in names:
        artifact = await store.artifact(session, name) if isinstance(store, ArtifactStore) else None
        if artifact is None:
            return 409, f"no image {name!r} in this session: upload it first (POST /v1/sessions/{session}/files)"
        try:
            images.append(checked(name, artifact.data))
        except ImageRejected as exc:
            return 400, str(exc)
    return images


def _absent(value: Any) -> Any:
    """A form field has no null: ``null`` and an empty value mean "not given"."""
    return None if value in ("", "null") else value


#: the most rounds a file may be kept for (a larger number would not fit the stores' integers)
MAX_RETENTION = 1_000_000
#: what the document says of ``retention``: rounds, or (``_absent``) an empty value or ``null``
NOT_GIVEN: dict[str, Any] = {
    "anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_RETENTION}, {"type": "null"}, {"enum": ["", "null"]}]
}


#: the HTTP status of each ``FileRejected.reason``
STATUS = {"too_large": 413, "unsupported": 415, "full": 409, "unreadable": 400}


def rejection_status(exc: Exception) -> int:
    """413 for a file over a limit, 415 for a type that is not read, 409 for a full session, else 400."""
    return STATUS.get(getattr(exc, "reason", "unreadable"), 400)
