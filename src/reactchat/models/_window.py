"""A remote model's context window: what the user said, and what its server publishes.

Servers that say how long a prompt they take say it in different places:

- vLLM: ``GET /v1/models`` → the model's ``max_model_len``;
- OpenRouter (and others that follow it): ``GET /v1/models`` → ``context_length``
  (or ``top_provider.context_length``);
- llama.cpp's server: ``GET /props`` → ``default_generation_settings.n_ctx`` (the window of
  one slot), else ``/v1/models`` → ``meta.n_ctx_train`` (the window it was trained with);
- Ollama (it answers ``GET /api/version``): ``POST /api/show`` → ``num_ctx`` in its
  ``parameters``, else ``model_info["<arch>.context_length"]``.

llama-cpp-python's server and OpenAI's API publish none. Anthropic's Models API says
``max_input_tokens`` in its newer versions (``GET /v1/models/{id}``); where it says
nothing, ``claude_window`` answers from Anthropic's documentation of its models.

The server is asked once per model object, the first time a run needs the window
(``reactchat.engine.tokens.discover``), never on a model call; whatever it answers is kept.
A server that publishes nothing, or cannot be reached in ``PROBE_SECONDS``, leaves the
user's value (or None): never an error. When both are known the smaller wins: a user may
keep prompts shorter than the server allows, never longer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)

#: how long one question to a server about its window may take, in seconds
PROBE_SECONDS = 3.0

#: Claude context windows in tokens, by model-name prefix (first match wins), from
#: Anthropic's models overview: every Claude 2.1, 3, 3.5, 3.7, 4 and 4.5 model takes
#: 200,000 tokens (Sonnet 4 and 4.5 take 1M only with a beta header this adapter does not
#: send); Claude 2.0 and Claude Instant took 100,000
CLAUDE_WINDOWS: tuple[tuple[str, int], ...] = (
    ("claude-instant", 100_000),
    ("claude-2.0", 100_000),
    ("claude-", 200_000),
)


@runtime_checkable
class PublishesWindow(Protocol):
    """A model whose server may say how large its context window is."""

    async def read_context_tokens(self) -> int | None:
        """Ask the server once (later calls answer from what was read); the window, or None."""
        ...


class Window:
    """A model's context window: ``given`` by the user, and what ``ask`` reads once;
    ``fallback`` when neither says."""

    def __init__(
        self, given: int | None, ask: Callable[[], Awaitable[int | None]] | None = None, fallback: int | None = None
    ) -> None:
        self.given = given
        self._ask = ask
        self.fallback = fallback
        self.published: int | None = None
        #: the reading under way, per event loop (a sync caller runs each turn on a new loop)
        self._reading: tuple[asyncio.AbstractEventLoop, asyncio.Task[int | None]] | None = None
        self._read = ask is None

    @property
    def tokens(self) -> int | None:
        """The window prompts must fit: the smaller of the user's and the server's."""
        known = [n for n in (self.given, self.published) if n]
        return min(known) if known else self.fallback

    async def read(self) -> int | None:
        """Ask the server the first time; then the window as known."""
        if not self._read and self._ask is not None:
            loop = asyncio.get_running_loop()
            if self._reading is None or self._reading[0] is not loop:
                self._reading = (loop, loop.create_task(self._ask_once(self._ask)))
            await asyncio.shield(self._reading[1])
        return self.tokens

    async def _ask_once(self, ask: Callable[[], Awaitable[int | None]]) -> int | None:
        try:
            self.published = await asyncio.wait_for(ask(), PROBE_SECONDS * 4)
        except Exception as error:  # the window is a help, never a reason for a turn to fail
            log.info("the server's context window could not be read: %s: %s", type(error).__name__, error)
        self._read = True
        return self.published


def claude_window(model: str) -> int | None:
    """The documented window of the Claude model ``model``, None for a name not known."""
    return next((tokens for prefix, tokens in CLAUDE_WINDOWS if model.startswith(prefix)), None)


async def anthropic_window(client: Callable[[], Awaitable[Any]], model: str) -> int | None:
    """The ``max_input_tokens`` Anthropic's Models API says for ``model``, or None (older
    versions of the API and the SDK say none)."""
    info = await (await client()).models.retrieve(model, timeout=PROBE_SECONDS)
    return _int(getattr(info, "max_input_tokens", None))


async def openai_compatible_window(base_url: str, model: str, api_key: str, client: Any = None) -> int | None:
    """The window an OpenAI-compatible server at ``base_url`` publishes for ``model``, or None."""
    # optional: httpx comes with the SDKs that need it (the [openai] extra installs it)
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"}
    root = base_url.removesuffix("/v1")
    owned = client is None
    http = client or httpx.AsyncClient(timeout=PROBE_SECONDS)
    try:
        entry = _entry(await _json(http, "GET", f"{base_url}/models", headers), model)
        listed = _int(entry.get("max_model_len")) or _int(entry.get("context_length"))
        listed = listed or _int(_dig(entry, "top_provider", "context_length"))
        if listed:
            return listed
        props = await _json(http, "GET", f"{root}/props", headers)
        if n_ctx := _int(_dig(props, "default_generation_settings", "n_ctx")):
            return n_ctx
        if trained := _int(_dig(entry, "meta", "n_ctx_train")):  # llama.cpp's server without /props
            return trained
        if "version" not in await _json(http, "GET", f"{root}/api/version", headers):
            return None  # not Ollama: nothing is posted to a server that did not say it is
        return _ollama(await _json(http, "POST", f"{root}/api/show", headers, {"model": model}))
    finally:
        if owned:
            await http.aclose()


async def _json(http: Any, method: str, url: str, headers: dict[str, str], body: Any = None) -> dict[str, Any]:
    """The JSON object ``url`` answers, or ``{}`` for an error status, another body or a failure."""
    try:
        response = await http.request(method, url, headers=headers, json=body, timeout=PROBE_SECONDS)
        data = response.json() if response.status_code == 200 else {}
    except Exception as error:  # unreachable, not JSON: this server does not publish it here
        log.debug("%s %s: %s", method, url, error)
        return {}
    return data if isinstance(data, dict) else {}


def _entry(listed: dict[str, Any], model: str) -> dict[str, Any]:
    """The entry of ``model`` in a ``/v1/models`` list; the only entry of a one-model server."""
    data = [e for e in listed.get("data") or [] if isinstance(e, dict)]
    named = [e for e in data if e.get("id") == model]
    return named[0] if named else data[0] if len(data) == 1 else {}


def _ollama(shown: dict[str, Any]) -> int | None:
    """Ollama's window: ``num_ctx`` of the model's parameters, else its trained context length."""
    for line in str(shown.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and (n := _int(value.strip())):
            return n
    info = shown.get("model_info")
    if isinstance(info, dict):
        return next((n for key, v in info.items() if key.endswith(".context_length") and (n := _int(v))), None)
    return None


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _int(value: Any) -> int | None:
    """A positive whole number of tokens, else None (a string of digits counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


__all__ = [
    "CLAUDE_WINDOWS",
    "PROBE_SECONDS",
    "PublishesWindow",
    "Window",
    "anthropic_window",
    "claude_window",
    "openai_compatible_window",
]
