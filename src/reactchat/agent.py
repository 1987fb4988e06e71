"""``Agent``: the public entry point. One async core (``stream``), one sync wrapper (``run``).

The path of a turn (see ``reactchat.engine.run``)::

    Agent.run(message)      the sync wrapper: this thread's event loop runs ``arun``
      Agent.arun(message)   makes a ``Run`` and drains it
        Run (iterated)      locks the session, reads it, decides what the message is
          Loop.steps()      the ReAct loop
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from typing import Any, Literal

from reactchat.engine import build
from reactchat.engine.approval import Policy
from reactchat.engine.budget import Budget
from reactchat.engine.compaction import compact_turns
from reactchat.engine.guards import DEFAULT_MAX_OBSERVATION
from reactchat.engine.output import DEFAULT_RETRIES, Output, as_output
from reactchat.engine.run import Run
from reactchat.engine.session import RunResult, SessionState
from reactchat.engine.spec import Hooks, SessionTools, TurnEnd
from reactchat.errors import AlreadyAnswered, ConfigError, InsideEventLoop, SessionBusy, SessionNotFound
from reactchat.memory import Memory
from reactchat.memory import attach as attach_memory
from reactchat.messages import CompactionEvent, Event, ImagePart, ToolSpec
from reactchat.models import Model, resolve_model
from reactchat.models._http import close_clients
from reactchat.orchestration.nested import SubAgent
from reactchat.orchestration.reflexion import Reflexion
from reactchat.orchestration.runners import runner
from reactchat.protocols.base import Transcript
from reactchat.protocols.packs import PromptPack, get_pack
from reactchat.store import Store, resolve_store
from reactchat.toolbox import ask_user as ask_user_tool
from reactchat.tools import EFFECTS, Approval, Effect, Tool, Toolset, as_tool
from reactchat.tools.threads import DEFAULT_TOOL_THREADS, ToolThreads


class Agent:
    """An LLM agent that reasons and acts with tools inside a multi-turn chat.

    ``model`` is a ``Model`` or a spec string (``local``, ``local:/path.gguf``,
    ``openai:MODEL``, ``anthropic:MODEL``, ``scripted:FILE``); ``store`` a ``Store`` or a
    URL (``memory:``, ``sqlite:///path.db``, ``postgresql://...``). Nothing is loaded or
    opened until the first run. ``name`` labels the agent's events (``event.agent``) and
    ``description`` says what it does, for an agent that uses it as a tool.

    An ``Agent`` in ``tools=`` is a sub-agent (``agent.as_tool()``): called with
    ``{"task": ...}``, it runs inside the call, in the same session, at most ``max_depth``
    levels deep. ``plan=True`` makes each turn plan-and-execute (``max_replans`` revisions,
    ``max_plan_steps`` steps in all); ``reflect=Reflexion(...)`` retries rejected answers.
    See docs/agents.md.

    ``tool_threads`` bounds the threads its sync tools run on (a hung call keeps one).
    ``session_tools(session, store)`` adds tools per session at the start of each turn;
    ``services`` reach tools as ``RunContext.services``; ``on_turn_end(session, store,
    status)`` runs once a turn has its final answer. More of both can be registered on
    ``agent.hooks`` (``reactchat.knowledge.attach(agent)`` does, for uploaded files).

    A tool's effect class (``@tool(effect=...)``, overridden per name by ``effects``) decides
    what happens to a call a crash cut off: ``read`` and ``idempotent`` calls run again, an
    ``unsafe`` one asks its ``reconcile`` check or, with none, makes the turn wait
    (``pending.kind == "in_doubt"``: ``retry``, ``skip`` or its result; ``in_doubt="tell_model"``
    tells the model instead). The tool calls of one model reply run at once, at most
    ``parallel_tools`` (native protocol); their observations are recorded in call order.

    ``memory=Memory(scope=...)`` keeps facts across the sessions of a scope: the agent gets
    ``remember`` and ``recall`` tools and the facts that match a message in its prompt
    (``agent.memory.facts()``, ``agent.memory.forget(id)``; see ``reactchat.memory``).

    ``few_shot=True`` shows the prompt pack's worked example (one full cycle with a tool the
    agent does not have) in the text protocol's instructions; by default it is on for
    models that ask for it (``model.few_shot``: the embedded local models) and off elsewhere.
    """

    def __init__(
        self,
        model: str | Model = "local",
        tools: Iterable[Tool | Toolset | Agent | Callable[..., Any]] = (),
        *,
        name: str = "reactchat",
        description: str = "",
        protocol: Literal["react", "native"] = "react",
        max_steps: int = 10,
        store: str | Store = "memory:",
        language: str | PromptPack = "en",
        system: str | None = None,
        ask_user: bool = True,
        max_observation_chars: int = DEFAULT_MAX_OBSERVATION,
        context_tokens: int = 16_000,
        history_tokens: int | None = None,
        compact_at: float | None = None,
        max_repeats: int = 3,
        deps: Any = None,
        session_tools: SessionTools | None = None,
        on_turn_end: TurnEnd | None = None,
        services: dict[str, Any] | None = None,
        lock_ttl: float = 600.0,
        plan: bool = False,
        max_replans: int = 3,
        max_plan_steps: int = 8,
        reflect: Reflexion | None = None,
        max_depth: int = 3,
        approval: Policy | None = None,
        effects: dict[str, Effect] | None = None,
        in_doubt: Literal["ask", "tell_model"] = "ask",
        parallel_tools: int = 8,
        budget: Budget | None = None,
        output_type: Any = None,
        output_retries: int = DEFAULT_RETRIES,
        tool_threads: int = DEFAULT_TOOL_THREADS,
        few_shot: bool | None = None,
        memory: Memory | None = None,
    ) -> None:
        if protocol not in ("react", "native"):
            raise ConfigError(f"protocol must be 'react' or 'native', not {protocol!r}")
        if max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, not {max_steps}")
        if not name or "/" in name:
            raise ConfigError(f"an agent's name must be non-empty and without '/' (it is a path segment): {name!r}")
        self.name = name
        self.description = description
        self._model_spec = model
        self._model: Model | None = None if isinstance(model, str) else model
        self._store_spec = store
        self._store: Store | None = None if isinstance(store, str) else store
        given = list(tools)
        #: sources of tools listed at each turn (MCP servers)
        self.toolsets: list[Toolset] = []
        self.tools: list[Tool] = []
        for t in given:
            if isinstance(t, Tool):  # never a toolset; asked first, as the protocol's isinstance is slow
                self.tools.append(t)
            elif isinstance(t, Toolset):
                self.toolsets.append(t)
            else:
                self.tools.append(t.as_tool() if isinstance(t, Agent) else as_tool(t))
        if ask_user and not any(t.name == "ask_user" for t in self.tools):
            self.tools.append(ask_user_tool)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ConfigError(f"two tools share a name: {twice}; give one of them another name (@tool(name=...))")
        self.protocol: Literal["react", "native"] = protocol
        self.max_steps = max_steps
        self.pack = get_pack(language)
        self.system = system
        #: show the prompt pack's worked example (text protocol); None: if the model asks for it
        self.few_shot = few_shot
        self.max_observation_chars = max_observation_chars
        self.context_tokens = context_tokens
        self.history_tokens = history_tokens
        if compact_at is not None and not 0 < compact_at <= 1:
            raise ConfigError(f"compact_at is a share of the context window, above 0 and at most 1: {compact_at}")
        #: the share of the context window past which the oldest turns (and, in a long turn,
        #: the oldest steps) are summarised; None: never (the oldest turns are dropped)
        self.compact_at = compact_at
        self.max_repeats = max_repeats
        self.deps = deps
        self.services: dict[str, Any] = dict(services or {})
        self.lock_ttl = lock_ttl
        if max_replans < 0 or max_plan_steps < 1 or max_depth < 0:
            raise ConfigError("max_replans and max_depth must be 0 or more, max_plan_steps at least 1")
        self.plan = plan
        self.max_replans = max_replans
        self.max_plan_steps = max_plan_steps
        self.reflect = reflect
        self.max_depth = max_depth
        #: policy(tool name, arguments) -> whether a human approves the call first (any tool, MCP ones too)
        self.approval = approval
        if in_doubt not in ("ask", "tell_model"):
            raise ConfigError(f"in_doubt must be 'ask' or 'tell_model', not {in_doubt!r}")
        if parallel_tools < 1:
            raise ConfigError(f"parallel_tools must be at least 1, not {parallel_tools}")
        wrong = {name: e for name, e in (effects or {}).items() if e not in EFFECTS}
        if wrong:
            raise ConfigError(f"effects must be one of {', '.join(EFFECTS)}: {wrong}")
        #: effect classes that override the tools' own, by tool name (MCP tools included)
        self.effects: dict[str, Effect] = dict(effects or {})
        #: what an unsafe call a crash cut off becomes: a question (``ask``) or a note to the model
        self.in_doubt: Literal["ask", "tell_model"] = in_doubt
        #: how many tool calls of one model reply run at once
        self.parallel_tools = parallel_tools
        #: limits on what one turn spends: reached, the turn waits (``pending.kind == "budget"``)
        self.budget = budget
        #: what a final answer must be: ``output_type`` is a pydantic model (or any type
        #: pydantic validates) or a JSON schema; a failing answer goes back as a correction
        self.output = as_output(output_type, output_retries)
        #: the threads this agent's sync tools run on (at most ``tool_threads``)
        self.threads = ToolThreads(tool_threads)
        self.hooks = Hooks(lambda: self.store)
        if session_tools is not None:
            self.hooks.session_tools.append(session_tools)
        if on_turn_end is not None:
            self.hooks.turn_end.append(on_turn_end)
        #: facts kept across the sessions of a scope (``reactchat.memory``), in this agent's store
        self.memory = memory if memory is None or memory.store is not None else memory.on(lambda: self.store)
        if self.memory is not None:
            attach_memory(self, self.memory)

    @property
    def model(self) -> Model:
        """The model, resolved from its spec on first use."""
        if self._model is None:
            self._model = resolve_model(self._model_spec)
            if self.protocol == "native" and not self._model.supports_tools:
                raise ConfigError(
                    f"model {self._model.name!r} has no native tool calling: use protocol='react' with it"
                )
        return self._model

    @property
    def store(self) -> Store:
        """The store, opened from its URL on first use."""
        if self._store is None:
            self._store = resolve_store(self._store_spec)
        return self._store

    def transcript(
        self,
        tools: list[ToolSpec],
        history: list[tuple[str, str]],
        question: str,
        system: str | None = None,
        output: Output | None = None,
    ) -> Transcript:
        """A new transcript of this agent's protocol for one run (``system`` replaces the agent's;
        a typed answer's schema is added to it)."""
        return build.transcript(self, tools, history, question, system, output)

    def as_tool(self, *, memory: bool = False, approval: Approval = False) -> SubAgent:
        """This agent as another agent's tool (a sub-agent): input ``{"task": ...}``, its final
        answer the observation. ``memory``: it sees its earlier tasks and answers of the session.
        ``approval``: as ``@tool(approval=...)``, a human approves each call to it first (True),
        or those for which ``approval(arguments)`` is true."""
        return SubAgent(self, memory=memory, approval=approval)

    # ------------------------------------------------------------------ running

    def run(
        self,
        message: str,
        session: str | None = None,
        *,
        reply_to: str | None = None,
        images: Sequence[ImagePart] = (),
    ) -> RunResult:
        """Run one turn synchronously, on this thread's event loop (kept between calls)."""
        return _thread_loop().run(self.arun(message, session, reply_to=reply_to, images=images))

    async def arun(
        self,
        message: str | None,
        session: str | None = None,
        *,
        reply_to: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        output_type: Any = None,
        budget: Budget | None = None,
        images: Sequence[ImagePart] = (),
    ) -> RunResult:
        """Run one turn and return its result (see ``stream``); ``on_event`` sees each event;
        ``output_type`` types this turn's final answer (instead of the agent's own); ``budget``
        limits this turn instead of the agent's."""
        run = self.turn(message, session, reply_to=reply_to, output_type=output_type, budget=budget, images=images)
        async for event in run:
            if on_event is not None:
                on_event(event)
        assert run.result is not None  # a run that ends without raising has a result
        result, output = run.result, run.output or self.output
        if output is not None and result.status == "done" and result.answer is not None:
            result.output = output.validate(result.answer)  # the stored text is validated JSON
        return result

    async def resume(self, session: str) -> RunResult:
        """Finish a turn that was interrupted (a crash, a model error); ``NothingToRun`` if none is."""
        return await self.arun(None, session)

    async def stream(
        self,
        message: str | None,
        session: str | None = None,
        *,
        reply_to: str | None = None,
        deltas: bool = False,
        images: Sequence[ImagePart] = (),
    ) -> AsyncIterator[Event]:
        """Run one turn, yielding each event once it is durable.

        ``session=None`` starts a new session. If the session waits on a question,
        ``message`` is the answer and the turn resumes where it stopped (``reply_to``, the
        question's ``call_id``, makes sure it still waits). A turn interrupted by a crash
        is finished first. ``deltas=True`` adds ``DeltaEvent``s: a streaming model's text
        as it comes. ``images`` (``reactchat.messages.images.checked(name, data)``) go with a
        message that starts a turn, to a model that sees images (others are told what they
        are); they are kept as the session's artifacts. Raises ``SessionBusy`` while another turn of the session runs,
        ``SessionNotFound`` for an unknown id, ``AlreadyAnswered`` for a stale ``reply_to``.
        """
        async for event in self.turn(message, session, reply_to=reply_to, deltas=deltas, images=images):
            yield event

    def turn(
        self,
        message: str | None,
        session: str | None = None,
        *,
        reply_to: str | None = None,
        deltas: bool = False,
        output_type: Any = None,
        on_delta: Callable[[str], Any] | None = None,
        budget: Budget | None = None,
        images: Sequence[ImagePart] = (),
    ) -> Run:
        """The ``Run`` of one turn, not started: iterate it for the events, then read ``result``.
        ``output_type`` types this turn's final answer (instead of the agent's own);
        ``on_delta(text)`` sees a streaming model's text as it comes (no ``DeltaEvent``s);
        ``budget`` limits this turn instead of the agent's ``budget``."""
        output = as_output(output_type, self.output.retries if self.output else DEFAULT_RETRIES)
        return Run(
            self,
            runner,
            message,
            session,
            reply_to=reply_to,
            deltas=deltas,
            output=output,
            on_delta=on_delta,
            budget=budget,
            images=images,
        )

    async def fork(self, session: str, *, before: int | None = None, new_id: str | None = None) -> str:
        """A new session (``new_id``, else a random id) holding the events of ``session`` before
        seq ``before`` (the whole session when None), and what the ``fork`` hooks copy (the
        uploaded files); ``session`` is untouched. Its id is returned.

        Before a user message that starts a turn, it is that message's "edit and resend": the
        fork's last turn is complete and the next message starts a new one. Inside a turn, the
        fork's copy of it is interrupted there, and goes on with the next ``resume`` or message
        (a call the fork cut off is made again). In the fork, calls that repeat the original's
        reuse what is safe and ask before repeating an effect (``reactchat.engine.forks``).
        Raises ``SessionNotFound``, ``NoSuchEvent`` when ``before`` is not the seq of an event.
        """
        new = await self.store.fork(session, before, new_id)
        try:
            await self.hooks.forked(session, new)
        except BaseException:
            await self.store.delete_session(new)  # no half-made fork: all of it or nothing
            raise
        return new

    async def compact(self, session: str) -> CompactionEvent | None:
        """Summarise the session's answered turns not yet summarised, now: the stored event,
        or None when there is nothing new to summarise or the summary failed. Raises
        ``SessionBusy`` while a turn of the session runs, ``SessionNotFound`` for an unknown id."""
        store = self.store
        if not await store.exists(session):
            raise SessionNotFound(session)
        owner = os.urandom(16).hex()
        if not await store.try_lock(session, owner, self.lock_ttl):
            raise SessionBusy(session)
        try:
            state = await self.state(session)
            answered = state.answered()
            if state.last is None or not answered:
                return None
            return await compact_turns(self, state, state.last.index, answered[-1][0])
        finally:
            await store.unlock(session, owner)

    async def state(self, session: str) -> SessionState:
        """The session's turns, from its stored events."""
        return SessionState.from_events(session, await self.store.events(session))


