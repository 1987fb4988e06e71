"""What runs one run of an agent over its ``Loop``: the ReAct loop itself, or the Reflexion
or plan-and-execute loop around it."""

from __future__ import annotations

from reactchat.engine.loop import Loop, Runner
from reactchat.engine.spec import AgentSpec, Mode
from reactchat.messages import Event
from reactchat.orchestration.plan_loop import PlanLoop
from reactchat.orchestration.trials import TrialLoop


def mode_of(agent: AgentSpec) -> Mode:
    """How a run of ``agent`` runs: a Reflexion loop of trials, a plan, or plain ReAct."""
    return "reflect" if agent.reflect is not None else "plan" if agent.plan else "react"


def runner(
    agent: AgentSpec,
    loop: Loop,
    question: str,
    history: list[tuple[str, str]],
    events: list[Event],
    mode: Mode | None = None,
) -> Runner:
    """What runs one run of ``agent`` over ``loop``, its stored ``events`` replayed (``mode``
    overrides the agent's own: a trial or a plan step's executor is planned or plain ReAct)."""
    mode = mode or mode_of(agent)
    if mode == "reflect" and agent.reflect is not None:
        return TrialLoop(agent, loop, question, agent.reflect)
    if mode == "plan":
        return PlanLoop(agent, loop, question, history)
    loop.replay(events)
    return loop


__all__ = ["mode_of", "runner"]
