"""smolagents ``ToolCallingAgent`` with a scripted ``Model`` returning tool-call ``ChatMessage``s."""

from __future__ import annotations

from typing import Any

from smolagents import ChatMessage, LogLevel, Model, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole
from task_common import ANSWER, QUESTION, Mark, Run, key, value


class ScriptedModel(Model):
    """Replies from a script, restarting it after the last reply (one script per run)."""

    def __init__(self, script: list[ChatMessage]) -> None:
        super().__init__(model_id="scripted")
        self.script = script
        self.index = 0

    def generate(
        self,
        messages: list[ChatMessage],
        stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None,
        tools_to_call_from: Any = None,
        **kwargs: Any,
    ) -> ChatMessage:
        reply = self.script[self.index]
        self.index = (self.index + 1) % len(self.script)
        return reply


def _call(i: int, name: str, arguments: dict[str, str]) -> ChatMessage:
    function = ChatMessageToolCallFunction(name=name, arguments=arguments)
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        content="",
        tool_calls=[ChatMessageToolCall(id=f"call_{i}", type="function", function=function)],
    )


def build(n: int, mark: Mark, variant: str = "") -> Run:
    @tool
    def lookup(key: str) -> str:
        """Return the value stored under key.

        Args:
            key: the key to look up.
        """
        mark()
        return value(key)

    script = [_call(i, "lookup", {"key": key(i)}) for i in range(n)]
    script.append(_call(n, "final_answer", {"answer": ANSWER}))
    agent = ToolCallingAgent(tools=[lookup], model=ScriptedModel(script), max_steps=n + 1, verbosity_level=LogLevel.OFF)

    def run() -> str:
        return str(agent.run(QUESTION))

    return run