class _ThreadLoop:
    """The event loop ``Agent.run`` uses on one thread: made on first use and kept for the
    next calls (a store's connections stay open).

    Closing it never starts a thread (``loop.close()``, not ``asyncio.Runner.close()``,
    whose default-executor shutdown starts one and can deadlock at interpreter exit): the
    main thread's loop is closed at exit, another thread's when that thread's locals go.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coroutine: Coroutine[Any, Any, RunResult]) -> RunResult:
        # ``_get_running_loop`` returns None where ``get_running_loop`` would raise (cheaper)
        if asyncio._get_running_loop() is not None:
            coroutine.close()
            raise InsideEventLoop()
        results: list[RunResult] = []

        async def main() -> None:
            try:
                results.append(await coroutine)
            finally:
                await _end_of_call()

        task = self.loop.create_task(main())
        try:
            self.loop.run_until_complete(task)
        except BaseException:  # Ctrl-C: the turn is cancelled, and ends as a cancelled task does
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    self.loop.run_until_complete(task)
            raise
        return results[0]

    def close(self) -> None:
        """Close the loop (idempotent); never called while it runs."""
        if not self.loop.is_closed() and not self.loop.is_running():
            self.loop.close()

    def __del__(self) -> None:
        self.close()


async def _end_of_call() -> None:
    """What ``asyncio.run`` did at the end of each call, minus closing the loop: cancel the
    tasks the call left behind (an MCP server's connection) and close the HTTP clients it
    opened, so that nothing of a finished call stays open in an idle loop."""
    this = asyncio.current_task()
    left = [task for task in asyncio.all_tasks() if task is not this]
    if left:  # usually none: a gather of nothing still costs a future
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
    await close_clients()


_loops = threading.local()


def _thread_loop() -> _ThreadLoop:
    loop: _ThreadLoop | None = getattr(_loops, "loop", None)
    if loop is None:
        loop = _loops.loop = _ThreadLoop()
        if threading.current_thread() is threading.main_thread():
            atexit.register(loop.close)
    return loop


__all__ = ["Agent", "AlreadyAnswered", "Hooks", "SessionBusy", "SessionNotFound"]
