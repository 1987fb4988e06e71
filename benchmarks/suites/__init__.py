"""Public agent benchmarks run through ``reactchat.evals`` (data from installed wheels)."""

from __future__ import annotations

from typing import Any

from reactchat.models import resolve_model
from reactchat.models.local import LocalModel


def agent_model(spec: str, n_ctx: int) -> Any:
    """The model for a spec; an embedded one with a context of ``n_ctx`` tokens (the suite's
    policy and tool descriptions pass the embedded default's 4,096)."""
    prefix, _, rest = spec.partition(":")
    return LocalModel(rest or None, n_ctx=n_ctx) if prefix == "local" else resolve_model(spec)
