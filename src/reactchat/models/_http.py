"""What the HTTP provider adapters (``openai``, ``anthropic``) share: retries and errors.

Both official SDKs raise exceptions with the same shape (``APIStatusError`` with
``status_code``, ``body`` and ``response``; ``APIConnectionError``; ``APITimeoutError``),
so one classifier turns them into ``ModelError`` messages that say what to fix. The
SDKs' own retries are turned off: ``call_with_retries`` retries 429, 5xx, timeouts and
dropped connections a bounded number of times with exponential backoff (honouring a
short ``Retry-After``), and never other 4xx errors, which a retry cannot fix. Nor does
it retry what a server's code decided rather than its load: a 500 that reports a
validation error, or a 500 that comes back with the same body as the attempt before.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import re
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from reactchat.errors import ConfigError
from reactchat.messages import ToolInput
from reactchat.models._base import ContextTooLong, ModelError

T = TypeVar("T")

#: phrases servers use for "the prompt does not fit the context window"
#: (OpenAI, vLLM, llama.cpp's server, llama-cpp-python, Anthropic, LM Studio)
_CONTEXT_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context length",
    "exceed_context_size",
    "exceeds the available context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
)

#: a 500 that reports the request's validation failing (pydantic's "7 validation errors",
#: llama-cpp-python's server): the same request fails the same way every time
_VALIDATION = re.compile(r"\bvalidation errors?\b", re.I)


class RetryableError(ModelError):
    """A failure that may pass if the same request is sent again (429, 5xx, timeout)."""

    def __init__(self, message: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        #: the HTTP status, when the server answered
        self.status = status


@dataclass(frozen=True)
class Endpoint:
    """Who is being called, for error messages."""

    provider: str  # "OpenAI", "Anthropic"
    model: str
    base_url: str
    key_env: str  # OPENAI_API_KEY
    extra: str  # "openai": pip install 'reactchat[openai]'


def classify(exc: Exception, where: Endpoint) -> ModelError:
    """The ``ModelError`` for an SDK exception; a ``RetryableError`` when a retry may help."""
    if isinstance(exc, ModelError):
        return exc
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status < 400:
        # an error event inside a stream that began with 200: its type says what it is
        status = _STATUS_OF_TYPE.get(_error_type(exc), 500)
    if isinstance(status, int):
        return _status_error(status, server_message(exc), _retry_after(exc), where)
    if "APITimeoutError" in names or isinstance(exc, TimeoutError):
        return RetryableError(f"{where.provider} request to {where.base_url} timed out (model {where.model!r})")
    if "APIConnectionError" in names:
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause else ""
        return RetryableError(
            f"cannot reach {where.provider} at {where.base_url}{detail}. Is the server running and the URL right?"
        )
    return ModelError(f"{where.provider} call failed: {type(exc).__name__}: {exc}")


def _status_error(status: int, message: str, retry_after: float | None, where: Endpoint) -> ModelError:
    said = f": {message}" if message else ""
    lowered = message.casefold()
    if status == 413 or (status in (400, 422) and any(p in lowered for p in _CONTEXT_PHRASES)):
        return ContextTooLong(f"the request is too long for {where.model!r} ({status}){said}")
    if status == 401:
        return ModelError(
            f"{where.provider} rejected the API key (401){said}. Set {where.key_env} to a valid key "
            f"for {where.base_url}."
        )
    if status == 403:
        return ModelError(f"{where.provider} refused access to {where.model!r} (403){said}")
    if status == 404:
        return ModelError(
            f"{where.provider} has no model {where.model!r} at {where.base_url} (404){said}. Check the model "
            f"name in '{where.extra}:MODEL' and the base URL."
        )
    if status == 429:
        if "insufficient_quota" in lowered or "exceeded your current quota" in lowered:
            return ModelError(f"{where.provider} account is out of quota (429){said}")
        return RetryableError(f"{where.provider} rate-limited the request (429){said}", retry_after, status)
    server = f"{where.provider} at {where.base_url}"
    if status >= 500 and _VALIDATION.search(message):
        return ModelError(f"{server} rejected the request ({status}){said}")
    if status == 408 or status >= 500:
        return RetryableError(f"{server} had an error ({status}){said}", retry_after, status)
    return ModelError(f"{where.provider} rejected the request ({status}){said}")


#: Anthropic's error types (also sent as stream events) and the status each stands for
_STATUS_OF_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def _error_type(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("type", "")) if isinstance(error, dict) else ""


def server_message(exc: Exception) -> str:
    """The error message the server sent, from the SDK exception's body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            parts = [str(error[k]) for k in ("message", "code", "type") if error.get(k)]
            if parts:
                return " ".join(dict.fromkeys(parts))
        elif isinstance(error, str):
            return error
        detail = body.get("detail")
        if detail:
            return str(detail)
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return str(getattr(exc, "message", "") or "")


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            return None  # an HTTP date: fall back to our own backoff
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: ``retries`` more attempts, waiting ``backoff * 2**n`` (with jitter)."""

    retries: int = 3
    backoff: float = 0.5
    #: never wait longer than this between attempts, whatever ``Retry-After`` says
    max_wait: float = 20.0

    def wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(float(retry_after), self.max_wait)
        return min(self.backoff * 2.0**attempt * (1 + random.random() / 4), self.max_wait)


async def call_with_retries(call: Callable[[], Awaitable[T]], where: Endpoint, policy: RetryPolicy) -> T:
    """Await ``call()``; retry it while it fails with a ``RetryableError``, then raise a ``ModelError``."""
    attempt = 0
    previous: RetryableError | None = None
    while True:
        try:
            return await call()
        except Exception as exc:
            error = classify(exc, where)
            if not isinstance(error, RetryableError):
                raise error from exc
            # an overloaded server (429, 502, 503, 529) may say the same thing every time
            # and still recover; a 500 that repeats its body is its code failing on this request
            repeated = error.status == 500 and previous is not None and str(error) == str(previous)
            if repeated or attempt >= policy.retries:
                if attempt:
                    why = ": the same error twice in a row" if repeated else ""
                    raise ModelError(f"{error} (gave up after {attempt + 1} attempts{why})") from exc
                raise error from exc
            await asyncio.sleep(policy.wait(attempt, error.retry_after))
            attempt += 1
            previous = error


def parse_arguments(raw: str) -> ToolInput:
    """Tool-call arguments as a dict, or the raw string when they are not a JSON object."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


