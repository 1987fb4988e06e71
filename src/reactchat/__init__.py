"""reactchat: an engine for agent dialogue.

An LLM agent that reasons and acts (Thought → Action → Observation … → Final Answer)
with tools inside a multi-turn chat, asks the user mid-reasoning and resumes without
losing its state.

    from reactchat import Agent, tool

    @tool
    def calculator(expression: str) -> str:
        "Evaluate an arithmetic expression."

    agent = Agent(model="local", tools=[calculator])
    print(agent.run("What is 80.16 * 1.15?").answer)

Names are imported lazily so that ``import reactchat`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Agent": "reactchat.agent",
    "Budget": "reactchat.engine.budget",
    "Memory": "reactchat.memory",
    "Reflexion": "reactchat.orchestration.reflexion",
    "RunResult": "reactchat.engine.session",
    "Step": "reactchat.engine.session",
    "SessionState": "reactchat.engine.session",
    "tool": "reactchat.tools",
    "Tool": "reactchat.tools",
    "RunContext": "reactchat.tools",
    "PauseForUser": "reactchat.tools",
    "Model": "reactchat.models",
    "ModelError": "reactchat.models",
    "ContextTooLong": "reactchat.models",
    "ScriptedModel": "reactchat.models",
    "resolve_model": "reactchat.models",
    "FormatError": "reactchat.protocols.base",
    "ReactchatError": "reactchat.errors",
    "ConfigError": "reactchat.errors",
    "NothingToRun": "reactchat.errors",
    "Action": "reactchat.protocols.react",
    "FinalAnswer": "reactchat.protocols.react",
    "Store": "reactchat.store",
    "resolve_store": "reactchat.store",
    "SessionBusy": "reactchat.errors",
    "SessionNotFound": "reactchat.errors",
    "AlreadyAnswered": "reactchat.errors",
    "calculator": "reactchat.toolbox",
    "ask_user": "reactchat.toolbox",
}

if TYPE_CHECKING:
    from reactchat.agent import Agent
    from reactchat.engine.budget import Budget
    from reactchat.engine.session import RunResult, SessionState, Step
    from reactchat.errors import (
        AlreadyAnswered,
        ConfigError,
        NothingToRun,
        ReactchatError,
        SessionBusy,
        SessionNotFound,
    )
    from reactchat.memory import Memory
    from reactchat.models import ContextTooLong, Model, ModelError, ScriptedModel, resolve_model
    from reactchat.orchestration.reflexion import Reflexion
    from reactchat.protocols.base import FormatError
    from reactchat.protocols.react import Action, FinalAnswer
    from reactchat.store import Store, resolve_store
    from reactchat.toolbox import ask_user, calculator
    from reactchat.tools import PauseForUser, RunContext, Tool, tool

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'reactchat' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
