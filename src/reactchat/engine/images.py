"""Images in a run: kept as the session's artifacts when a tool gives them, and, at each
model call, sent to a model that sees images (their bytes read back from the store when
the run was rebuilt from stored events) or replaced by a note for one that does not.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from reactchat.messages import ImagePart, Message, Request, ToolResultMessage, UserMessage
from reactchat.messages.images import media_type, notes
from reactchat.store import Store
from reactchat.store._artifacts import ArtifactStore, safe_name


@runtime_checkable
class SeesImages(Protocol):
    """A model that says whether it accepts images (``supports_images``); a model without the
    attribute does not."""

    supports_images: bool


def sees_images(model: object) -> bool:
    """Whether ``model`` accepts images in user messages and tool results."""
    return isinstance(model, SeesImages) and model.supports_images is True


async def kept_images(store: Store, session: str, images: tuple[ImagePart, ...]) -> tuple[ImagePart, ...]:
    """The images a tool gave, kept as the session's artifacts (named as they were kept)
    where the store keeps artifacts; as they are otherwise (shown in this run only)."""
    if not images or not isinstance(store, ArtifactStore):
        return images
    kept = []
    for image in images:
        artifact = await store.put_artifact(session, safe_name(image.name), image.data, time.time())
        kept.append(image if artifact.name == image.name else image.model_copy(update={"name": artifact.name}))
    return tuple(kept)


async def shown_images(request: Request, model: object, store: Store, session: str) -> Request:
    """``request`` as ``model`` is sent it: images with their bytes for a model that sees
    them, a note in place of each for one that does not (a request without images as it is)."""
    if not any(isinstance(m, UserMessage | ToolResultMessage) and m.images for m in request.messages):
        return request
    sees = sees_images(model)
    messages: list[Message] = []
    for message in request.messages:
        if isinstance(message, UserMessage | ToolResultMessage) and message.images:
            message = await _shown(message, sees, store, session)
        messages.append(message)
    return request.model_copy(update={"messages": messages})


async def _shown(
    message: UserMessage | ToolResultMessage, sees: bool, store: Store, session: str
) -> UserMessage | ToolResultMessage:
    if not sees:
        return message.model_copy(update={"content": _joined(message.content, notes(message.images)), "images": ()})
    shown, gone = [], []
    for image in message.images:
        filled = image if image.data else await _read(image, store, session)
        if filled is None:
            gone.append(f"[image {image.name}: no longer kept]")
        else:
            shown.append(filled)
    return message.model_copy(update={"content": _joined(message.content, "\n".join(gone)), "images": tuple(shown)})


async def _read(image: ImagePart, store: Store, session: str) -> ImagePart | None:
    """The image with its bytes from the session's artifact, or None when that is gone or changed."""
    artifact = await store.artifact(session, image.name) if isinstance(store, ArtifactStore) else None
    if artifact is None or media_type(artifact.data) != image.media_type:
        return None
    return image.model_copy(update={"data": artifact.data, "size": len(artifact.data)})


def _joined(text: str, note: str) -> str:
    return f"{text}\n{note}" if text and note else text or note


__all__ = ["SeesImages", "kept_images", "sees_images", "shown_images"]
