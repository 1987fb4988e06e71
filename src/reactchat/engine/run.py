"""``Run``: one turn of one agent in one session, from a message to its ``RunResult``.

    Agent.run(message)      the sync wrapper: this thread's event loop runs ``arun``
      Agent.arun(message)   makes a ``Run`` and drains it
        Run (iterated)      locks the session, reads it, decides what the message is
          Loop.steps()      the ReAct loop (``reactchat.engine.loop``)

A run decides once what a message is (``_read``): the answer to the pending item the
sender saw, or a new turn; a turn a crash interrupted is finished first. It records
every event before yielding it, follows how its turn stands (``Outcome``, the same fold
the stored view uses) and leaves ``result`` set when the iteration ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from reactchat.engine import tokens
from reactchat.engine.budget import Budget, Spending
from reactchat.engine.build import CHARS_PER_TOKEN, make_loop, transcript
from reactchat.engine.compaction import Carried, carried
from reactchat.engine.images import kept_images
from reactchat.engine.loop import Loop, Runner, Runners
from reactchat.engine.output import Output
from reactchat.engine.session import Outcome, Pending, RunResult, SessionState, Turn
from reactchat.engine.spec import AgentSpec
from reactchat.errors import AlreadyAnswered, NothingToRun, SessionBusy, SessionNotFound, TurnFailed
from reactchat.messages import CompactionEvent, DeltaEvent, ErrorEvent, Event, ImagePart, UserEvent
from reactchat.store import Store
from reactchat.store._artifacts import safe_name

#: how many of the newest turns tell what a token of the history is for the model's tokenizer
HISTORY_SAMPLE = 8

#: a stretch of a run: the loop's events, the turn they belong to, how it stands, and
#: whether its final answer releases the turn's lock
Stretch = tuple[AsyncIterator[Event], Turn, Outcome, bool]


async def turn_events(store: Store, session: str) -> tuple[list[Event], int]:
    """What a new turn reads of its session before it starts (``Store.turn_events``), and how
    many of the session's events that read covers."""
    events = await store.turn_events(session)
    return events, events[-1].seq if events else 0


def after(compacted: CompactionEvent | None, events: AsyncIterator[Event], first: int = 0) -> AsyncIterator[Event]:
    """``events`` with the compaction made before the run started among them, in the order
    they were stored: after the ``first`` events (recorded before it), else first."""
    return events if compacted is None else _inserted(compacted, events, first)


async def _inserted(compacted: CompactionEvent, events: AsyncIterator[Event], first: int) -> AsyncIterator[Event]:
    async for event in events:
        if first == 0:
            yield compacted
        first -= 1
        yield event
    if first >= 0:  # a stretch with fewer events than came before the compaction
        yield compacted


