"""Tool approval: a human decides before a call with side effects runs.

``@tool(approval=True)`` (or ``approval=lambda arguments: ...``, or the agent-wide
``Agent(approval=policy)`` with ``policy(tool_name, arguments)``) makes the run stop
before such a call, exactly like an ``ask_user`` question: the turn is ``waiting`` and
its pending item has ``kind="approval"``, the tool and its arguments. The reply decides:

* ``yes`` (or ``y``, ``ok``, ``approve``…) runs the call as it is;
* a JSON object runs it with those arguments instead (the user edited them);
* anything else refuses it: a reply starting with ``no`` gives the rest as the reason,
  and the reason is the model's observation.

Refusing is the default for a reply that is neither, so an unclear answer never runs
a side effect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Agent(approval=policy): policy(tool_name, arguments) -> whether the call needs approval
Policy = Callable[[str, dict[str, Any]], bool]

_YES = {
    "yes", "y", "ok", "okay", "approve", "approved", "allow", "go", "go ahead", "sure", "run it", "do it",
    "oui", "はい", "承認",
}  # fmt: skip
_NO = re.compile(r"^\s*(no|non|refuse|refused|deny|denied|reject|いいえ)\b[\s,.:;!-]*", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    """What a reply to an approval request decided."""

    approved: bool
    #: the arguments to run with (the original ones, or the user's edit)
    arguments: Any = None
    edited: bool = False
    reason: str = ""


def question(tool: str, arguments: Any, agent: str = "") -> str:
    """The approval request shown to the user (``agent``: the path of a sub-agent that asks)."""
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    who = f"The agent {agent}" if "/" in agent else "The agent"
    return (
        f"{who} wants to run {tool} with {shown}. Reply yes to run it, no and a reason to refuse, "
        "or a JSON object of arguments to run it with those instead."
    )


def is_yes(reply: str) -> bool:
    """Whether a reply says yes (``yes``, ``ok``, ``approve``, ``oui``…)."""
    return reply.strip().lower().rstrip(".!") in _YES


def decide(reply: str, arguments: Any) -> Verdict:
    """Read the user's reply to an approval request for a call with ``arguments``."""
    text = reply.strip()
    if is_yes(text):
        return Verdict(True, arguments)
    if text.startswith("{"):
        try:
            edited = json.loads(text)
        except json.JSONDecodeError:
            edited = None
        if isinstance(edited, dict):
            return Verdict(True, edited, edited=True)
    match = _NO.match(text)
    reason = text[match.end() :].strip() if match else text
    return Verdict(False, reason=reason)


#: the replies to a call in doubt that run it again, and that record it as not run
RETRY = {"retry", "run it again", "again", "rerun", "réessayer", "再試行"}
SKIP = {"skip", "don't run it", "do not run it", "passer", "スキップ"}


def in_doubt(tool: str, arguments: Any) -> str:
    """The question about a call a crash cut off before it returned."""
    shown = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return (
        f"The call {tool} with {shown} was interrupted before it returned, so whether it took effect "
        "is unknown. Reply retry to run it again, skip to record it as not run, or say what it did "
        "(that becomes its result)."
    )


def settled(reply: str) -> str:
    """What a reply to a call in doubt decided: ``retry``, ``skip`` or ``result`` (the reply is it)."""
    text = reply.strip().lower().rstrip(".!")
    return "retry" if text in RETRY else "skip" if text in SKIP else "result"


#: the observation of a call in doubt that the user chose not to run again
SKIPPED = "This call was interrupted by a crash and the user chose not to run it again: treat it as not run."


def either(first: Policy | None, second: Policy | None) -> Policy | None:
    """A policy that asks when either does: an agent's own, and the one of the agents above it."""
    if first is None or second is None:
        return first or second
    return lambda tool, arguments: first(tool, arguments) or second(tool, arguments)


def refusal(verdict: Verdict) -> str:
    """The observation of a refused call."""
    because = f": {verdict.reason}" if verdict.reason else ""
    return f"The user refused this call{because}. Do not retry it unchanged; adapt or ask the user."


def edited_note(arguments: Any) -> str:
    """What precedes the observation of a call the user edited."""
    return f"The user changed the arguments to {json.dumps(arguments, ensure_ascii=False)} before it ran. "
