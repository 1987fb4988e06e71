"""Compaction: what a long conversation's prompts carry instead of forgetting.

When a prompt would pass ``compact_at`` of the model's context window, one model call
summarises the oldest turns not yet summarised (``compact_turns``, before a run starts)
or, inside one long run, its oldest steps (``compact_steps``, before a model call). The
summary is a stored ``CompactionEvent``, appended only once it is made: a crash during
the call leaves the session as it was. A failed or oversize summary is not an error: the
prompt falls back to dropping the oldest turns or eliding old observations, with a
warning in the log. Nothing is deleted from the store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from reactchat.engine import tokens
from reactchat.engine.recall import RECALL_SHARE, recalled
from reactchat.engine.session import SessionState
from reactchat.engine.spec import AgentSpec
from reactchat.engine.usage import measured
from reactchat.messages import CompactionEvent, Request, SystemMessage, Usage, UserMessage
from reactchat.models import Model
from reactchat.protocols.formats import strip_reasoning
from reactchat.protocols.packs import PromptPack

if TYPE_CHECKING:  # the loop imports this module to compact its steps
    from reactchat.engine.loop import Loop

log = logging.getLogger(__name__)

#: after a compaction, the turns kept whole take at most this share of the threshold
KEEP_SHARE = 0.5
#: a summary may take at most this share of the threshold; a longer one is refused
SUMMARY_SHARE = 0.25
#: the newest steps of a run are never summarised
KEEP_STEPS = 2

#: an answered turn: its index, question and answer
Answered = tuple[int, str, str]
#: what a run of a turn carries: the summary of the turns before, the turns after it, and
#: the compaction made for this run (stored already), if one was
Carried = tuple[str, list[tuple[str, str]], CompactionEvent | None]


def count(model: Model, text: str) -> int:
    """Tokens of ``text`` for ``model`` (``reactchat.engine.tokens.count``: its own tokenizer,
    else the ratio its server's usage taught)."""
    return tokens.count(model, text)


def window(agent: AgentSpec) -> int:
    """The context window, in tokens, that ``compact_at`` is a share of."""
    return min(agent.context_tokens, agent.model.context_tokens or agent.context_tokens)


async def summarise(model: Model, pack: PromptPack, previous: str, text: str, limit: int) -> CompactionEvent | None:
    """One model call: ``previous`` (the summary so far) and ``text`` in one summary of at
    most ``limit`` tokens, as an event not yet placed; None when the call fails or the
    summary is empty or too long (the caller falls back to dropping)."""
    request = Request.built(
        [
            SystemMessage(content=pack.summary_system),
            UserMessage(content=pack.summary_request.format(summary=previous or "-", conversation=text)),
        ],
        max_tokens=limit,
    )
    started = time.perf_counter()
    try:
        reply = await model.complete(request)
    except Exception as error:  # any failure of the call: compaction is never what breaks a turn
        log.warning("compaction failed, dropping the oldest context instead: %s: %s", type(error).__name__, error)
        return None
    summary = strip_reasoning(reply.text).strip()
    if not summary or count(model, summary) > limit:
        log.warning("compaction refused a summary of %d characters, dropping the oldest context instead", len(summary))
        return None
    usage: Usage = measured(model.name, request, reply)
    return CompactionEvent(summary=summary, seconds=time.perf_counter() - started, usage=usage)


async def carried(
    agent: AgentSpec, state: SessionState, turn: int, question: str, size: Callable[[str, list[tuple[str, str]]], int]
) -> Carried:
    """The summary and the turns a run of ``turn`` carries in its prompt, compacting first
    when the prompt (``size(summary, history)``, in characters) would pass ``compact_at``.
    The summary comes with the earlier turns not carried whole that best match ``question``
    (``reactchat.engine.recall``)."""
    assert agent.compact_at is not None
    threshold = int(agent.compact_at * window(agent))
    latest = state.compaction(turn)
    summary, after = (latest.summary, latest.through_turn) if latest else ("", 0)
    turns = state.answered(before=turn, after=after)
    history = [(q, a) for _, q, a in turns]
    # the prompt's size is in characters: the threshold too, at what a token of this text is
    per_token = tokens.chars_per_token(agent.model, summary + "".join(q + a for q, a in history))
    limit = int(threshold * per_token)
    prompt = size(summary, history)
    room = int(limit * RECALL_SHARE)
    # once a summary covers earlier turns, their recalled share is kept free: a prompt just
    # under the threshold would otherwise leave the recalled turns no room at all
    reserved = room if latest else 0
    if prompt + reserved <= limit:
        return (
            with_recalled(agent.pack, state, turn, question, summary, turns, min(room, limit - prompt)),
            history,
            None,
        )
    others = prompt - len(summary) - sum(len(q) + len(a) for q, a in history)
    keep = max(0, int(limit * KEEP_SHARE) - others)
    kept = state.answered(before=turn, after=after, budget=keep)
    if len(kept) == len(turns):  # the rest of the prompt is what is too long: summarise one turn
        kept = kept[1:]
    through = kept[0][0] - 1 if kept else turns[-1][0] if turns else after
    event = await compact_turns(agent, state, turn, through, threshold)
    if event is None:
        budget = max(0, limit - others - len(summary) - room)
        dropped = state.answered(before=turn, after=after, budget=budget)
        shown = with_recalled(agent.pack, state, turn, question, summary, dropped, room)
        return shown, [(q, a) for _, q, a in dropped], None
    after_summary = state.answered(before=turn, after=through)
    shown = with_recalled(agent.pack, state, turn, question, event.summary, after_summary, room)
    return shown, [(q, a) for _, q, a in after_summary], event


def with_recalled(
    pack: PromptPack, state: SessionState, turn: int, question: str, summary: str, carried: list[Answered], room: int
) -> str:
    """``summary`` as a prompt carries it: followed by the earlier turns that are not
    ``carried`` whole and best match ``question``, within ``room`` characters."""
    first = carried[0][0] if carried else turn
    earlier = [(q, a) for _, q, a in state.answered(before=first)]
    found = recalled(question, earlier, room) if earlier and room > 0 else []
    if not found:
        return summary
    lines = "\n".join(f"{pack.user}: {q}\n{pack.assistant}: {a}" for q, a in found)
    return "\n\n".join(filter(None, [summary, f"{pack.recalled_header}\n{lines}"]))


async def compact_turns(
    agent: AgentSpec, state: SessionState, turn: int, through: int, threshold: int | None = None
) -> CompactionEvent | None:
    """Summarise the turns after the latest summary up to ``through`` into an event of turn
    ``turn``, stored; None when there is nothing new to summarise or the summary failed."""
    latest = state.compaction(turn + 1)
    previous, after = (latest.summary, latest.through_turn) if latest else ("", 0)
    turns = state.answered(before=through + 1, after=after)
    if not turns:
        return None
    pack = agent.pack
    text = "\n".join(f"{pack.user}: {question}\n{pack.assistant}: {answer}" for _, question, answer in turns)
    limit = int((threshold or window(agent)) * SUMMARY_SHARE)
    made = await summarise(agent.model, pack, previous, text, limit)
    if made is None:
        return None
    event = made.model_copy(
        update={"session": state.session, "turn": turn, "agent": agent.name, "through_turn": turns[-1][0]}
    )
    await agent.store.append(event)
    return event


def steps_due(loop: Loop) -> int:
    """The last step to summarise before the run's next model call: all but the
    ``KEEP_STEPS`` newest (whose calls are answered: the loop asks only before a model
    call) once the transcript passes ``compact_at`` of the context; 0 when none is due."""
    transcript = loop.transcript
    if loop.compact_at is None or transcript.size <= loop.compact_at * loop.context_chars:
        return 0
    through = transcript.steps - KEEP_STEPS
    return through if transcript.steps_text(through) else 0


async def compact_steps(loop: Loop, through: int) -> CompactionEvent | None:
    """Summarise steps 1 to ``through`` of a run into a recorded event; the transcript then
    carries it in their place. None when the summary failed (old observations are then
    elided, as without compaction)."""
    transcript = loop.transcript
    text = transcript.steps_text(through)
    limit = int(loop.context_chars / tokens.chars_per_token(loop.model) * SUMMARY_SHARE)
    made = await summarise(loop.model, transcript.pack, "", text, limit)
    if made is None or not transcript.fold(through, made.summary):
        return None
    event = made.model_copy(update={"covers": "steps", "through_turn": loop.turn, "through_step": through})
    await loop.emit(event)
    return event


__all__ = ["KEEP_STEPS", "carried", "compact_steps", "compact_turns", "count", "steps_due", "summarise", "window"]
