"""Models: the ``Model`` protocol, ``ScriptedModel`` and the spec-string registry.

A provider adapter is one file with one required async method, ``complete``.
Capabilities are attributes: ``supports_tools`` (native tool calling) and
``supports_grammar`` (the model constrains text ReAct steps itself).
"""

from __future__ import annotations

from reactchat.models._base import ContextTooLong, Model, ModelError, resolve_model
from reactchat.models._scripted import ScriptedModel

__all__ = ["ContextTooLong", "Model", "ModelError", "ScriptedModel", "resolve_model"]
