"""A2A (Agent2Agent) both ways, with the official ``a2a-sdk``.

* ``reactchat serve`` is an A2A agent: its card at ``/.well-known/agent-card.json`` and
  A2A JSON-RPC at ``/a2a`` (see ``reactchat.a2a._server``). A context is a session, a
  task one turn; a question of the agent makes the task ``input-required``.
* ``RemoteAgent(url)`` puts a remote A2A agent in ``tools=``, as a sub-agent.

Needs the ``a2a`` extra: ``pip install 'reactchat[a2a]'``. See docs/a2a.md.
"""

from __future__ import annotations

try:
    import a2a as _a2a  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"reactchat.a2a needs the a2a extra: pip install 'reactchat[a2a]' ({exc})") from exc

from reactchat.a2a._remote import RemoteAgent

__all__ = ["RemoteAgent"]
