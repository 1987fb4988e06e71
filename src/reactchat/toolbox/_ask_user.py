"""``ask_user``: the agent asks the user a question mid-reasoning and waits for the answer."""

from __future__ import annotations

import re

from reactchat.tools import PauseForUser, RunContext, tool


# read: asking has no effect, so a question lost in a crash is simply asked again
@tool(return_direct=True, timeout=None, effect="read")
def ask_user(question: str, ctx: RunContext) -> str:
    """Ask the user a question and wait for the answer. Use it when a fact only the user
    knows is missing (where they are, which account, what they prefer); never guess it.

    Args:
        question: the question to show the user, in the user's language
    """
    if echoes(question, ctx.message):
        raise ValueError(
            f"{question!r} repeats the user's own message: they are waiting for you to answer it, "
            "not to hear it back. Answer it yourself (with the other tools if they help); ask the "
            "user only for a fact that only they know."
        )
    raise PauseForUser(question)


def echoes(question: str, message: str) -> bool:
    """Whether ``question`` repeats ``message``, whatever the case and punctuation: its
    words, in order, are all in it ("Who are you?" in "Hello! Who are you?"), or the message
    is a question of three words or more and it holds all of it ("What is 9 * 9? (in
    decimal)" for "What is 9 * 9?"; "Book a table" may be asked "Book a table for how many?")."""
    asked, said = _words(question), _words(message)
    if len(said) >= 3 and message.rstrip().endswith("?") and _holds(asked, said):
        return True
    return bool(asked) and _holds(said, asked)


def _holds(words: list[str], part: list[str]) -> bool:
    return f" {' '.join(part)} " in f" {' '.join(words)} "


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())
