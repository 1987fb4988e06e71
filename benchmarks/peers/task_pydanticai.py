"""PydanticAI ``Agent`` with its ``FunctionModel`` test model."""

from __future__ import annotations

import itertools

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits
from task_common import ANSWER, QUESTION, Mark, Run, key, value


def build(n: int, mark: Mark, variant: str = "") -> Run:
    script = [ModelResponse(parts=[ToolCallPart("lookup", {"key": key(i)}, f"call_{i}")]) for i in range(n)]
    script.append(ModelResponse(parts=[TextPart(ANSWER)]))
    replies = itertools.cycle(script)  # every run consumes exactly n + 1 replies

    def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return next(replies)

    agent = Agent(FunctionModel(scripted))

    @agent.tool_plain
    def lookup(key: str) -> str:
        """Return the value stored under key."""
        mark()
        return value(key)

    limits = UsageLimits(request_limit=n + 2)

    def run() -> str:
        return str(agent.run_sync(QUESTION, usage_limits=limits).output)

    return run
