"""What the engine reads of an agent (``AgentSpec``), and what other components plug into
its turns (``Hooks``).

``reactchat.Agent`` is the one implementation users make; the engine, the orchestration
loops and the knowledge base depend on this protocol instead, so that nothing below the
public surface imports ``agent.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from reactchat.engine.approval import Policy
from reactchat.engine.budget import Budget
from reactchat.engine.output import Output
from reactchat.messages import AnswerEvent, LinkSkippedEvent
from reactchat.models import Model
from reactchat.protocols.packs import PromptPack
from reactchat.store import Store
from reactchat.tools import Effect, Tool, Toolset
from reactchat.tools.threads import ToolThreads

if TYPE_CHECKING:  # a type only: orchestration sits above the engine
    from reactchat.orchestration.reflexion import Reflexion

#: how one run of an agent runs: a Reflexion loop of trials, a plan, or plain ReAct
Mode = Literal["reflect", "plan", "react"]

#: session_tools(session, store): tools added for one session at the start of each turn
SessionTools = Callable[[str, Store], Awaitable[Sequence[Tool]]]
#: on_turn_end(session, store, status): status is the final answer's (``done``, ``stopped``...)
TurnEnd = Callable[[str, Store, str], Awaitable[None]]
#: new_message(session, store, text): a message that starts a new turn, before the turn runs;
#: what it returns (the links of the message it could not read) is recorded after the message
NewMessage = Callable[[str, Store, str], Awaitable[Sequence[LinkSkippedEvent] | None]]
#: fork(original, new, store): a session was forked into ``new`` (its events are copied)
Fork = Callable[[str, str, Store], Awaitable[None]]
#: instructions(session, store, message): text added to the instructions of a run on ``message``
Instructions = Callable[[str, Store, str], Awaitable[str]]


@dataclass
class Hooks:
    """What other components plug into an agent's turns (``reactchat.knowledge.attach`` does).

    ``session_tools`` add tools per session at the start of each turn; ``turn_end`` run
    once a turn has its final answer, before the answer is yielded (the answer's store
    transaction may have released the turn's lock already). A turn paused on a
    question is not over: it ends once, when it answers. ``new_message`` hooks see a
    message that starts a new turn before the turn's tools are chosen (links in it are
    read this way: ``reactchat.toolbox.read_links_in_messages``, which returns the links
    it skipped, for the turn to record). ``fork`` hooks copy what
    a component keeps per session into a fork of it (the uploaded files). ``instructions``
    hooks add text to the instructions of each run (``reactchat.memory`` puts remembered
    facts there).
    """

    store: Callable[[], Store]
    session_tools: list[SessionTools] = field(default_factory=list)
    turn_end: list[TurnEnd] = field(default_factory=list)
    new_message: list[NewMessage] = field(default_factory=list)
    fork: list[Fork] = field(default_factory=list)
    instructions: list[Instructions] = field(default_factory=list)

    async def message_arrived(self, session: str, text: str) -> list[LinkSkippedEvent]:
        """Run the ``new_message`` hooks for a message that starts a turn: the links they
        skipped, to record in the turn after the message."""
        skipped: list[LinkSkippedEvent] = []
        for hook in self.new_message:
            skipped.extend(await hook(session, self.store(), text) or ())
        return skipped

    async def tools_for(self, session: str, store: Store) -> list[Tool]:
        """The tools every ``session_tools`` hook adds for ``session``."""
        tools: list[Tool] = []
        for hook in self.session_tools:
            tools.extend(await hook(session, store))
        return tools

    async def forked(self, original: str, new: str) -> None:
        """Run the ``fork`` hooks for a session ``original`` just forked into ``new``."""
        for hook in self.fork:
            await hook(original, new, self.store())

    async def instructions_for(self, session: str, store: Store, message: str) -> str:
        """What the ``instructions`` hooks add for a run of ``session`` on ``message``."""
        texts = [await hook(session, store, message) for hook in self.instructions]
        return "\n\n".join(t for t in texts if t)

    async def turn_ended(self, session: str, answer: AnswerEvent) -> None:
        """Run the ``turn_end`` hooks for a turn whose ``answer`` is durable."""
        for hook in self.turn_end:
            await hook(session, self.store(), answer.status)


class AgentSpec(Protocol):
    """An agent as the engine reads it: its model, store and tools, its protocol and prompts,
    its limits and the loops around its runs (``reactchat.Agent`` documents each)."""

    name: str
    description: str
    tools: list[Tool]
    toolsets: list[Toolset]
    protocol: Literal["react", "native"]
    pack: PromptPack
    system: str | None
    few_shot: bool | None
    max_steps: int
    max_observation_chars: int
    context_tokens: int
    #: tokens of earlier turns in a prompt; None: a share of the window (``engine.tokens``)
    history_tokens: int | None
    #: the share of the context window past which a prompt is compacted (None: never)
    compact_at: float | None
    max_repeats: int
    max_depth: int
    lock_ttl: float
    deps: Any
    services: dict[str, Any]
    approval: Policy | None
    #: effect classes that override the tools' own, by tool name
    effects: dict[str, Effect]
    in_doubt: Literal["ask", "tell_model"]
    #: limits on what one turn spends (None: none)
    budget: Budget | None
    parallel_tools: int
    output: Output | None
    threads: ToolThreads
    hooks: Hooks
    plan: bool
    max_replans: int
    max_plan_steps: int
    reflect: Reflexion | None

    @property
    def model(self) -> Model:
        """The model, resolved on first use."""
        ...

    @property
    def store(self) -> Store:
        """The store, opened on first use."""
        ...


__all__ = ["AgentSpec", "Fork", "Hooks", "Instructions", "Mode", "NewMessage", "SessionTools", "TurnEnd"]
