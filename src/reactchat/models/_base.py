"""The ``Model`` protocol and the registry that turns spec strings into models."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from reactchat.errors import ConfigError, ReactchatError
from reactchat.messages import Reply, Request


class ModelError(ReactchatError):
    """A model call failed in a way the operator must fix (bad key, unreachable server)."""


class ContextTooLong(ModelError):
    """The request does not fit the model's context window.

    The engine reacts by eliding old observations and trying once more; a caller
    that sees it can shorten the conversation or pick a model with a larger window.
    """


@runtime_checkable
class Model(Protocol):
    """Anything that turns a ``Request`` into a ``Reply``."""

    #: a short name for traces and the HTTP API
    name: str
    #: the model accepts ``Request.tools`` and answers with tool calls (``protocol="native"``
    #: needs it)
    supports_tools: bool
    #: the model's context window in tokens, when known (the agent keeps prompts within it)
    context_tokens: int | None
    # a model may also say ``supports_images`` (``reactchat.engine.images.SeesImages``): the
    # requests of one that does not carry a note in place of each image

    async def complete(self, request: Request) -> Reply:
        """Answer one request."""
        ...


# spec prefix -> "module:factory"; the factory takes the rest of the spec string.
# Modules are imported only when their spec is used, so heavy SDKs stay lazy.
_PROVIDERS: dict[str, str] = {
    "scripted": "reactchat.models._scripted:from_spec",
    "local": "reactchat.models.local:from_spec",
    "openai": "reactchat.models.openai:from_spec",
    "anthropic": "reactchat.models.anthropic:from_spec",
}


def resolve_model(spec: str | Model) -> Model:
    """Return a model for a spec string: ``local``, ``local:/path.gguf``,
    ``openai:MODEL``, ``anthropic:MODEL``, ``scripted:FILE``; a Model passes through."""
    if not isinstance(spec, str):
        return spec
    prefix, _, rest = spec.partition(":")
    target = _PROVIDERS.get(prefix)
    if target is None:
        known = ", ".join(sorted(_PROVIDERS))
        raise ConfigError(f"unknown model spec {spec!r}: use one of {known} (e.g. 'openai:gpt-4o-mini')")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("reactchat"):
            raise ConfigError(f"model provider {prefix!r} is not available in this version") from exc
        raise
    factory: Callable[[str], Model] = getattr(module, attr)
    return factory(rest)