class ClientPerLoop:
    """One SDK client per event loop, closed when that loop shuts down.

    An SDK client's connection pool belongs to the loop it was used in, and a model
    object may serve several loops. The client is closed from inside its own loop: by
    ``close_clients`` (``Agent.run`` calls it before it returns, as ``asyncio.run``'s
    shutdown would), by ``aclose``, or by an async generator that ``asyncio.run`` (and
    ``asyncio.Runner``) finalize at shutdown, so no connection is left open.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None

    async def get(self) -> Any:
        """The client for the running loop."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self._factory(), loop
            self._closer = _close_at_shutdown(self._client)
            await self._closer.__anext__()
            _OPEN.add(self)
        return self._client

    async def aclose(self) -> None:
        """Close the current loop's client now."""
        if self._closer is not None and self._loop is asyncio.get_running_loop():
            await self._closer.aclose()
        self._client = self._loop = self._closer = None
        _OPEN.discard(self)


_OPEN: weakref.WeakSet[ClientPerLoop] = weakref.WeakSet()


async def close_clients() -> None:
    """Close every SDK client opened in the running loop (they reopen on next use)."""
    loop = asyncio.get_running_loop()
    for client in [c for c in _OPEN if c._loop is loop]:
        await client.aclose()


async def _close_at_shutdown(client: Any) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.close()


DeltaCallback = Callable[[str], Any]


def delta_sinks(*callbacks: DeltaCallback | None) -> list[DeltaCallback]:
    """Where a call's text deltas go: the model's own ``on_delta`` and the request's."""
    return [callback for callback in callbacks if callback is not None]


async def emit_delta(text: str, sinks: Sequence[DeltaCallback]) -> None:
    """Pass a streamed text delta to each sink (sync or async callbacks)."""
    if not text:
        return
    for callback in sinks:
        result = callback(text)
        if inspect.isawaitable(result):
            await result


#: the options both adapters take in a spec string (``openai:MODEL?max_tokens=256``)
SPEC_OPTIONS: dict[str, type[Any]] = {
    "max_tokens": int,
    "temperature": float,
    "context_tokens": int,
    "timeout": float,
    "retries": int,
    "stream": bool,
    "prefill": str,
    "base_url": str,
}


def spec_options(rest: str, extra: dict[str, type[Any]] | None = None) -> tuple[str, dict[str, Any]]:
    """``MODEL?key=value&key=value`` → the model name and its options as keyword arguments
    (``SPEC_OPTIONS`` and the adapter's own ``extra``, converted to their types);
    ``ConfigError`` for anything else."""
    known = {**SPEC_OPTIONS, **(extra or {})}
    model, _, query = rest.partition("?")
    raw: dict[str, str] = {}
    for item in filter(None, query.split("&")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"model option {item!r} needs a value: use MODEL?{item}=VALUE")
        raw[key.strip()] = value.strip()
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(f"unknown model option(s) {unknown}: use {', '.join(known)}")
    return model.strip(), {key: _option_value(key, value, known[key]) for key, value in raw.items()}


def _option_value(key: str, raw: str, kind: type[Any]) -> Any:
    """One option converted to ``kind`` (int, float, bool, str), or a clear ``ConfigError``."""
    if kind is bool:
        if raw.casefold() in ("1", "true", "yes", "on"):
            return True
        if raw.casefold() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"model option {key}={raw!r} must be true or false")
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"model option {key}={raw!r} must be a {kind.__name__}") from None


_REJECTED: dict[tuple[str, str], dict[str, str]] = {}


def rejected(where: Endpoint) -> dict[str, str]:
    """What this server refused for this model, remembered for the process (every model
    object talking to it learns from one refusal): a request parameter → what replaces it
    (``""``: drop it), or a feature (``"prefill"``) → ``""``."""
    return _REJECTED.setdefault((where.base_url, where.model), {})
