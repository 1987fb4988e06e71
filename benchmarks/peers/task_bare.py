"""A plain-Python ReAct loop in the style of the from-scratch ReAct article: messages list, regex, json.loads."""

from __future__ import annotations

import json
import re

from task_common import ANSWER, QUESTION, TOOL_DOC, Mark, Run, key, value

SYSTEM = f"""You are an agent. You work in a loop of Thought, Action, Observation, PAUSE.
Your available tools are:
- lookup(key: str): {TOOL_DOC}
Use the format: Thought / Action / Action Input / PAUSE, then Final Answer."""

ACTION = re.compile(r"Action: (.*)")
ACTION_INPUT = re.compile(r"Action Input: (.*)")


def build(n: int, mark: Mark, variant: str = "") -> Run:
    script = [f'Thought: I look it up.\nAction: lookup\nAction Input: {{"key": "{key(i)}"}}\nPAUSE' for i in range(n)]
    script.append(f"Thought: I know it.\nFinal Answer: {ANSWER}")

    def lookup(key: str) -> str:
        mark()
        return value(key)

    tools = {"lookup": lookup}

    def run() -> str:
        replies = iter(script)

        def call_llm(messages: list[dict[str, str]]) -> str:
            return next(replies)

        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {QUESTION}"},
        ]
        for _ in range(n + 1):
            response = call_llm(messages)
            messages.append({"role": "assistant", "content": response})
            if "Final Answer:" in response:
                return response.split("Final Answer:")[-1].strip()
            action_match = ACTION.search(response)
            input_match = ACTION_INPUT.search(response)
            if action_match and input_match:
                action = action_match.group(1).strip()
                try:
                    args = json.loads(input_match.group(1).strip())
                    observation: object = tools[action](**args)
                except (TypeError, ValueError, KeyError) as error:
                    observation = error
                messages.append({"role": "user", "content": f"Observation: {observation}"})
            else:
                messages.append({"role": "user", "content": "Error: Invalid format."})
        return "timed out"

    return run
