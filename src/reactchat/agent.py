"""``Agent``: the public entry point. One async core (``stream``), one sync wrapper (``run``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal

from reactchat.errors import AlreadyAnswered, InsideEventLoop, SessionBusy, SessionNotFound
from reactchat.guards import DEFAULT_MAX_OBSERVATION, RepeatGuard
from reactchat.loop import TurnRun, replay
from reactchat.messages import AnswerEvent, ErrorEvent, Event, QuestionEvent, UserEvent
from reactchat.models import Model, resolve_model
from reactchat.packs import PromptPack, get_pack
from reactchat.session import RunResult, SessionState, Turn, steps_of
from reactchat.store import Store, resolve_store
from reactchat.tools import Tool, Toolset, as_tool, toolset_tools

#: characters per token, for budgets given in tokens (a rough, model-agnostic estimate)
CHARS_PER_TOKEN = 4

SessionTools = Callable[[str, Store], Awaitable[Sequence[Tool]]]
#: on_turn_end(session, store, status): status is the final answer's, "done" or "stopped"
TurnEnd = Callable[[str, Store, str], Awaitable[None]]


class Agent:
    """An LLM agent that reasons and acts with tools inside a multi-turn chat.

    ``model`` is a ``Model`` or a spec string (``local``, ``local:/path.gguf``,
    ``openai:MODEL``, ``anthropic:MODEL``, ``scripted:FILE``); ``store`` a ``Store`` or a
    URL (``memory:``, ``sqlite:///path.db``, ``postgresql://...``). Nothing is loaded or
    opened until the first run.

    ``session_tools(session, store)`` adds tools per session at the start of each turn;
    ``services`` reach tools as ``RunContext.services``; ``on_turn_end(session, store,
    status)`` runs once a turn has its final answer (``done`` or ``stopped``), before the
    answer is yielded. A turn paused on an ask_user question is not over: it counts once,
    when it answers. ``reactchat.knowledge.attach(agent)`` uses these for uploaded files.
    """

    def __init__(
        self,
        model: str | Model = "local",
        tools: Iterable[Tool | Toolset | Callable[..., Any]] = (),
        *,
        protocol: Literal["react", "native"] = "react",
        max_steps: int = 10,
        store: str | Store = "memory:",
        language: str | PromptPack = "en",
        system: str | None = None,
        ask_user: bool = True,
        max_observation_chars: int = DEFAULT_MAX_OBSERVATION,
        context_tokens: int = 16_000,
        history_tokens: int = 2_000,
        max_repeats: int = 3,
        deps: Any = None,
        session_tools: SessionTools | None = None,
        on_turn_end: TurnEnd | None = None,
        services: dict[str, Any] | None = None,
        lock_ttl: float = 600.0,
    ) -> None:
        if protocol not in ("react", "native"):
            raise ValueError(f"protocol must be 'react' or 'native', not {protocol!r}")
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self._model_spec = model
        self._model: Model | None = None if isinstance(model, str) else model
        self._store_spec = store
        self._store: Store | None = None if isinstance(store, str) else store
        given = list(tools)
        #: sources of tools listed at each turn (MCP servers)
        self.toolsets = [t for t in given if isinstance(t, Toolset)]
        self.tools = [as_tool(t) for t in given if not isinstance(t, Toolset)]
        if ask_user and not any(t.name == "ask_user" for t in self.tools):
            from reactchat.toolbox import ask_user as ask_user_tool

            self.tools.append(ask_user_tool)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"two tools share a name: {sorted(n for n in names if names.count(n) > 1)}")
        self.protocol = protocol
        self.max_steps = max_steps
        self.pack = get_pack(language)
        self.system = system
        self.max_observation_chars = max_observation_chars
        self.context_tokens = context_tokens
        self.history_tokens = history_tokens
        self.max_repeats = max_repeats
        self.deps = deps
        self.session_tools = session_tools
        self.on_turn_end = on_turn_end
        self.services: dict[str, Any] = dict(services or {})
        self.lock_ttl = lock_ttl

    @property
    def model(self) -> Model:
        """The model, resolved from its spec on first use."""
        if self._model is None:
            self._model = resolve_model(self._model_spec)
        return self._model

    @property
    def store(self) -> Store:
        """The store, opened from its URL on first use."""
        if self._store is None:
            self._store = resolve_store(self._store_spec)
        return self._store

    # ------------------------------------------------------------------ running

    def run(self, message: str, session: str | None = None, *, reply_to: str | None = None) -> RunResult:
        """Run one turn synchronously (``asyncio.run`` of ``arun``)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise InsideEventLoop()
        results: list[RunResult] = []

        async def main() -> None:
            # The main task returns None: on Python 3.11 asyncio.run's SIGINT bookkeeping
            # formats repr(main task), which would include the whole RunResult (every
            # event of the turn), an O(steps) cost on every run.
            results.append(await self.arun(message, session, reply_to=reply_to))

        asyncio.run(main())
        return results[0]

    async def arun(
        self,
        message: str | None,
        session: str | None = None,
        *,
        reply_to: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> RunResult:
        """Run one turn and return its result (see ``stream``); ``on_event`` sees each event."""
        turn: list[Event] = []
        session_id = ""
        async for event in self._stream(message, session, reply_to, turn):
            session_id = event.session
            if on_event is not None:
                on_event(event)
        if not turn:
            raise RuntimeError("nothing to run: the session has no open turn and no message was given")
        return _result(session_id or turn[0].session, turn)

    async def resume(self, session: str) -> RunResult:
        """Continue a turn that was interrupted (a crash, a model error)."""
        return await self.arun(None, session)

    async def stream(
        self, message: str | None, session: str | None = None, *, reply_to: str | None = None
    ) -> AsyncIterator[Event]:
        """Run one turn, yielding each event once it is durable.

        ``session=None`` starts a new session. If the session waits on an ask_user
        question, ``message`` is the answer and the turn resumes where it stopped
        (``reply_to``, the question's ``call_id``, makes sure it still waits). A turn
        interrupted by a crash is finished first. Raises ``SessionBusy`` while another
        turn of the session runs, ``SessionNotFound`` for an unknown id.
        """
        async for event in self._stream(message, session, reply_to, []):
            yield event

    async def state(self, session: str) -> SessionState:
        """The session's turns, from its stored events."""
        return SessionState.from_events(session, await self.store.events(session))

    async def _stream(
        self, message: str | None, session: str | None, reply_to: str | None, turn_events: list[Event]
    ) -> AsyncIterator[Event]:
        store = self.store
        seen: list[Event] | None = None
        if session is None:
            session = await store.create_session()
        elif message is not None and reply_to is None:
            # A plain message answers the question its sender could see, if any. Pin that view
            # before taking the lock so that, of several racing messages, exactly one resumes:
            # the others find the question answered or the session moved on, instead of
            # starting a stray turn whose question is really an answer.
            seen = await self._events(session)
            seen_last = SessionState.from_events(session, seen).last
            seen_pending = seen_last.pending if seen_last else None
            reply_to = seen_pending[0].call_id if seen_pending else None
        elif not await store.exists(session):
            raise SessionNotFound(session)
        owner = uuid.uuid4().hex
        if not await store.try_lock(session, owner, self.lock_ttl):
            raise SessionBusy(session)
        try:
            state = await self._locked_state(session, seen, reply_to)
            last = state.last
            if last is not None and last.status == "interrupted":
                asked = False
                async for event in self._recover(state, last, turn_events):
                    asked = asked or isinstance(event, QuestionEvent)
                    yield event
                if message is None or asked:
                    return  # a question the sender has not seen comes first; the message is not recorded
                state = SessionState.from_events(session, await store.events(session))
                turn_events.clear()
            if message is not None:
                async for event in self._answer(state, message, turn_events):
                    yield event
        finally:
            await store.unlock(session, owner)

    async def _events(self, session: str) -> list[Event]:
        try:
            return await self.store.events(session)
        except SessionNotFound:
            raise SessionNotFound(session) from None

    async def _locked_state(self, session: str, seen: list[Event] | None, reply_to: str | None) -> SessionState:
        """The session's state once its lock is held, checking that ``reply_to`` still waits."""
        if seen is None:
            events = await self.store.events(session)
        else:  # only what was appended since that look: usually nothing
            newer = await self.store.events(session, since=len(seen))
            if newer and reply_to is None:
                raise SessionBusy(session, changed=True)
            events = seen + newer
        state = SessionState.from_events(session, events)
        pending = state.last.pending if state.last else None
        if reply_to is not None and (pending is None or pending[0].call_id != reply_to):
            raise AlreadyAnswered(session, reply_to)
        return state

    async def _recover(self, state: SessionState, turn: Turn, turn_events: list[Event]) -> AsyncIterator[Event]:
        """Finish a turn a crash or a model error interrupted, from its last durable event."""
        run = await self._prepare(state, turn, turn_events)
        asked = False
        async for event in run.finish_interrupted(turn.events):
            asked = asked or isinstance(event, QuestionEvent)
            yield _collect(turn_events, event)
        if not asked:  # else the turn waits for the user, like any ask_user step
            async for event in self._run(run, turn_events):
                yield event

    async def _answer(self, state: SessionState, message: str, turn_events: list[Event]) -> AsyncIterator[Event]:
        """Start a turn with ``message``, or resume the waiting one with it as the answer."""
        last = state.last
        pending = last.pending if last else None
        if last is not None and pending is not None:
            run = await self._prepare(state, last, turn_events)
            question, action = pending
            run.step = max(run.step, question.step)
            yield _collect(turn_events, await run.emit(UserEvent(text=message)))
            yield _collect(turn_events, await run.observe(action.call_id, action.tool, message, False))
        else:
            index = last.index + 1 if last else 1
            run = await self._prepare(state, Turn(index, message), turn_events)
            yield _collect(turn_events, await run.emit(UserEvent(text=message)))
        async for event in self._run(run, turn_events):
            yield event

    async def _run(self, run: TurnRun, turn_events: list[Event]) -> AsyncIterator[Event]:
        async for event in run.run():
            await self._turn_end(run.session, event)
            yield _collect(turn_events, event)

    async def _prepare(self, state: SessionState, turn: Turn, turn_events: list[Event]) -> TurnRun:
        """A ``TurnRun`` for ``turn``, with its stored events replayed."""
        tools = list(self.tools)
        if self.session_tools is not None:
            tools.extend(await self.session_tools(state.session, self.store))
        if self.toolsets:
            tools.extend(await toolset_tools(self.toolsets, {t.name for t in tools}))
        history = self._history(state, turn.index)
        specs = [t.spec for t in tools]
        transcript: Any
        if self.protocol == "native":
            from reactchat.native import NativeTranscript

            transcript = NativeTranscript(self.pack, specs, history, turn.question, self.system)
        else:
            from reactchat.react import ReactTranscript

            transcript = ReactTranscript(self.pack, specs, history, turn.question, self.system)
        model_context = getattr(self.model, "context_tokens", None)
        budget = min(self.context_tokens, model_context or self.context_tokens) * CHARS_PER_TOKEN
        run = TurnRun(
            session=state.session,
            turn=turn.index,
            model=self.model,
            store=self.store,
            tools={t.name: t for t in tools},
            transcript=transcript,
            max_steps=self.max_steps,
            max_observation=self.max_observation_chars,
            context_chars=budget,
            repeats=RepeatGuard(self.max_repeats),
            deps=self.deps,
            services=self.services,
            name=getattr(self, "name", None) or "reactchat",
        )
        replay(run, turn.events)
        turn_events.extend(turn.events)
        return run

    async def _turn_end(self, session: str, event: Event) -> None:
        """Run ``on_turn_end`` when ``event`` (durable, not yet yielded) ends the turn."""
        if self.on_turn_end is not None and isinstance(event, AnswerEvent):
            await self.on_turn_end(session, self.store, event.status)

    def _history(self, state: SessionState, before: int) -> list[tuple[str, str]]:
        """Earlier questions and answers, newest kept first, within the history budget."""
        budget = self.history_tokens * CHARS_PER_TOKEN
        kept: list[tuple[str, str]] = []
        for turn in reversed(state.turns):
            answer = turn.answer
            if turn.index >= before or answer is None:
                continue
            cost = len(turn.question) + len(answer.text)
            if cost > budget:
                break  # never half a turn: the oldest turns go first, whole
            budget -= cost
            kept.append((turn.question, answer.text))
        kept.reverse()
        return kept


def _collect(sink: list[Event], event: Event) -> Event:
    sink.append(event)
    return event


def _result(session: str, events: list[Event]) -> RunResult:
    turn = Turn(events[0].turn, "", list(events))
    status = turn.status
    answer = turn.answer
    pending = turn.pending
    error = next((e for e in reversed(events) if isinstance(e, ErrorEvent) and e.kind != "format"), None)
    if status == "interrupted":
        raise RuntimeError(error.message if error else "the turn ended without an answer")
    return RunResult(
        answer=answer.text if answer else None,
        status=status,
        session=session,
        turn=turn.index,
        steps=steps_of(events),
        question=pending[0].question if pending else None,
        reason=answer.reason if answer else "",
        events=events,
        usage=turn.usage,
    )


__all__ = ["Agent", "AlreadyAnswered", "SessionBusy", "SessionNotFound"]
