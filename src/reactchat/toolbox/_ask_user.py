"""``ask_user``: the agent asks the user a question mid-reasoning and waits for the answer."""

from __future__ import annotations

from reactchat.tools import PauseForUser, tool


# idempotent: asking has no effect, so a question lost in a crash is simply asked again
@tool(return_direct=True, timeout=None, idempotent=True)
def ask_user(question: str) -> str:
    """Ask the user a question and wait for the answer. Use it when a fact only the user
    knows is missing (where they are, which account, what they prefer); never guess it.

    Args:
        question: the question to show the user, in the user's language
    """
    raise PauseForUser(question)