class Run:
    """One turn of ``agent`` in ``session`` (a new session when None).

    ``message`` starts a turn, or answers the session's pending item (``reply_to``, the
    item's ``call_id``, makes sure it still waits); ``None`` only finishes an interrupted
    turn. Iterate the run for its events, each durable before it is yielded; with
    ``deltas=True`` a streaming model's text comes too, as ``DeltaEvent``s (or, without a
    task of its own, goes to ``on_delta(text)`` as it comes). ``result`` is set once the
    iteration ends with an answer or a pending item.
    """

    def __init__(
        self,
        agent: AgentSpec,
        runners: Runners,
        message: str | None,
        session: str | None = None,
        *,
        reply_to: str | None = None,
        deltas: bool = False,
        output: Output | None = None,
        on_delta: Callable[[str], Any] | None = None,
        budget: Budget | None = None,
        images: Sequence[ImagePart] = (),
    ) -> None:
        self.agent = agent
        #: what runs each run of the turn (``reactchat.orchestration.runners.runner``)
        self.runners = runners
        self.message = message
        #: the images sent with a message that starts a turn, named as the session will keep them
        self.images = tuple(
            i if i.name == safe_name(i.name) else i.model_copy(update={"name": safe_name(i.name)}) for i in images
        )
        self.session = session or ""
        self.reply_to = reply_to
        self.deltas = deltas
        #: what this turn's final answer must be, when not the agent's own ``output``
        self.output = output
        #: this turn's limits (the agent's own when None)
        self.budget = budget or agent.budget
        #: what the turn has spent of them, shared by every run of the stretch being run
        self._spending: Spending | None = None
        #: the path of the agent whose events this run records
        self.path = agent.name
        #: ``""`` for a turn's top-level run
        self.run_id = ""
        self.result: RunResult | None = None
        self._new = session is None
        self._on_delta = on_delta
        #: the session as ``_look`` read it before the lock, if it read it
        self._seen: SessionState | None = None
        #: how many of the session's events come before what the lock read reads (``_look``'s)
        self._since = 0
        #: the owner of the session's turn lock while this run holds it
        self._owner = ""
        #: the new turn's first event, recorded with the lock (``_opening``)
        self._opened: UserEvent | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._with_deltas() if self.deltas else self._events()

    # ------------------------------------------------------------------ the turn

    async def _events(self) -> AsyncIterator[Event]:
        store = self.agent.store
        seen = await self._look()
        owner = self._owner = os.urandom(16).hex()  # as unique as a uuid4's hex, made in a quarter of the time
        # under the lock: what came since that look (everything if there was none)
        since = None if self._new else 0 if seen is None else self._since
        opening = self._opening(seen)
        newer = await store.try_lock_read(self.session, owner, self.agent.lock_ttl, since, opening)
        if newer is None:
            raise SessionBusy(self.session)
        if opening and not newer:
            self._opened = opening[0]
        released = False
        try:
            state, pending = self._read(seen, newer)
            # one level of generators per event, not three: the plan yields each stretch
            # of the turn (a recovery, then the message), followed here event by event
            async for events, turn, outcome, releases in self._plan(state, pending):
                kept = list(turn.events)
                async for event in events:
                    kept.append(event)
                    outcome.add(event)
                    if outcome.answer is event:  # durable, not yet yielded: the turn is over
                        released = releases  # the lock ended in the answer's transaction
                        await self.agent.hooks.turn_ended(self.session, event)
                    yield event
                self._finish(turn, kept, outcome)
        finally:
            if not released:
                await store.unlock(self.session, owner)

    async def _look(self) -> list[Event] | None:
        """Before the lock: create the session, or pin the pending item the sender could see.

        A plain message answers the item its sender could see, if any. Pinning that view
        before taking the lock makes exactly one of several racing messages resume: the
        others find the item answered or the session moved on, instead of starting a
        stray turn whose question is really an answer.
        """
        store = self.agent.store
        if self._new:
            self.session = await store.create_session()
            return []
        if self.message is not None and self.reply_to is None:
            seen, self._since = await turn_events(store, self.session)
            self._seen = SessionState.from_events(self.session, seen)
            last = self._seen.last
            pending = last.pending if last else None
            self.reply_to = pending.call_id if pending else None
            return seen
        if not await store.exists(self.session):
            raise SessionNotFound(self.session)
        return None

    def _opening(self, seen: list[Event] | None) -> tuple[UserEvent, ...]:
        """The event that opens the new turn this message starts, when the look before the lock
        (``seen``) tells it does one: recorded with the lock, in its transaction, if the session
        is still as seen. None when the message answers a pending item, an interrupted turn
        comes first, or a plan or Reflexion loop runs the turn (they record their own)."""
        agent = self.agent
        if self.message is None or seen is None or self.reply_to is not None or agent.reflect or agent.plan:
            return ()
        last = self._seen.last if self._seen is not None else None
        if last is not None and last.status == "interrupted":
            return ()
        turn = last.index + 1 if last else 1
        opening = UserEvent(
            session=self.session, turn=turn, agent=self.path, run=self.run_id, text=self.message, images=self.images
        )
        return (opening,)

    def _read(self, seen: list[Event] | None, newer: list[Event]) -> tuple[SessionState, Pending | None]:
        """Under the lock: the session's state, and the pending item this message answers
        (``newer``: the events read once the lock was taken, after those ``seen`` before)."""
        if seen is None:
            events = newer
        else:  # only what was appended since that look: usually nothing
            if newer and self.reply_to is None:
                raise SessionBusy(self.session, changed=True)
            events = seen + newer
        # nothing new since the look: its state (its turns' outcomes already folded)
        state = self._seen if self._seen is not None and not newer else SessionState.from_events(self.session, events)
        pending = state.last.pending if state.last else None
        if self.reply_to is not None and (pending is None or pending.call_id != self.reply_to):
            raise AlreadyAnswered(self.session, self.reply_to)
        return state, pending

    async def _plan(self, state: SessionState, pending: Pending | None) -> AsyncIterator[Stretch]:
        """What this run does, stretch by stretch: finish an interrupted turn, then answer
        the pending item or start a new turn. Each stretch is the loop's events, the turn
        and how it stands; ``result`` is set once a stretch has been followed to its end."""
        last = state.last
        # an interrupted turn is finished first; a cancelled one only when asked (``resume``)
        if last is not None and (last.status == "interrupted" or (last.status == "cancelled" and self.message is None)):
            loop, releases, compacted = await self._loop(state, last, closing=self.message is None)
            outcome = last.outcome.copy()  # folded on in ``_events``
            yield after(compacted, loop.recover(self._mine(last))), last, outcome, releases
            if self.message is None or outcome.pending is not None:
                return  # a question the sender has not seen comes first; the message is not recorded
            state.turns[-1] = Turn(last.index, last.question, self.result.events if self.result else [], last.images)
            last = state.last
        if self.message is None:
            if self.result is None:
                raise NothingToRun(self.session)
            return
        if pending is not None and last is not None:
            loop, releases, compacted = await self._loop(state, last, closing=True)
            outcome = last.outcome.copy()  # folded on in ``_events``
            if pending.run == self.run_id and isinstance(loop, Loop):
                replies = loop.resume(pending, self.message)
            else:
                replies = self._answer_nested(loop, last, pending)
            yield after(compacted, replies), last, outcome, releases
        else:
            turn = Turn(last.index + 1 if last else 1, self.message, images=self.images)
            await kept_images(self.agent.store, self.session, self.images)
            skipped = await self.agent.hooks.message_arrived(self.session, self.message)
            loop, releases, compacted = await self._loop(state, turn, closing=True)
            if self._opened is not None:
                assert isinstance(loop, Loop) and self._opened.turn == turn.index  # as ``_opening`` foresaw
                # recorded with the lock, the message comes before the compaction made since
                events = loop.start(self.message, skipped, self._opened)
                yield after(compacted, events, 1), turn, Outcome(), releases
            elif isinstance(loop, Loop):
                yield after(compacted, loop.start(self.message, skipped, images=self.images)), turn, Outcome(), releases
            else:
                yield after(compacted, loop.start(self.message, skipped)), turn, Outcome(), releases

    async def _answer_nested(self, runner: Runner, turn: Turn, pending: Pending) -> AsyncIterator[Event]:
        """Reply to an item a nested run asked (a sub-agent, a plan step): the reply is stored
        in that run, then the turn resumes from the top, each open delegation continuing its
        nested run down to the one that asked, which takes the reply as its observation."""
        assert self.message is not None
        reply = UserEvent(
            session=self.session,
            turn=turn.index,
            step=pending.step,
            agent=pending.agent,
            run=pending.run,
            text=self.message,
        )
        await self.agent.store.append(reply)
        turn.events.append(reply)
        if self._spending is not None:
            self._spending.add(reply)
        yield reply
        async for event in runner.recover(self._mine(turn)):
            yield event

    def _finish(self, turn: Turn, kept: list[Event], outcome: Outcome) -> None:
        """Set ``result`` for a stretch followed to its end; ``TurnFailed`` if it has none."""
        self.result = RunResult.of(self.session, turn.index, kept, outcome)
        if self.result is None:
            error = next((e for e in reversed(kept) if isinstance(e, ErrorEvent) and not e.correction), None)
            raise TurnFailed(self.session, error.message if error else "it stopped without an answer")

    def _mine(self, turn: Turn) -> list[Event]:
        """This run's events among the turn's (a turn's events include its sub-agents')."""
        return [e for e in turn.events if e.run == self.run_id]

    async def _loop(
        self, state: SessionState, turn: Turn, closing: bool = False
    ) -> tuple[Runner, bool, CompactionEvent | None]:
        """The runner of this run for ``turn``, its stored events replayed, whether its final
        answer releases the turn's lock, and the compaction of earlier turns made for it (stored
        already, to be yielded with the run's events). A ``closing`` runner runs the run's last
        stretch: a plain ReAct loop's final answer then releases the lock in its own store
        transaction (a plan or Reflexion loop's answers need not be the last)."""
        agent = self.agent
        summary, history, compacted = await self._history(state, turn)
        releases = closing and agent.reflect is None and not agent.plan
        self._spending = Spending.of(self.budget, turn.events) if self.budget is not None else None
        loop = await make_loop(
            agent,
            state.session,
            turn.index,
            turn.question,
            history,
            images=turn.images,
            path=self.path,
            run=self.run_id,
            output=self.output,
            stored=turn.events,
            on_delta=self._on_delta,
            release=self._owner if releases else None,
            runners=self.runners,
            spending=self._spending,
            summary=summary,
        )
        runner = self.runners(agent, loop, turn.question, history, self._mine(turn))
        assert runner is loop or not releases  # only a plain ReAct loop's answer ends the turn
        return runner, releases, compacted

    async def _history(self, state: SessionState, turn: Turn) -> Carried:
        """What a run of ``turn`` carries of the turns before it: the newest that fit
        ``history_tokens`` or, with ``compact_at``, the latest summary and the turns after it
        (compacted first when the prompt would pass ``compact_at`` of the window)."""
        agent = self.agent
        await tokens.discover(agent.model)  # the first run of a remote model asks its server
        if agent.compact_at is None:
            newest = "".join(q + a for q, a in state.history(before=turn.index)[-HISTORY_SAMPLE:])
            budget = tokens.history_chars(agent.model, agent.history_tokens, agent.context_tokens, newest)
            return "", state.history(before=turn.index, budget=budget), None
        specs = [t.spec for t in agent.tools]

        def size(summary: str, history: list[tuple[str, str]]) -> int:
            return transcript(agent, specs, history, turn.question, summary=summary).size

        return await carried(agent, state, turn.index, turn.question, size)

    # ------------------------------------------------------------------ deltas

    async def _with_deltas(self) -> AsyncIterator[Event]:
        """The events, with a streaming model's text as ``DeltaEvent``s in between.

        The turn runs in a task of its own so that text can arrive while the loop waits
        on the model; both go through one queue, in order.
        """
        queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()

        def delta(text: str) -> None:
            queue.put_nowait(DeltaEvent(session=self.session, text=text, agent=self.path, run=self.run_id))

        async def pump() -> None:
            try:
                async for event in self._events():
                    queue.put_nowait(event)
            except BaseException as exc:  # handed to the reader, who raises it
                queue.put_nowait(exc)
            finally:
                queue.put_nowait(None)

        self._on_delta = delta
        task = asyncio.create_task(pump())
        why: tuple[Any, ...] = ()
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        except asyncio.CancelledError as stop:
            why = stop.args  # passed on: a server shutdown is not a user's cancel
            raise
        finally:
            if not task.done():
                task.cancel(*why)
                with contextlib.suppress(asyncio.CancelledError):
                    await task


__all__ = ["CHARS_PER_TOKEN", "Run"]
