"""LangChain ``AgentExecutor`` with the classic ReAct agent, prompt and parser, on ``FakeListLLM``."""

from __future__ import annotations

from langchain_classic.agents import AgentExecutor, create_react_agent
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.prompts import PromptTemplate
from langchain_core.tools import tool
from task_common import ANSWER, QUESTION, TOOL_DOC, Mark, Run, key, value

# The prompt of hub "hwchase17/react", which the create_react_agent docs use.
REACT_PROMPT = """Answer the following questions as best you can. You have access to the following tools:

{tools}

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{tool_names}]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!

Question: {input}
Thought:{agent_scratchpad}"""


def build(n: int, mark: Mark, variant: str = "") -> Run:
    def lookup(key: str) -> str:
        mark()
        return value(key)

    lookup.__doc__ = TOOL_DOC
    script = [f"I look it up.\nAction: lookup\nAction Input: {key(i)}" for i in range(n)]
    script.append(f"I know it.\nFinal Answer: {ANSWER}")
    # FakeListLLM wraps around after its last response: every run starts the script anew.
    llm = FakeListLLM(responses=script)
    tools = [tool(lookup)]
    agent = create_react_agent(llm, tools, PromptTemplate.from_template(REACT_PROMPT))
    executor = AgentExecutor(agent=agent, tools=tools, max_iterations=n + 1)

    def run() -> str:
        return str(executor.invoke({"input": QUESTION})["output"])

    return run
