"""Turns running in this server process, and their events as Server-Sent Events.

A turn runs in its own task, not in the request that started it: a client that
disconnects (a page reload, a dropped connection) does not cut a turn in half. Every
event is in the store before it is sent, so any worker can show or resume the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from reactchat.agent import Agent
from reactchat.engine.budget import Budget
from reactchat.engine.loop import SHUTDOWN
from reactchat.engine.run import Run
from reactchat.engine.session import Outcome, Pending, RunResult
from reactchat.engine.usage import total
from reactchat.errors import TurnTakenOver
from reactchat.messages import ErrorEvent, Event, ImagePart
from reactchat.models import ModelError

log = logging.getLogger("reactchat.server")

#: seconds between SSE comments while a model call is slow, so proxies keep the stream open
KEEPALIVE = 15.0
#: headers of every SSE answer: never cached, never buffered by a proxy
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass
class Delta:
    """Text a model is streaming before it becomes a step: shown live, never stored."""

    text: str


Item = Event | Delta | BaseException | None


class TurnFeed:
    """The events of one running turn, as they become durable.

    Not an ``asyncio.Queue``: a reader takes everything that is ready at once, so an SSE
    writer sends a step's thought and action in one write instead of one each.
    """

    __slots__ = ("_closed", "_fresh", "_items", "_waiter", "result", "session")

    def __init__(self, session: str) -> None:
        self.session = session
        #: the run's result once it ended with one (what the ``end`` frame says, not folded again)
        self.result: RunResult | None = None
        self._items: list[Item] = []
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._fresh = True  # a batch went out since the keepalive clock's last tick

    def put(self, item: Event | Delta | BaseException | None) -> None:
        """Add an event (or the failure that ended the turn; ``None``: a keepalive)."""
        self._items.append(item)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def delta(self, text: str) -> None:
        """Add streamed model text; pieces not yet read are joined into one."""
        last = self._items[-1] if self._items else None
        if isinstance(last, Delta):
            last.text += text
        else:
            self.put(Delta(text))

    def close(self) -> None:
        """The turn is over: readers stop once they have everything."""
        self._closed = True
        self._wake()

    async def batches(self, keepalive: float = KEEPALIVE) -> AsyncIterator[list[Item]]:
        """Everything ready since the last batch; a ``None`` in it once nothing came for
        ``keepalive`` seconds. One reader; no timer of its own (see ``Clock``)."""
        loop = asyncio.get_running_loop()
        clock = Clock.of(loop, keepalive / 2)
        clock.feeds.add(self)
        try:
            while True:
                if not self._items and not self._closed:
                    self._waiter = loop.create_future()
                    try:
                        await self._waiter
                    finally:
                        self._waiter = None
                batch, self._items = self._items, []
                if batch:
                    self._fresh = True
                    yield batch
                if self._closed and not self._items:
                    return
        finally:
            clock.leave(self)

    def tick(self) -> None:
        """A tick of the keepalive clock: a ``None`` if nothing went out since the last one."""
        if not self._fresh and not self._closed:  # silent for a whole tick and more
            self.put(None)
        self._fresh = False

    async def items(self, keepalive: float = KEEPALIVE) -> AsyncIterator[Item]:
        """Events (and a failure, if any) until the turn ends; ``None`` while idle for ``keepalive``."""
        async for batch in self.batches(keepalive):
            for item in batch:
                yield item

    async def events(self) -> tuple[list[Event], BaseException | None]:
        """Wait for the turn to end: its events and the failure that ended it, if any."""
        events: list[Event] = []
        failure: BaseException | None = None
        async for item in self.items():
            if isinstance(item, BaseException):
                failure = item
            elif item is not None and not isinstance(item, Delta):
                events.append(item)
        return events, failure


class Clock:
    """The keepalive ticks of every feed of a loop read with the same interval: one timer,
    not one per running turn (a timer handle each, set up and cancelled every turn)."""

    running: ClassVar[dict[tuple[asyncio.AbstractEventLoop, float], Clock]] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, interval: float) -> None:
        self.loop = loop
        self.interval = interval
        self.feeds: set[TurnFeed] = set()
        self.timer = loop.call_later(interval, self._tick)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop, interval: float) -> Clock:
        """The running clock of ``loop`` for ``interval``, started if there is none."""
        clock = cls.running.get((loop, interval))
        if clock is None:
            clock = cls.running[loop, interval] = cls(loop, interval)
        return clock

    def leave(self, feed: TurnFeed) -> None:
        """``feed`` is no longer read; the clock stops with its last feed."""
        self.feeds.discard(feed)
        if not self.feeds:
            self.timer.cancel()
            del self.running[self.loop, self.interval]

    def _tick(self) -> None:
        for feed in self.feeds:
            feed.tick()
        self.timer = self.loop.call_later(self.interval, self._tick)


class Turns:
    """The turns this process is running, by session (``reactchat serve --temporal`` hands
    them to Temporal workers instead: ``reactchat.server._temporal.HandedTurns``)."""

    #: whether turns run in this process, so that a server finishes those of a dead worker
    runs_here: ClassVar[bool] = True

    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[BaseException | None]] = {}
        #: sessions whose turn here ended because the store went away (a lost connection, a
        #: database restart): the takeover watcher finishes them once it is back
        #: (``_takeover.watch_abandoned``), without waiting for the session's next message
        self.stranded: set[str] = set()

    async def start(
        self,
        agent: Agent,
        session: str,
        message: str | None,
        reply_to: str | None,
        output_schema: dict[str, Any] | None = None,
        budget: Budget | None = None,
        images: Sequence[ImagePart] = (),
    ) -> TurnFeed:
        """Start a turn (its final answer typed by ``output_schema``, a JSON schema, if given,
        its spending held within ``budget`` instead of the agent's).
        ``SessionBusy``, ``SessionNotFound`` and ``AlreadyAnswered`` raise here, before
        anything is recorded, so the request can answer with a clear status."""
        feed = TurnFeed(session)
        run = agent.turn(
            message,
            session,
            reply_to=reply_to,
            output_type=output_schema,
            on_delta=feed.delta,
            budget=budget,
            images=images,
        )
        # the whole turn runs in one task, its first event included: the request waits for that
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # named by its session, for ``_forget`` (no closure per turn)
        task = asyncio.create_task(_pump(run, feed, started), name=session)
        try:
            await started  # registered once it runs: a turn refused as busy must not hide the running one
        except asyncio.CancelledError as exc:  # the request was stopped: so is its turn, as before
            task.cancel(*exc.args[:1])
            raise
        self.running[session] = task
        task.add_done_callback(self._forget)
        return feed

    def _forget(self, task: asyncio.Task[BaseException | None]) -> None:
        # only this task: the next turn of the session may already have started
        session = task.get_name()
        if self.running.get(session) is task:
            del self.running[session]
        if not task.cancelled() and isinstance(task.result(), ConnectionError):
            self.stranded.add(session)

    def is_running(self, session: str) -> bool:
        """Whether this process is running a turn of ``session``."""
        return session in self.running

    async def cancel(self, session: str) -> bool:
        """Cancel the turn of ``session`` this process runs and wait until it is recorded
        as cancelled (its model request closed); False when none runs here."""
        task = self.running.get(session)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)
        return True

    async def stop_all(self) -> None:
        """Cancel running turns at shutdown; their events so far stay in the store, and the
        turns stay interrupted (not cancelled): the next message or worker finishes them."""
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel(SHUTDOWN)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _pump(run: Run, feed: TurnFeed, started: asyncio.Future[None]) -> BaseException | None:
    """Run the turn into ``feed``; the failure that ended it after it started, if any."""
    stream = aiter(run)
    try:
        first = await anext(stream)
    except asyncio.CancelledError:
        started.cancel()
        raise
    except BaseException as exc:  # busy, unknown, answered, nothing to run: the request says so
        started.set_exception(exc)
        return None
    feed.put(first)
    started.set_result(None)
    del started  # not held while the turn waits on its model
    try:
        async for event in stream:
            feed.put(event)
        feed.result = run.result
    except asyncio.CancelledError as exc:
        feed.put(exc)  # stopped (POST .../cancel): the run recorded the turn as cancelled
        return exc
    except TurnTakenOver as exc:  # another worker runs the turn now: nothing here to fix
        log.warning("%s", exc)
        feed.put(exc)
        return exc
    except Exception as exc:
        log.exception("turn of session %s failed", feed.session)
        feed.put(exc)
        return exc
    finally:
        feed.close()
    return None


def failure_event(session: str, exc: BaseException) -> ErrorEvent:
    """An error event for a turn that failed (it is not stored: the loop stored its own)."""
    if isinstance(exc, ModelError):  # written for the operator: which key, which model, what to do
        return ErrorEvent(session=session, kind="model", message=f"{type(exc).__name__}: {exc}")
    if isinstance(exc, TurnTakenOver):  # built from the session id alone: where to follow the turn
        return ErrorEvent(session=session, kind="internal", message=str(exc))
    # anything else may carry paths, SQL or host names: those stay in the server log
    message = f"internal error ({type(exc).__name__}); the details are in the server log"
    return ErrorEvent(session=session, kind="internal", message=message)


def summary(
    session: str, events: list[Event], failure: BaseException | None = None, result: RunResult | None = None
) -> dict[str, Any]:
    """How a turn ended: ``status`` (done, waiting, stopped, cancelled, interrupted), answer,
    question, usage; ``failure`` is what ended the turn early, if anything did. ``result``:
    the run's own result, when the run that made ``events`` ended with one (the turn's
    outcome is then taken from it rather than folded again)."""
    last = events[-1].turn if events else 0
    if result is None or failure is not None or result.turn != last:
        outcome = Outcome()
        for event in events:
            if event.turn == last:
                outcome.add(event)
        status = _status(outcome, events, failure)
        answer, reason = (outcome.answer.text, outcome.answer.reason) if outcome.answer else (None, "")
        pending = outcome.pending
    else:
        status, answer, reason, pending = result.status, result.answer, result.reason, result.pending
    return {
        "session": session,
        "turn": last,
        "status": status,
        "answer": answer,
        "reason": reason,
        "question": pending.question if pending else None,
        "reply_to": pending.call_id if pending else None,
        "usage": total([e for e in events if e.turn == last]).to_dict(),
        "pending": pending_view(pending),
    }


def pending_view(pending: Pending | None) -> dict[str, Any] | None:
    """What a waiting session waits for, for JSON: ``kind`` (``question``, ``approval``, ``in_doubt``, ``budget``),
    the question, ``reply_to``, and the tool and arguments of the call it belongs to."""
    if pending is None:
        return None
    return {
        "kind": pending.kind,
        "question": pending.question,
        "reply_to": pending.call_id,
        "tool": pending.tool,
        "input": pending.input,
        "agent": pending.agent,
    }


def _status(outcome: Outcome, events: list[Event], failure: BaseException | None) -> str:
    if isinstance(failure, asyncio.CancelledError) and failure.args[:1] != (SHUTDOWN,):
        return "cancelled"
    return "interrupted" if failure is not None or not events else outcome.status


def frame(kind: str, data: str) -> str:
    """One SSE frame."""
    return f"event: {kind}\ndata: {data}\n\n"


def event_frame(event: Event) -> str:
    """An event's SSE frame; its ``id`` is the event's place in the session's log, which a
    client sends back as ``Last-Event-ID`` to follow on from there (``_takeover.follow``)."""
    return f"id: {event.seq}\n{frame(event.type, event.model_dump_json())}"


async def sse(feed: TurnFeed, files: Callable[[], Awaitable[list[Any]]] | None = None) -> AsyncIterator[str]:
    """The turn as SSE: one frame per event (``event: <type>``, ``id: <seq>``), then ``event: end`` with
    the ``summary`` and, when ``files`` is given, ``"files": await files()`` (the session's
    files and their rounds left).

    ``event: delta`` frames (``{"text": ...}``) carry a streaming model's raw text as it
    is generated; the step's events that follow replace it.
    """
    told = Told(feed.session)
    async for batch in feed.batches():
        yield told.frames(batch)  # not kept in a local: a turn waits on its model between batches
    end = summary(feed.session, told.events, told.failure, feed.result)
    if files is not None:
        end["files"] = await files()
    yield Last(frame("end", json.dumps(end)))


class Told:
    """What an SSE stream has sent of a turn: its events, and the failure that ended it."""

    __slots__ = ("events", "failure", "session")

    def __init__(self, session: str) -> None:
        self.session = session
        self.events: list[Event] = []
        self.failure: BaseException | None = None

    def frames(self, batch: list[Item]) -> str:
        """The frames of ``batch``, joined."""
        frames = []
        for item in batch:
            if item is None:
                frames.append(": keepalive\n\n")
            elif isinstance(item, Delta):
                frames.append(frame("delta", json.dumps({"text": item.text}, ensure_ascii=False)))
            elif isinstance(item, asyncio.CancelledError):
                self.failure = item
            elif isinstance(item, BaseException):
                self.failure = item
                frames.append(frame("error", failure_event(self.session, item).model_dump_json()))
            else:
                self.events.append(item)
                frames.append(event_frame(item))
        return "".join(frames)


class Last(str):
    """A stream's last chunk: ``TurnStream`` sends it with the end of the body, in one write."""

    __slots__ = ()


