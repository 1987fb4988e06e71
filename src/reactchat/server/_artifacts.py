"""The session's artifacts over HTTP: ``GET /v1/sessions/{id}/artifacts[/{name}]``.

An artifact was written by code the model wrote, so it is served as data, never as a
page of this site: its type comes from ``content_type`` (images as images when their
bytes agree, text as ``text/plain``, everything else ``application/octet-stream``),
with ``X-Content-Type-Options: nosniff`` (the guard's), a ``Content-Security-Policy`` that runs
nothing, and ``Content-Disposition`` (``inline`` for images and text, ``attachment``
for the rest).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from reactchat.server._schema import GUARDED, READS, errors
from reactchat.store import SessionNotFound
from reactchat.store._artifacts import ArtifactStore, safe_name

if TYPE_CHECKING:
    from reactchat.server._server import Server

#: ``X-Content-Type-Options: nosniff`` is on every answer already (``_guard.SECURITY_HEADERS``)
_SAFE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; img-src 'self'; sandbox",
    "Cache-Control": "private, max-age=0",
}


def disposition(name: str, kind: str) -> str:
    """``Content-Disposition`` for an artifact: its name, ASCII and RFC 5987 UTF-8."""
    how = "inline" if kind.startswith(("image/", "text/plain")) else "attachment"
    ascii_name = name.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
    return f"{how}; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


def artifact_routes(app: FastAPI, server: Server) -> None:
    """Add the artifact routes to ``app`` (404 for every artifact when the store keeps none)."""
    store = server.store

    @app.get("/v1/sessions/{session}/artifacts", responses=errors(*GUARDED, 404, *READS))
    async def list_artifacts(session: str) -> dict[str, Any]:
        """The session's artifacts: name, content type, size and when each was made, oldest first."""
        if not await store.exists(session):
            raise SessionNotFound(session)
        found = await store.artifacts(session) if isinstance(store, ArtifactStore) else []
        rows = [{"name": a.name, "content_type": a.content_type, "size": a.size, "at": a.at} for a in found]
        return {"artifacts": rows}

    @app.get(
        "/v1/sessions/{session}/artifacts/{name}",
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}}}, **errors(*GUARDED, 404, *READS)},
    )
    async def get_artifact(session: str, name: str) -> Response:
        """One artifact's bytes, with a safe content type and ``Content-Disposition``."""
        artifact = None
        if name == safe_name(name) and isinstance(store, ArtifactStore):
            artifact = await store.artifact(session, name)
        if artifact is None:
            if not await store.exists(session):
                raise SessionNotFound(session)
            problem = {"message": f"no artifact {name!r} in this session", "type": "not_found", "code": 404}
            return JSONResponse({"error": problem}, status_code=404)
        headers = {**_SAFE_HEADERS, "Content-Disposition": disposition(artifact.name, artifact.content_type)}
        return Response(content=artifact.data, media_type=artifact.content_type, headers=headers)
