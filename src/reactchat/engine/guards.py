"""Guards that keep a run bounded: truncation, repeated actions, tool-name hints."""

from __future__ import annotations

import difflib
import json
from typing import Any

#: the observation limit when neither the tool nor the agent sets one
DEFAULT_MAX_OBSERVATION = 4000
#: arguments as canonical JSON (one encoder: ``json.dumps`` with options makes one per call)
_CANONICAL = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False)


def truncate(text: str, limit: int) -> tuple[str, int]:
    """Keep the head and the tail of a long observation, with a note of what was cut.

    Returns the text to show and the number of characters cut.
    """
    if len(text) <= limit:
        return text, 0
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    note = f"\n[... {cut:,} characters cut: the output was too long; ask for a narrower result ...]\n"
    return text[:head] + note + text[len(text) - tail :], cut


def unknown_tool(name: str, tool_names: list[str]) -> str:
    """The observation for a tool that does not exist: the tools, and the nearest name."""
    message = f"There is no tool named {name!r}. The tools are: {', '.join(tool_names)}."
    close = difflib.get_close_matches(name, tool_names, n=1, cutoff=0.5) or difflib.get_close_matches(
        name.lower(), [t.lower() for t in tool_names], n=1, cutoff=0.5
    )
    if close:
        nearest = next(t for t in tool_names if t.lower() == close[0].lower())
        message += f" Did you mean {nearest!r}?"
    return message


class RepeatGuard:
    """Refuses to run the same tool with the same arguments twice in one turn.

    A call of a ``read`` tool is the same call only until a call with an effect (an
    ``idempotent`` or ``unsafe`` tool) has run since: what it read may have changed, so it
    runs again instead of being answered with its earlier, stale result.
    """

    def __init__(self, max_repeats: int) -> None:
        self.max_repeats = max_repeats
        self.repeats = 0
        #: each call made: its result, and whether its tool only reads
        self._seen: dict[tuple[str, str], tuple[str, bool]] = {}

    @staticmethod
    def key(tool: str, arguments: dict[str, Any] | str) -> tuple[str, str]:
        """A canonical identity for a call (raw text when the arguments did not validate)."""
        if isinstance(arguments, str):
            return tool, arguments.strip()
        return tool, _CANONICAL.encode(arguments)

    def previous(self, key: tuple[str, str]) -> str | None:
        """The earlier result of this exact call (see ``key``), if it was made."""
        seen = self._seen.get(key)
        return None if seen is None else seen[0]

    def remember(self, key: tuple[str, str], observation: str, effect: str = "unsafe") -> None:
        """Record a finished call of a tool of ``effect``; one with an effect makes the
        calls that only read before it new again."""
        if effect != "read":
            self._seen = {known: seen for known, seen in self._seen.items() if not seen[1]}
        self._seen[key] = (observation, effect == "read")

    def refuse(self, tool: str, previous: str) -> str:
        """Count a repeat and return the observation that replaces the call."""
        self.repeats += 1
        shown, _ = truncate(previous, 500)
        return (
            f"You already called {tool} with exactly these arguments in this turn; it was not run "
            f"again. Its result was:\n{shown}\nUse that result, change the arguments, or give the "
            "final answer."
        )

    @property
    def exhausted(self) -> bool:
        """The model keeps repeating itself: the run should stop."""
        return self.repeats >= self.max_repeats