class TurnStream(Response):
    """A turn's SSE frames, written straight to the ASGI ``send``; a ``Last`` chunk ends the body.

    Starlette's ``StreamingResponse`` runs its body in a task group beside a task that
    waits for the client to leave, so as to stop the body early: two more tasks and a
    cancel scope per response, a visible share of a turn's server CPU. A turn runs in a
    task of its own whatever its client does and its frames end when it ends, so there
    is nothing to stop early: a client that leaves costs the formatting of the frames
    left, which the server drops. (A stream that polls until its client leaves, such as
    ``_takeover.follow``, keeps ``StreamingResponse``.)
    """

    media_type = "text/event-stream"
    #: the encoded headers of a stream with no headers of its own, the same for every turn
    plain: ClassVar[tuple[tuple[bytes, bytes], ...]] = ()

    def __init__(self, frames: AsyncIterator[str], headers: Mapping[str, str] | None = None) -> None:
        self.frames = frames
        self.status_code = 200
        self.background = None
        if headers or not TurnStream.plain:
            self.init_headers({**SSE_HEADERS, **(headers or {})})
            if not headers:
                TurnStream.plain = tuple(self.raw_headers)
        else:  # a list of its own (``headers`` may change it), of the same encoded pairs
            self.raw_headers = [*TurnStream.plain]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        ended = False
        # followed to its end, past the ``Last`` chunk: an async generator left suspended
        # is closed later by a task the event loop starts for it (one more task per turn)
        async for chunk in self.frames:
            if not ended:
                ended = isinstance(chunk, Last)
                await send({"type": "http.response.body", "body": chunk.encode(), "more_body": not ended})
            del chunk  # not held while the next frames are awaited
        if not ended:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
