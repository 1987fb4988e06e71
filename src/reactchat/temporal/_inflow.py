"""The engine's run of a stretch inside the turn's workflow (see docs/temporal.md).

The workflow runs ``Agent.arun`` itself, on a copy of the worker's agent whose model,
tools and store are proxies (``reactchat.temporal._proxies``): each model call and each
tool call is an activity, each store call a local activity. Temporal records their
results; a worker that dies is replaced by another that replays the workflow, getting
the recorded results back in the same order (the engine asks for them in the same
order: its decisions depend on nothing else that replay could change), and goes on
from the first call that has none. The events are written to the reactchat store by
the store's activities, once.
"""

from __future__ import annotations

from temporalio import workflow

from reactchat.engine.budget import Budget
from reactchat.engine.session import RunResult
from reactchat.errors import AlreadyAnswered, ReactchatError, SessionBusy
from reactchat.temporal._children import proxiable, proxied
from reactchat.temporal._proxies import AGENTS, CallLost, StoreProxy
from reactchat.temporal._types import Ended, Message


def runs_inflow() -> bool:
    """Whether this workflow's stretches run in the workflow, call by call: its worker's
    agent has no part the proxies cannot stand for (else a stretch is one activity)."""
    agent = AGENTS.get(workflow.info().task_queue)
    return agent is not None and proxiable(agent)


async def stretch_inflow(session: str, message: Message, heartbeat: float) -> Ended:
    """Run the turn from ``message`` to its next pause or its end, in the workflow.

    An ``unsafe`` call whose activity was lost ends that run (``CallLost``); the engine's
    recovery then finds the call started without a result and asks whether to run it
    again (the turn waits, ``in_doubt``), or reconciles it, as after any crash."""
    agent = AGENTS[workflow.info().task_queue]
    store = StoreProxy(agent.store.url, owner=f"temporal-{workflow.info().run_id}")
    inflow = proxied(agent, store, heartbeat)
    budget = Budget(**message.budget) if message.budget is not None else None
    try:
        try:
            result = await inflow.arun(
                message.text, session, reply_to=message.reply_to, output_type=message.output_schema, budget=budget
            )
        except CallLost:
            result = await inflow.resume(session)
    except (SessionBusy, AlreadyAnswered) as refused:
        return Ended(status="refused", error=type(refused).__name__, answer=str(refused))
    except ReactchatError as failed:  # a model's key, a bad configuration: the operator's to mend
        await store.flush()
        return Ended(status="failed", error=type(failed).__name__, answer=str(failed))
    await store.flush()  # a run ends with its unlock, which appends what waits: nothing is left
    return ended(result)


def ended(result: RunResult) -> Ended:
    """The ``Ended`` of a run's result."""
    pending = result.pending
    return Ended(
        status=result.status,
        turn=result.turn,
        answer=result.answer,
        question=result.question,
        pending=pending.kind if pending is not None else None,
    )


__all__ = ["AGENTS", "ended", "runs_inflow", "stretch_inflow"]
