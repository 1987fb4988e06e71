"""What both protocols share: the text ReAct protocol (``react``) and native tool calling
(``native``) each keep a ``Transcript`` of the turn and read each model reply into a
``Decision``; the loop (``loop``) drives either one through this interface alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from reactchat.errors import ReactchatError
from reactchat.messages import ImagePart, Reply, Request, ToolInput
from reactchat.protocols.packs import PromptPack

#: an observation shorter than this is never elided to fit the context budget
ELIDE_MIN_CHARS = 200


def elision_note(chars: int) -> str:
    """What replaces an observation elided to fit the context budget."""
    return f"[{chars} characters elided to fit the context budget]"


class FormatError(ReactchatError, ValueError):
    """The model's step does not follow the format; ``str(error)`` is the correction
    shown to the model, ``kind`` names the fault (``no_label``, ``no_input``, ``empty``...)."""

    def __init__(self, message: str, kind: str = "format") -> None:
        super().__init__(message)
        self.kind = kind


class Call(NamedTuple):
    """One tool call the model asked for. ``call_id`` is ``""`` when the protocol does not
    name calls (text ReAct, some servers) and the engine assigns one."""

    call_id: str
    tool: str
    input: ToolInput


class ToolResult(NamedTuple):
    """What one tool call gave: the observation text, whether it is an error, how many
    characters were cut from it to keep the context small, and the images it gave."""

    text: str
    is_error: bool = False
    cut: int = 0
    images: tuple[ImagePart, ...] = ()


class Decision(NamedTuple):
    """What the engine does after one model reply: run ``calls``, or finish with ``answer``.

    A named tuple, not a frozen dataclass: one is made per step, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` (1.5 against 0.8 µs)."""

    thought: str
    raw: str
    calls: Sequence[Call] = ()
    answer: str | None = None


class Transcript(Protocol):
    """What a protocol keeps for one turn: the prompt so far, and how to read a reply.

    ``size`` is the prompt's length in characters, computed from its content (for the
    context budget).
    """

    #: the words of the prompt, in its language
    pack: PromptPack

    @property
    def size(self) -> int:
        """Characters in the prompt."""
        ...

    @property
    def images(self) -> bool:
        """Whether a message of the prompt carries images (kept, not scanned for, on every step)."""
        ...

    def add_step(self, raw: str, thought: str, calls: Sequence[Call]) -> None:
        """Record what the model wrote for one step and the calls it made."""
        ...

    def add_observation(
        self, call_id: str, text: str, is_error: bool = False, images: tuple[ImagePart, ...] = ()
    ) -> None:
        """Record the observation of a call made in an earlier ``add_step``, with its images."""
        ...

    def add_correction(self, raw: str, correction: str) -> None:
        """Record a reply that could not be read and the correction sent back for it."""
        ...

    def elide_oldest(self) -> bool:
        """Replace the oldest long observation with ``elision_note``; False if none is left."""
        ...

    @property
    def steps(self) -> int:
        """Steps recorded so far (``add_step`` and ``add_correction``), summarised or not."""
        ...

    def steps_text(self, through: int) -> str:
        """What steps 1 to ``through`` say (a summary of the earliest ones in their place),
        for a summary of them; ``""`` when there is nothing new to summarise."""
        ...

    def fold(self, through: int, summary: str) -> bool:
        """Carry ``summary`` in place of steps 1 to ``through`` (a later step stays); False if not."""
        ...

    def request(self, final: bool = False) -> Request:
        """The request for the next step; ``final`` asks for the best answer now, without tools."""
        ...

    def read(self, reply: Reply) -> Decision:
        """Read a reply into the next decision; raises ``FormatError``."""
        ...

    def read_final(self, reply: Reply) -> str:
        """The answer from a reply to ``request(final=True)``."""
        ...


__all__ = ["ELIDE_MIN_CHARS", "Call", "Decision", "FormatError", "ToolResult", "Transcript", "elision_note"]
