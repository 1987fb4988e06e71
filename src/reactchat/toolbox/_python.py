"""``run_python``: the agent writes Python and runs it in a bubblewrap sandbox.

Each call is a fresh sandbox (``reactchat.toolbox._sandbox``): no network, the system
read-only, the session's uploaded files (their original bytes) read-only under
``/data``, a fresh ``/out`` whose files become the session's artifacts
(``GET /v1/sessions/{id}/artifacts/{name}``). The observation is what the code printed,
the exception's last lines, what was cut and the files it made; the PNG, JPEG and WebP
images among them go with it as images (``Observation``), so that a model that sees
images sees the chart it drew. Nothing survives from one call to the next: a call that
needs a variable computes it again.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from reactchat.messages import ImagePart
from reactchat.messages.images import ImageRejected, Observation, checked, media_type
from reactchat.store._artifacts import MAX_ARTIFACT_BYTES, ArtifactStore, safe_name
from reactchat.toolbox._sandbox import SandboxLimits
from reactchat.toolbox._sandbox_run import SandboxRun, Stream, run_sandboxed
from reactchat.tools import RunContext, Tool

#: characters of stdout and of stderr shown to the model
SHOWN = 4000


def _stream(label: str, stream: Stream, shown: int) -> str:
    text = stream.text
    cut = stream.cut + len(text[shown:].encode())
    if cut:
        text = text[:shown] + f"\n[{label} cut: {cut} more bytes not shown]"
    return f"{label}:\n{text.rstrip()}"


def render(run: SandboxRun, kept: list[str], shown: int = SHOWN) -> str:
    """The observation of a run: its output, its error, the files it made (``kept``: the
    names they were kept under as the session's artifacts)."""
    parts = []
    if run.stdout.total:
        parts.append(_stream("stdout", run.stdout, shown))
    if run.stderr.total:
        parts.append(_stream("stderr", run.stderr, shown))
    if run.error:
        parts.append(f"error:\n{run.error}")
    if run.files:
        names = ", ".join(f"{name} ({len(data)} bytes)" for name, data in run.files.items())
        where = "kept as this chat's files" if kept else "not kept: this store keeps no artifacts"
        parts.append(f"files written to /out ({where}): {names}")
    if run.skipped:
        parts.append("not kept from /out: " + "; ".join(run.skipped))
    return "\n\n".join(parts) or "(the code ran and printed nothing)"


async def _uploads(ctx: RunContext, limit: int) -> dict[str, bytes]:
    """The session's uploaded files as they were uploaded, up to ``limit`` bytes in all."""
    kb: Any = ctx.services.get("knowledge")
    if kb is None:
        return {}
    files: dict[str, bytes] = {}
    total = 0
    for info in await kb.files(ctx.session):
        if total + info.size > limit:
            continue
        data = await kb.data(ctx.session, info.id)
        if data is not None:
            files[safe_name(info.name)] = data
            total += len(data)
    return files


def _images(files: dict[str, bytes]) -> dict[str, ImagePart]:
    """The files that are images a model may be shown (the engine keeps those as artifacts)."""
    images = {}
    for name, data in files.items():
        if media_type(data) is not None:
            with contextlib.suppress(ImageRejected):  # too large, broken: kept as a plain file
                images[name] = checked(safe_name(name), data)
    return images


async def _keep(ctx: RunContext, files: dict[str, bytes], images: dict[str, ImagePart]) -> list[str]:
    """Store the files as the session's artifacts (the images are kept by the engine, with
    the observation); the names they are kept under."""
    store = ctx.store
    if not isinstance(store, ArtifactStore):
        return []
    kept = []
    at = time.time()
    for name, data in files.items():
        if name in images:
            kept.append(images[name].name)
        elif len(data) <= MAX_ARTIFACT_BYTES:
            artifact = await store.put_artifact(ctx.session, safe_name(name), data, at)
            kept.append(artifact.name)
    return kept


def run_python_tool(limits: SandboxLimits | None = None) -> Tool:
    """A ``run_python`` tool whose sandboxes have ``limits`` (``SandboxLimits()`` by default)."""
    chosen = limits or SandboxLimits()

    async def run_python(code: str, ctx: RunContext) -> Observation:
        """Run Python 3 code in a sandbox and see what it prints. Use it to compute, analyse
        data and draw charts. The sandbox has no network; the chat's uploaded files are
        under /data (read-only); files the code writes to /out (the working directory) are
        given to the user, e.g. plt.savefig("/out/chart.png"). Each call starts afresh:
        nothing is kept from an earlier call. Print the results you need.

        Args:
            code: the whole program, as it would be in a .py file
        """
        run = await run_sandboxed(code, await _uploads(ctx, chosen.data_bytes), chosen)
        images = _images(run.files)
        return Observation(render(run, await _keep(ctx, run.files, images)), tuple(images.values()))

    return Tool(run_python, timeout=chosen.wall_seconds + 30, max_chars=3 * SHOWN)


#: the built-in tool, with the default limits
run_python = run_python_tool()

__all__ = ["SandboxLimits", "SandboxRun", "render", "run_python", "run_python_tool", "run_sandboxed"]
