"""How many tokens a text is for a model, and how large the model's window is.

``count(model, text)`` is the one place the engine turns text into tokens:

- a model with its own tokenizer (``Tokenizer``: the embedded llama.cpp models) counts
  exactly;
- any other model divides characters by a ratio learned from the usage its server
  reported (``learn``, called after every model call): characters sent over input tokens
  reported, per model name, kept in the store (``TokenCalibrations``) so that a new process
  starts calibrated; until a model has reported ``MIN_TOKENS`` tokens the ratio is
  ``CHARS_PER_TOKEN``.

``window(model)`` is ``model.context_tokens``: the embedded models know theirs; a remote
model's is the user's (``OpenAIModel(context_tokens=...)``) or what its server publishes,
read once by ``discover`` before the first run that needs it (``reactchat.models._window``);
None when nobody says.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Protocol, TypeGuard, runtime_checkable

from reactchat.messages import Request, Usage
from reactchat.models import Model
from reactchat.models._window import PublishesWindow

#: characters per token before a model has reported usage (a rough, model-agnostic estimate)
CHARS_PER_TOKEN = 4.0
#: reported input tokens a model needs before its own ratio replaces the estimate
MIN_TOKENS = 200
#: the share of the window that earlier turns may fill by default (``Agent(history_tokens=None)``)
HISTORY_SHARE = 0.25
#: a learned ratio is saved to the store after this many more calls (and at the first)
SAVE_EVERY = 20


@runtime_checkable
class Tokenizer(Protocol):
    """A model that counts tokens with its own tokenizer."""

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model."""
        ...


@runtime_checkable
class TokenCalibrations(Protocol):
    """A store that keeps the characters and tokens each model has reported (every store does)."""

    async def token_calibration(self, model: str) -> tuple[int, int] | None:
        """The ``(characters, tokens)`` recorded for ``model``, or None."""
        ...

    async def add_token_calibration(self, model: str, chars: int, tokens: int) -> None:
        """Add ``chars`` characters sent and ``tokens`` input tokens reported to ``model``'s totals."""
        ...


@cache
def _has(cls: type, protocol: type) -> bool:
    """Whether ``cls`` has ``protocol``'s methods, asked once per class: an ``isinstance``
    of a runtime protocol costs 12-14 µs on Python 3.11, and a run asks several times."""
    return issubclass(cls, protocol)


def _tokenizer(model: Model) -> TypeGuard[Tokenizer]:
    return _has(type(model), Tokenizer)


def _publishes_window(model: Model) -> TypeGuard[PublishesWindow]:
    return _has(type(model), PublishesWindow)


class _Totals:
    """What one model has reported in this process: totals, and what is not saved yet."""

    def __init__(self, chars: int = 0, tokens: int = 0) -> None:
        self.chars = chars
        self.tokens = tokens
        self.unsaved_chars = 0
        self.unsaved_tokens = 0
        self.calls = 0


# per model name; one process serves many sessions of the same few models
_totals: dict[str, _Totals] = {}


def ratio(model_name: str) -> float:
    """Characters per token for ``model_name``: learned, else ``CHARS_PER_TOKEN``."""
    totals = _totals.get(model_name)
    if totals is None or totals.tokens < MIN_TOKENS:
        return CHARS_PER_TOKEN
    return totals.chars / totals.tokens


def count(model: Model, text: str) -> int:
    """How many tokens ``text`` is for ``model`` (exact with its tokenizer, else calibrated)."""
    if not text:
        return 0
    if _tokenizer(model):
        return model.count_tokens(text)
    return math.ceil(len(text) / ratio(model.name))


def chars_per_token(model: Model, sample: str = "") -> float:
    """How many characters a token of ``model`` is, for budgets kept in characters: measured
    on ``sample`` with the model's own tokenizer, else learned from its server's usage
    (``ratio``). A Japanese prompt is near one character a token, an English one near four."""
    if sample and _tokenizer(model):
        return len(sample) / max(1, model.count_tokens(sample))
    return ratio(model.name)


def window(model: Model) -> int | None:
    """``model``'s context window in tokens, None when unknown."""
    return model.context_tokens


async def discover(model: Model) -> int | None:
    """``model``'s window, asking its server the first time if it may publish one (a
    lookup of what was read every time after)."""
    if _publishes_window(model):
        await model.read_context_tokens()
    return window(model)


def history_chars(model: Model, history_tokens: int | None, context_tokens: int, sample: str = "") -> int:
    """How many characters of earlier turns a prompt carries: ``history_tokens`` tokens, else
    ``HISTORY_SHARE`` of the window (the model's, within the agent's ``context_tokens``),
    each token weighed at what one is of ``sample`` (the newest turns) for the model."""
    if history_tokens is None:
        history_tokens = int(min(context_tokens, window(model) or context_tokens) * HISTORY_SHARE)
    return int(history_tokens * chars_per_token(model, sample))


def request_chars(request: Request) -> int:
    """The characters of what a request sends: its messages and its tools' descriptions."""
    sent = 0
    for message in request.messages:
        content = getattr(message, "content", None)
        sent += len(content) if isinstance(content, str) else len(getattr(message, "text", ""))
    return sent + sum(len(t.description) + len(str(t.input_schema)) for t in request.tools)


async def learn(store: object, model: Model, request: Request, usage: Usage | None) -> None:
    """Fold one call's reported usage into ``model``'s ratio (an estimate teaches nothing);
    loads the store's totals the first time and saves them now and then."""
    if usage is None or usage.estimated or usage.input_tokens <= 0 or _tokenizer(model):
        return
    calibrations = store if isinstance(store, TokenCalibrations) else None
    totals = _totals.get(model.name)
    if totals is None:
        known = await calibrations.token_calibration(model.name) if calibrations is not None else None
        totals = _totals[model.name] = _Totals(*(known or (0, 0)))
    chars = request_chars(request)
    totals.chars += chars
    totals.tokens += usage.input_tokens
    totals.unsaved_chars += chars
    totals.unsaved_tokens += usage.input_tokens
    totals.calls += 1
    if calibrations is not None and (totals.calls == 1 or totals.calls % SAVE_EVERY == 0):
        await calibrations.add_token_calibration(model.name, totals.unsaved_chars, totals.unsaved_tokens)
        totals.unsaved_chars = totals.unsaved_tokens = 0


async def load(store: object, model_name: str) -> None:
    """Take ``model_name``'s totals from ``store`` if this process has none yet."""
    if model_name not in _totals and isinstance(store, TokenCalibrations):
        known = await store.token_calibration(model_name)
        if known is not None:
            _totals[model_name] = _Totals(*known)


def forget_calibration() -> None:
    """Drop what this process learned (the stores keep theirs); for tests and benchmarks."""
    _totals.clear()


__all__ = [
    "CHARS_PER_TOKEN",
    "HISTORY_SHARE",
    "TokenCalibrations",
    "Tokenizer",
    "chars_per_token",
    "count",
    "discover",
    "forget_calibration",
    "history_chars",
    "learn",
    "load",
    "ratio",
    "request_chars",
    "window",
]
