"""``reactchat mcp``: an agent as one MCP tool over stdio, for other MCP clients to delegate to.

The tool takes ``question`` and, to continue a conversation or answer the agent's
question, the ``session`` it returned. Its structured result says how the turn ended:
``{"status": "done", "answer": ..., "session": ...}`` or, when the agent asks the user
something, ``{"status": "waiting", "question": ..., "session": ...}``: call the tool
again with the answer as ``question`` and the same ``session``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from reactchat.mcp._client import _sdk

if TYPE_CHECKING:
    from reactchat.agent import Agent

DEFAULT_TOOL = "ask_agent"


class AgentReply(BaseModel):
    """How one turn of the agent ended."""

    status: str
    session: str
    answer: str | None = None
    #: the agent's question when ``status`` is ``waiting``: answer it in the next call
    question: str | None = None


def agent_server(agent: Agent, *, name: str = "reactchat", tool: str = DEFAULT_TOOL, description: str = "") -> Any:
    """An MCP server (of the ``mcp`` SDK) whose one tool runs a turn of ``agent``."""
    _sdk()
    # the mcp extra, whose absence _sdk() above reports naming it
    from mcp.server import MCPServer as SDKServer

    server = SDKServer(name)

    async def ask_agent(question: str, session: str | None = None) -> AgentReply:
        result = await agent.arun(question, session)
        return AgentReply(status=result.status, session=result.session, answer=result.answer, question=result.question)

    server.add_tool(
        ask_agent,
        name=tool,
        description=description
        or (
            "Ask a reasoning agent that can use tools. Give the question; to continue the same "
            "conversation (or to answer the agent's own question when status is 'waiting'), "
            "pass the session it returned."
        ),
    )
    return server


async def serve_stdio(agent: Agent, **options: Any) -> None:
    """Serve ``agent`` over stdio until the client closes the connection."""
    await agent_server(agent, **options).run_stdio_async()
