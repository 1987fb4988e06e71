"""A ``Loop`` for one run of an agent, made whole: its tools (the agent's, the session's,
the toolsets'), the transcript of the agent's protocol, its limits and where it records."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from reactchat.engine import tokens
from reactchat.engine.approval import Policy, either
from reactchat.engine.budget import Spending, check_priced
from reactchat.engine.forks import ForkLookup
from reactchat.engine.guards import RepeatGuard
from reactchat.engine.loop import Loop, Runners
from reactchat.engine.output import Output
from reactchat.engine.spec import AgentSpec
from reactchat.messages import Event, ImagePart, ToolSpec
from reactchat.protocols.base import Transcript
from reactchat.protocols.native import SYSTEM, NativeTranscript
from reactchat.protocols.react import ReactTranscript
from reactchat.store import Store
from reactchat.tools import Effect, Tool, toolset_tools

#: characters per token, for budgets given in tokens (a rough, model-agnostic estimate)
CHARS_PER_TOKEN = 4


def transcript(
    agent: AgentSpec,
    tools: list[ToolSpec],
    history: list[tuple[str, str]],
    question: str,
    system: str | None = None,
    output: Output | None = None,
    summary: str = "",
    notes: str = "",
    images: tuple[ImagePart, ...] = (),
) -> Transcript:
    """A new transcript of ``agent``'s protocol for one run (``system`` replaces the agent's;
    a typed answer's schema and the hooks' ``notes`` are added to it; ``summary`` is that of
    the turns before ``history``)."""
    system = system if system is not None else agent.system
    output = output or agent.output
    typed = output.instructions() if output is not None else None
    if agent.protocol == "native":
        native = "\n\n".join(filter(None, [system or SYSTEM, typed, notes]))
        return NativeTranscript(agent.pack, tools, history, question, native, summary, images)
    few_shot = agent.few_shot if agent.few_shot is not None else getattr(agent.model, "few_shot", False)
    instructions = "\n\n".join(filter(None, [system, typed, notes])) or None
    return ReactTranscript(agent.pack, tools, history, question, instructions, few_shot, summary, images)


async def make_loop(
    agent: AgentSpec,
    session: str,
    turn: int,
    question: str,
    history: list[tuple[str, str]],
    *,
    images: tuple[ImagePart, ...] = (),
    path: str,
    runners: Runners,
    run: str = "",
    system: str | None = None,
    store: Store | None = None,
    output: Output | None = None,
    stored: list[Event] | None = None,
    on_delta: Callable[[str], Any] | None = None,
    release: str | None = None,
    max_depth: int | None = None,
    spending: Spending | None = None,
    approval_above: Policy | None = None,
    summary: str = "",
) -> Loop:
    """The ReAct loop of ``agent`` for one run (not replayed: see ``Loop.replay``).

    A nested run passes its parent's ``store`` (the session lives there, not in the
    sub-agent's) and ``max_depth``; ``output`` types this run's final answer instead of the
    agent's ``output_type``; ``stored`` is the turn's own list of events, every run's (what
    the run appends to it later, a nested run sees); ``release`` is the owner of the turn's
    lock when this run's final answer ends the turn (the lock then ends in the answer's own
    store transaction); ``runners`` pick what runs the nested runs it starts; ``spending`` is
    what the turn has spent of its budget, shared by every run of the turn; ``approval_above``
    is the approval policy of the agents above a nested run (it applies beneath them too);
    ``summary`` is the compaction of the turns before ``history``; ``images`` were sent with
    the question.
    """
    store = store or agent.store
    output = output or agent.output
    tools = [*agent.tools, *await agent.hooks.tools_for(session, store)]
    if agent.toolsets:
        tools.extend(await toolset_tools(agent.toolsets, {t.name for t in tools}))
    if agent.effects:
        tools = [with_effect(t, agent.effects[t.name]) if t.name in agent.effects else t for t in tools]
    model = agent.model
    await tokens.discover(model)  # a sub-agent's model may not have been asked yet
    check_priced(spending.budget if spending is not None else None, model.name)
    notes = await agent.hooks.instructions_for(session, store, question)
    window = min(agent.context_tokens, model.context_tokens or agent.context_tokens)
    context = int(window * tokens.chars_per_token(model))  # the loop keeps its budget in characters
    return Loop(
        session=session,
        turn=turn,
        model=model,
        store=store,
        tools={t.name: t for t in tools},
        transcript=transcript(
            agent, [t.spec for t in tools], history, question, system, output, summary, notes, images
        ),
        max_steps=agent.max_steps,
        max_observation=agent.max_observation_chars,
        context_chars=context,
        repeats=RepeatGuard(agent.max_repeats),
        runners=runners,
        forks=ForkLookup(store, session, path),
        agent=path,
        run=run,
        deps=agent.deps,
        services=agent.services,
        threads=agent.threads,
        on_delta=on_delta,
        approval=either(agent.approval, approval_above),
        stored=[] if stored is None else stored,
        max_depth=agent.max_depth if max_depth is None else max_depth,
        output=output,
        message=question,
        release=release,
        in_doubt=agent.in_doubt,
        parallel_tools=agent.parallel_tools,
        spending=spending,
        compact_at=agent.compact_at,
    )


def with_effect(tool: Tool, effect: Effect) -> Tool:
    """A copy of ``tool`` whose calls have the effect class ``effect`` (``Agent(effects=...)``)."""
    copied = copy.copy(tool)
    copied.effect = effect
    return copied


__all__ = ["CHARS_PER_TOKEN", "make_loop", "transcript"]
