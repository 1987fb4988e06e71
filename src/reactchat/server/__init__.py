"""The reactchat HTTP service: sessions over SSE, an OpenAI-compatible endpoint, a web page.

    from reactchat.server import create_app, ServerConfig
    app = create_app(ServerConfig(model="openai:gpt-4o-mini", store="sqlite:///chat.db"))

or ``reactchat serve``. Several workers can share one PostgreSQL store:
``REACTCHAT_DB=postgresql://... uvicorn --factory reactchat.server:app_from_env --workers 4``.
Needs the ``server`` extra: ``pip install 'reactchat[server]'``.
"""

from __future__ import annotations

try:
    import fastapi as _fastapi  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"reactchat.server needs the server extra: pip install 'reactchat[server]' ({exc})") from exc

from reactchat.server._app import create_app, default_agent
from reactchat.server._config import AgentFactory, ServerConfig, check_exposure
from reactchat.server._serve import app_from_env, serve
from reactchat.store import store_url

__all__ = [
    "AgentFactory",
    "ServerConfig",
    "app_from_env",
    "check_exposure",
    "create_app",
    "default_agent",
    "serve",
    "store_url",
]
