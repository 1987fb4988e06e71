"""``reactchat worker --temporal HOST:PORT``: run the turns Temporal hands out."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from reactchat.agent import Agent
from reactchat.temporal._activities import HEARTBEAT, Activities
from reactchat.temporal._calls import Calls
from reactchat.temporal._children import NestedWorkflow
from reactchat.temporal._proxies import AGENTS
from reactchat.temporal._types import TASK_QUEUE
from reactchat.temporal._workflow import TurnWorkflow


def make_worker(
    client: Client, agent: Agent, task_queue: str = TASK_QUEUE, concurrency: int = 100, *, calls: bool = True
) -> Worker:
    """A Temporal worker that runs ``agent``'s turns: the workflows and their activities.

    With ``calls`` (the default) each model call and each tool call of a turn is an
    activity, if every part of the agent can be (``_children.proxiable``); without, a
    stretch of a turn is one activity (what ``benchmarks/temporal_overhead.py`` compares).
    Every worker of a queue must say the same."""
    activities, each = Activities(agent), Calls(agent)
    if calls:
        AGENTS[task_queue] = agent  # what this queue's workflows run in this process
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[TurnWorkflow, NestedWorkflow],
        activities=[activities.mark, activities.stretch, each.model, each.tool, each.reconcile, each.store],
        max_concurrent_activities=concurrency,
        # a cancel reaches a running stretch in the answer to its next heartbeat, which the
        # SDK sends at most every 0.8 heartbeat timeouts unless told otherwise: within 1 s
        max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT),
        default_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT),
        # a dead worker's workflows wait this long on its own queue before any worker takes
        # them (10 s by default): a turn goes on sooner after its worker dies
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
        # the sandbox re-imports modules for every new workflow: 0.78 s of a turn's overhead
        # and 0.8 against 10 turns/s (benchmarks/temporal_overhead.py); _workflow.py does
        # no I/O and reads no clock or randomness, which is what the sandbox checks for
        workflow_runner=UnsandboxedWorkflowRunner(),
    )


async def run_worker(address: str, agent: Agent, task_queue: str = TASK_QUEUE, *, calls: bool = True) -> None:
    """Connect to ``address`` and run ``agent``'s turns until cancelled (``calls``: see ``make_worker``)."""
    client = await Client.connect(address)
    await make_worker(client, agent, task_queue, calls=calls).run()
