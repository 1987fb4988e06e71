"""An in-process store: fast, and gone when the process ends."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

from reactchat.messages import Event
from reactchat.store import SessionNotFound
from reactchat.store._artifacts import MAX_ARTIFACTS, MAX_SESSION_BYTES, Artifact, content_type
from reactchat.store._facts import Fact
from reactchat.store._fork import fork_point


class MemoryStore:
    """Keeps sessions in a dict. Turn locks are per process."""

    def __init__(self) -> None:
        #: nothing else can open this store: each ``memory:`` URL is a new, private one
        self.url = "memory:"
        self._events: dict[str, list[Event]] = {}
        self._locks: dict[str, tuple[str, float]] = {}
        self._reflections: dict[str, list[tuple[float, str]]] = {}
        #: session → when its last turn ended (or it was created), a Unix time
        self._active: dict[str, float] = {}
        self._artifacts: dict[str, dict[str, Artifact]] = {}
        #: forked session → (original, the seq its copy stopped before)
        self._origins: dict[str, tuple[str, int]] = {}
        #: scope → fact id → fact
        self._facts: dict[str, dict[str, Fact]] = {}
        #: model name → (characters sent, input tokens reported)
        self._calibrations: dict[str, tuple[int, int]] = {}

    async def create_session(self, session_id: str | None = None) -> str:
        """Create a session and return its id."""
        session_id = session_id or uuid.uuid4().hex
        if session_id not in self._events:
            self._events[session_id] = []
            self._active[session_id] = time.time()
        return session_id

    async def exists(self, session_id: str) -> bool:
        """Whether the session exists."""
        return session_id in self._events

    async def events(self, session_id: str, since: int = 0) -> list[Event]:
        """The session's events, after the first ``since``."""
        try:
            return self._events[session_id][since:]
        except KeyError:
            raise SessionNotFound(session_id) from None

    async def turn_events(self, session_id: str) -> list[Event]:
        """What a new turn reads before it starts: here every event (nothing is parsed)."""
        return list(await self.events(session_id))

    async def append(self, *events: Event) -> None:
        """Keep events."""
        for event in events:
            try:
                log = self._events[event.session]
            except KeyError:
                raise SessionNotFound(event.session) from None
            log.append(event)
            event.seq = len(log)

    async def append_unlock(self, owner: str, *events: Event) -> None:
        """Keep events, then release their session's lock if ``owner`` holds it."""
        await self.append(*events)
        await self.unlock(events[0].session, owner)

    async def try_lock(self, session_id: str, owner: str, ttl: float) -> bool:
        """Take the session's turn lock unless another owner holds a live one."""
        now = time.monotonic()
        holder = self._locks.get(session_id)
        if holder and holder[0] != owner and holder[1] > now:
            return False
        self._locks[session_id] = (owner, now + ttl)
        if session_id in self._active:
            self._active[session_id] = time.time()
        return True

    async def try_lock_read(
        self, session_id: str, owner: str, ttl: float, since: int | None, then: tuple[Event, ...] = ()
    ) -> list[Event] | None:
        """``try_lock``, then the events after the first ``since`` (none when None), and ``then``
        appended if there were none; None when another owner holds the lock. A failed read or
        append gives the lock back."""
        if since == 0 and session_id not in self._events:
            raise SessionNotFound(session_id)
        if not await self.try_lock(session_id, owner, ttl):
            return None
        try:
            events = [] if since is None else await self.events(session_id, since)
            if not events and then:
                await self.append(*then)
        except BaseException:
            await self.unlock(session_id, owner)
            raise
        return events

    async def unlock(self, session_id: str, owner: str) -> None:
        """Release the lock if ``owner`` holds it."""
        if self._locks.get(session_id, ("",))[0] == owner:
            del self._locks[session_id]
            if session_id in self._active:
                self._active[session_id] = time.time()

    async def list_sessions(self, limit: int = 100) -> list[str]:
        """Session ids, newest first."""
        return list(reversed(self._events))[:limit]

    async def idle_sessions(self, before: float, limit: int = 1000) -> list[str]:
        """Sessions last active before ``before`` (a Unix time), longest idle first."""
        idle = sorted((at, session) for session, at in self._active.items() if at < before)
        return [session for _, session in idle[:limit]]

    async def delete_session(self, session_id: str, idle_before: float | None = None) -> bool:
        """Forget a session and its events; False if there was none. With ``idle_before``,
        only if it was last active before that time and no turn of it is running."""
        if session_id not in self._events:
            return False
        holder = self._locks.get(session_id)
        running = holder is not None and holder[1] > time.monotonic()
        if idle_before is not None and (running or self._active[session_id] >= idle_before):
            return False
        self._locks.pop(session_id, None)
        self._artifacts.pop(session_id, None)
        self._origins.pop(session_id, None)
        del self._active[session_id]
        return self._events.pop(session_id, None) is not None

    async def fork(self, session_id: str, before: int | None, new_id: str | None = None) -> str:
        """A new session holding copies of the events before ``before`` (all when None), same seqs."""
        events = await self.events(session_id)
        stop = fork_point(session_id, before, len(events))
        new_id = await self.create_session(new_id)
        if self._events[new_id]:
            raise ValueError(f"cannot fork into session {new_id}: it already has events")
        # copies keep their seq (a field the copy carries over): the log is the same up to ``stop``
        self._events[new_id] = [event.model_copy(update={"session": new_id}) for event in events[: stop - 1]]
        self._origins[new_id] = (session_id, stop)
        return new_id

    async def origin(self, session_id: str) -> tuple[str, int] | None:
        """The original and the fork point of a forked session; None for any other."""
        return self._origins.get(session_id)

    async def close(self) -> None:
        """Nothing to release."""

    async def put_artifact(self, session_id: str, name: str, data: bytes, at: float) -> Artifact:
        """Keep an artifact (replacing one of that name); the oldest beyond the bounds go."""
        if session_id not in self._events:
            raise SessionNotFound(session_id)
        kept = Artifact(name, content_type(name, data), len(data), at, bytes(data))
        held = self._artifacts.setdefault(session_id, {})
        held[name] = kept
        total = 0
        for rank, artifact in enumerate(sorted(held.values(), key=lambda a: (-a.at, a.name)), 1):
            total += artifact.size
            if rank > MAX_ARTIFACTS or total > MAX_SESSION_BYTES:
                del held[artifact.name]
        return replace(kept, data=b"")

    async def artifact(self, session_id: str, name: str) -> Artifact | None:
        """The artifact with its bytes, or None."""
        return self._artifacts.get(session_id, {}).get(name)

    async def artifacts(self, session_id: str) -> list[Artifact]:
        """The session's artifacts without their bytes, oldest first."""
        held = self._artifacts.get(session_id, {}).values()
        return [replace(a, data=b"") for a in sorted(held, key=lambda a: (a.at, a.name))]

    async def reflections(self, key: str, limit: int, since: float) -> list[str]:
        """The newest ``limit`` reflections under ``key`` made after ``since``, oldest first."""
        kept = [text for at, text in self._reflections.get(key, []) if at > since]
        return kept[-limit:] if limit > 0 else []

    async def add_reflection(self, key: str, text: str, at: float, keep: int, expire_before: float) -> None:
        """Keep a reflection; only the newest ``keep`` under ``key`` stay, none from before ``expire_before``."""
        self._reflections.setdefault(key, []).append((at, text))
        for name in list(self._reflections):
            rows = sorted((row for row in self._reflections[name] if row[0] >= expire_before), key=lambda r: r[0])
            if name == key:
                rows = rows[-keep:] if keep > 0 else []
            self._reflections[name] = rows

    async def add_fact(self, fact: Fact) -> None:
        """Keep ``fact`` (and drop the scope's expired ones)."""
        held = self._facts.setdefault(fact.scope, {})
        for gone in [f.id for f in held.values() if f.expires is not None and f.expires <= fact.at]:
            del held[gone]
        held[fact.id] = fact

    async def facts(self, scope: str, now: float, limit: int = 1000) -> list[Fact]:
        """The scope's facts that have not expired at ``now``, newest first."""
        live = [f for f in self._facts.get(scope, {}).values() if f.expires is None or f.expires > now]
        return sorted(live, key=lambda f: (-f.at, f.id))[:limit]

    async def forget_fact(self, scope: str, fact_id: str) -> bool:
        """Delete a fact of ``scope``; whether there was one."""
        return self._facts.get(scope, {}).pop(fact_id, None) is not None

    async def token_calibration(self, model: str) -> tuple[int, int] | None:
        """The ``(characters, tokens)`` recorded for ``model``, or None."""
        return self._calibrations.get(model)

    async def add_token_calibration(self, model: str, chars: int, tokens: int) -> None:
        """Add to ``model``'s totals of characters sent and input tokens reported."""
        old = self._calibrations.get(model, (0, 0))
        self._calibrations[model] = (old[0] + chars, old[1] + tokens)


def from_url(url: str) -> MemoryStore:
    """``memory:`` → a new ``MemoryStore``."""
    return MemoryStore()
