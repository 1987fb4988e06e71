"""Models: the ``Model`` protocol, ``ScriptedModel`` and the spec-string registry.

A provider adapter is one file with one required async method, ``complete``.
What a model can do is said by attributes: ``supports_tools`` (native tool calling)
and ``context_tokens`` (its context window, when known).
"""

from __future__ import annotations

from reactchat.models._base import ContextTooLong, Model, ModelError, resolve_model
from reactchat.models._scripted import ScriptedModel, tool_call, tool_calls

__all__ = ["ContextTooLong", "Model", "ModelError", "ScriptedModel", "resolve_model", "tool_call", "tool_calls"]
