"""What a run in a forked session knows of its original: the calls recorded there after the
fork point, to reuse what is safe and to ask before repeating an effect.

A fork (``Agent.fork``) copies a session's events before a seq; the original's later events
are what happened next there. In the fork, a call of a tool with no side effect (``read``,
``idempotent``) with the same arguments as one of those calls is given its recorded
observation instead of running again, unless the tool is ``volatile`` (its result changes
over time); a call of an ``unsafe`` tool with the same arguments waits for a human's
approval, since its effect already happened once, in the original. A call that asked the
user (a question, an approval) is not reused: its observation is the user's word, and the
user of the fork may answer otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from reactchat.errors import SessionNotFound
from reactchat.messages import ActionEvent, Event, ObservationEvent, QuestionEvent, ToolInput
from reactchat.store import Store
from reactchat.tools import Tool, ToolInputError

#: a call of the original: its (validated when it can be) arguments and, when it may be
#: reused, its observation
_Recorded = tuple[ToolInput, str | None]


def has_no_effect(tool: Tool) -> bool:
    """Whether running ``tool`` again changes nothing (``read`` or ``idempotent``): the one
    place that reads a tool's effect class for forks."""
    return tool.effect in ("read", "idempotent")


class ForkMemory:
    """The calls of one agent (its path, ``agent``) whose observation the original session
    recorded at or after the fork point ``before`` (``original``: its events; a call cut by
    the fork has its action before that point and its observation after)."""

    def __init__(self, original: list[Event], before: int, agent: str) -> None:
        actions = {(e.run, e.call_id): e for e in original if isinstance(e, ActionEvent) and e.agent == agent}
        asked = {(e.run, e.call_id) for e in original if isinstance(e, QuestionEvent)}
        self._calls: dict[str, list[_Recorded]] = {}
        #: calls started before the fork point whose observation the original recorded after it
        self._cut: set[tuple[str, str]] = set()
        for event in original:
            if event.seq < before or not isinstance(event, ObservationEvent):
                continue
            action = actions.get((event.run, event.call_id))
            if action is None:
                continue
            if action.seq < before:
                self._cut.add((event.run, event.call_id))
            usable = not (event.is_error or event.interrupted or (event.run, event.call_id) in asked)
            self._calls.setdefault(action.tool, []).append((action.input, event.text if usable else None))

    @classmethod
    async def of(cls, store: Store, session: str, agent: str) -> ForkMemory | None:
        """The memory of ``agent``'s calls in ``session``'s original, when ``session`` is a fork
        whose original still exists; None otherwise."""
        origin = await store.origin(session)
        if origin is None:
            return None
        original, before = origin
        try:
            events = await store.events(original)
        except SessionNotFound:  # deleted since: nothing to reuse, nothing to repeat
            return None
        return cls(events, before, agent)

    def reused(self, tool: Tool, arguments: dict[str, Any]) -> str | None:
        """The recorded observation of the same call in the original, when ``tool`` may be
        given it instead of running (no side effect, not volatile); None otherwise."""
        if not has_no_effect(tool) or tool.volatile:
            return None
        return next((text for given, text in self._same(tool, arguments) if text is not None), None)

    def must_approve(self, tool: Tool, arguments: dict[str, Any]) -> bool:
        """Whether a human must approve this call first: ``tool`` has an effect and the
        original made the same call after the fork point."""
        return not has_no_effect(tool) and any(True for _ in self._same(tool, arguments))

    def cut(self, run: str, call_id: str) -> bool:
        """Whether the fork cut this call off: started before the fork point, observed in the
        original after it. In the fork it never ran, so it is not in doubt: it is made again."""
        return (run, call_id) in self._cut

    def _same(self, tool: Tool, arguments: dict[str, Any]) -> list[_Recorded]:
        """The original's calls of ``tool`` whose arguments, validated as the tool reads them,
        are ``arguments``."""
        found = []
        for given, text in self._calls.get(tool.name, ()):
            value: ToolInput | dict[str, Any] = given
            with contextlib.suppress(ToolInputError):
                value = tool.validate(given)
            if value == arguments:
                found.append((given, text))
        return found


class ForkLookup:
    """A run's ``ForkMemory``, read from the store on first use: a run that calls no tool
    reads nothing, and a session that is no fork costs one look at its origin per run."""

    def __init__(self, store: Store, session: str, agent: str) -> None:
        self.store = store
        self.session = session
        self.agent = agent
        self._memory: ForkMemory | None = None
        #: the calls of one reply run at once: the first reads, the others wait for it
        self._reading = asyncio.Lock()

    async def memory(self) -> ForkMemory:
        """The memory, read once (empty when the session is no fork)."""
        async with self._reading:
            if self._memory is None:
                found = await ForkMemory.of(self.store, self.session, self.agent)
                self._memory = found or ForkMemory([], 0, self.agent)
        return self._memory


__all__ = ["ForkLookup", "ForkMemory", "has_no_effect"]
