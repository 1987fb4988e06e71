"""Plan-and-execute: the planner's and the replanner's prompts, and the reading of their replies.

A planner model call writes a short plan (``{"steps": [{"task": ..., "agent": ...}]}``);
each step then runs as a ReAct run of an executor (the planning agent itself with its
tools, or the sub-agent the step names); after each step a replanner call decides to
``continue``, ``revise`` the steps not yet run, or ``answer``. This module holds the
words (English, French, Japanese) and the validation; ``reactchat.agents`` runs it.

What the models write is read leniently (code fences, prose around the JSON, a bare
list of tasks, a numbered list); what does not fit raises ``PlanError``, whose message
is the correction sent back to the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from reactchat.messages import PlanStep, Request, SystemMessage, ToolSpec, UserMessage
from reactchat.protocols.base import FormatError
from reactchat.protocols.packs import PromptPack
from reactchat.protocols.react import parse_input

#: corrections the planner gets before the plan falls back to one step: the question itself
PLANNER_RETRIES = 2


class PlanError(FormatError):
    """A planner or replanner reply that cannot be used; ``str(error)`` is the correction."""


@dataclass(frozen=True)
class PlanWords:
    """The planner's and the replanner's prompts in one language."""

    planner: str
    replanner: str
    default_executor: str
    no_steps: str
    too_many: str
    unknown_agent: str
    no_decision: str
    status: dict[str, str]
    #: heads the results of the earlier steps in a step's task
    earlier: str
    #: tells the replanner that no more steps can run
    answer_now: str


PLAN_WORDS: dict[str, PlanWords] = {
    "en": PlanWords(
        planner=(
            "You are the planner. Break the user's question into a short plan: at most {max_steps} "
            "steps, each a self-contained task that one executor can carry out with its tools and "
            "answer in a sentence. The steps run in order; a later step sees the results of the "
            "earlier ones. Use as few steps as the question needs (one is fine).\n\n"
            "Executors:\n{executors}\n\n"
            'Reply with JSON only: {{"steps": [{{"task": "...", "agent": "..."}}]}}. '
            '"agent" is optional: leave it out to use the default executor.'
        ),
        replanner=(
            "You are the planner. Here is the question, the plan and what the finished steps "
            "found. Decide what happens next:\n"
            '- {{"action": "continue"}} to run the next pending step as planned;\n'
            '- {{"action": "revise", "steps": [{{"task": "...", "agent": "..."}}]}} to replace '
            "every pending step with new ones ({replans_left} revisions left, at most {steps_left} "
            "more steps);\n"
            '- {{"action": "answer", "answer": "..."}} when the results answer the question.\n'
            "Executors:\n{executors}\n\nReply with JSON only."
        ),
        default_executor="the default executor, with the tools: {tools}",
        no_steps='The plan has no steps. Reply with JSON only: {{"steps": [{{"task": "..."}}]}}.',
        too_many="The plan has {count} steps; the limit is {max_steps}. Merge steps and reply again.",
        unknown_agent="There is no executor named {agent!r}. The executors are: {agents}. Reply again.",
        no_decision=(
            'Reply with one JSON object: {{"action": "continue"}}, {{"action": "revise", "steps": [...]}} '
            'or {{"action": "answer", "answer": "..."}}.'
        ),
        status={"pending": "pending", "done": "done", "failed": "failed", "skipped": "skipped"},
        earlier="Results of the earlier steps:",
        answer_now='No more steps can run: answer now with {{"action": "answer", "answer": "..."}}.',
    ),
    "fr": PlanWords(
        planner=(
            "Vous êtes le planificateur. Découpez la question de l'utilisateur en un plan court : "
            "au plus {max_steps} étapes, chacune une tâche autonome qu'un exécutant peut mener avec "
            "ses outils et résumer en une phrase. Les étapes s'exécutent dans l'ordre ; une étape "
            "voit les résultats des précédentes. Utilisez aussi peu d'étapes que possible (une "
            "suffit souvent).\n\nExécutants :\n{executors}\n\n"
            'Répondez uniquement en JSON : {{"steps": [{{"task": "...", "agent": "..."}}]}}. '
            "« agent » est facultatif : sans lui, l'exécutant par défaut s'en charge."
        ),
        replanner=(
            "Vous êtes le planificateur. Voici la question, le plan et ce qu'ont trouvé les étapes "
            "terminées. Décidez de la suite :\n"
            '- {{"action": "continue"}} pour exécuter la prochaine étape prévue ;\n'
            '- {{"action": "revise", "steps": [{{"task": "...", "agent": "..."}}]}} pour remplacer '
            "toutes les étapes en attente ({replans_left} révisions restantes, au plus {steps_left} "
            "étapes de plus) ;\n"
            '- {{"action": "answer", "answer": "..."}} quand les résultats répondent à la question.\n'
            "Exécutants :\n{executors}\n\nRépondez uniquement en JSON."
        ),
        default_executor="l'exécutant par défaut, avec les outils : {tools}",
        no_steps='Le plan n\'a aucune étape. Répondez uniquement en JSON : {{"steps": [{{"task": "..."}}]}}.',
        too_many="Le plan a {count} étapes ; la limite est {max_steps}. Regroupez des étapes et répondez à nouveau.",
        unknown_agent="Aucun exécutant ne s'appelle {agent!r}. Les exécutants sont : {agents}. Répondez à nouveau.",
        no_decision=(
            'Répondez par un seul objet JSON : {{"action": "continue"}}, {{"action": "revise", "steps": [...]}} '
            'ou {{"action": "answer", "answer": "..."}}.'
        ),
        status={"pending": "en attente", "done": "faite", "failed": "échouée", "skipped": "abandonnée"},
        earlier="Résultats des étapes précédentes :",
        answer_now=(
            'Plus aucune étape ne peut s\'exécuter : répondez maintenant par {{"action": "answer", "answer": "..."}}.'
        ),
    ),
    "ja": PlanWords(
        planner=(
            "あなたは計画担当です。ユーザーの質問を短い計画に分けてください。ステップは最大 {max_steps} 個で、"
            "それぞれ一人の実行担当がツールを使って実行し、一文で答えられる独立したタスクにします。"
            "ステップは順番に実行され、後のステップは前のステップの結果を見ることができます。"
            "必要最小限のステップにしてください（一つでもかまいません）。\n\n実行担当：\n{executors}\n\n"
            'JSON だけで答えてください：{{"steps": [{{"task": "...", "agent": "..."}}]}}。'
            "「agent」は省略でき、省略すると既定の実行担当が実行します。"
        ),
        replanner=(
            "あなたは計画担当です。質問、計画、終わったステップの結果を示します。次にすることを決めてください：\n"
            '- {{"action": "continue"}}：計画どおり次の未実行ステップを実行する；\n'
            '- {{"action": "revise", "steps": [{{"task": "...", "agent": "..."}}]}}：未実行のステップを'
            "すべて新しいものに置き換える（残りの修正回数 {replans_left}、追加できるステップは最大 {steps_left}）；\n"
            '- {{"action": "answer", "answer": "..."}}：結果で質問に答えられるとき。\n'
            "実行担当：\n{executors}\n\nJSON だけで答えてください。"
        ),
        default_executor="既定の実行担当（ツール：{tools}）",
        no_steps='計画にステップがありません。JSON だけで答えてください：{{"steps": [{{"task": "..."}}]}}。',
        too_many=(
            "計画のステップが {count} 個あります。上限は {max_steps} 個です。ステップをまとめて答え直してください。"
        ),
        unknown_agent="{agent!r} という実行担当はいません。実行担当は {agents} です。答え直してください。",
        no_decision=(
            'JSON オブジェクトを一つだけ返してください：{{"action": "continue"}}、'
            '{{"action": "revise", "steps": [...]}}、または {{"action": "answer", "answer": "..."}}。'
        ),
        status={"pending": "未実行", "done": "完了", "failed": "失敗", "skipped": "中止"},
        earlier="前のステップの結果：",
        answer_now='これ以上ステップは実行できません。{{"action": "answer", "answer": "..."}} で今すぐ答えてください。',
    ),
}


def words(pack: PromptPack) -> PlanWords:
    """The plan prompts in the pack's language (English when it has none)."""
    return PLAN_WORDS.get(pack.language, PLAN_WORDS["en"])


@dataclass(frozen=True)
class Replan:
    """What the replanner decided after a step."""

    action: Literal["continue", "revise", "answer"]
    steps: list[PlanStep]
    answer: str = ""


# ------------------------------------------------------------------------ prompts


def describe_executors(pack: PromptPack, tools: list[ToolSpec], agents: list[ToolSpec]) -> str:
    """The executors a plan step may name, one per line: the default one, then each sub-agent."""
    plain = ", ".join(t.name for t in tools if t.name not in {a.name for a in agents}) or "-"
    lines = [f"- {words(pack).default_executor.format(tools=plain)}"]
    lines += [f"- {a.name}: {' '.join(a.description.split())}" for a in agents]
    return "\n".join(lines)


def planner_request(
    pack: PromptPack, question: str, history: list[tuple[str, str]], executors: str, max_steps: int
) -> Request:
    """The planner's request: the instructions, the conversation so far and the question."""
    system = words(pack).planner.format(max_steps=max_steps, executors=executors)
    return Request(messages=[SystemMessage(content=system), UserMessage(content=_question(pack, history, question))])


def replanner_request(
    pack: PromptPack, question: str, steps: list[PlanStep], executors: str, replans_left: int, steps_left: int
) -> Request:
    """The replanner's request: the question and the plan with each step's status and result
    (with no steps left to run, it is told to answer)."""
    w = words(pack)
    system = w.replanner.format(executors=executors, replans_left=replans_left, steps_left=steps_left)
    if steps_left <= 0:
        system += "\n" + w.answer_now.format()
    lines = [f"{pack.question}: {question}", ""]
    for number, step in enumerate(steps, start=1):
        who = f" [{step.agent}]" if step.agent else ""
        lines.append(f"{number}. ({w.status[step.status]}){who} {step.task}")
        if step.result is not None:
            lines.append(f"   → {step.result}")
    return Request(messages=[SystemMessage(content=system), UserMessage(content="\n".join(lines))])


def checklist(steps: list[PlanStep]) -> str:
    """A plan as a checklist for people: ``1. [x] task (agent)``, one step per line."""
    marks = {"pending": " ", "done": "x", "failed": "!", "skipped": "-"}
    return "\n".join(
        f"{i}. [{marks[s.status]}] {s.task}" + (f" ({s.agent})" if s.agent else "")
        for i, s in enumerate(steps, start=1)
    )


def step_task(pack: PromptPack, steps: list[PlanStep], number: int) -> str:
    """What the executor of step ``number`` is asked: its task and the earlier steps' results."""
    earlier = [f"{i}. {s.task} → {s.result}" for i, s in enumerate(steps[: number - 1], start=1) if s.result]
    task = steps[number - 1].task
    return f"{task}\n\n{words(pack).earlier}\n" + "\n".join(earlier) if earlier else task


def _question(pack: PromptPack, history: list[tuple[str, str]], question: str) -> str:
    parts = []
    if history:
        parts.append(pack.history_header)
        parts += [f"{pack.user}: {asked}\n{pack.assistant}: {answered}" for asked, answered in history]
        parts.append("")
    parts.append(f"{pack.question}: {question}")
    return "\n".join(parts)


# ------------------------------------------------------------------------ reading

_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+?)\s*$")
_DEFAULT_NAMES = {"", "default", "executor", "none", "null"}
_NAMED = re.compile(r"^\[?@?([\w.\-]+)\]?\s*:\s*(.+)$")


def read_plan(pack: PromptPack, text: str, agents: set[str], max_steps: int) -> list[PlanStep]:
    """The steps of a planner reply: JSON (``{"steps": [...]}`` or a bare list) or a
    numbered list of tasks (``2. researcher: find ...`` names an executor). Raises ``PlanError``."""
    value = _json(text)
    if isinstance(value, dict):
        value = value.get("steps", value.get("plan"))
    raw: list[object]
    if isinstance(value, list):
        raw = value
    else:
        raw = [m.group(1) for line in text.splitlines() if (m := _LIST_ITEM.match(line))]
    return _steps(pack, raw, agents, max_steps)


def read_replan(pack: PromptPack, text: str, agents: set[str], max_steps: int) -> Replan:
    """The replanner's decision; a bare plan counts as a revision. Raises ``PlanError``."""
    value = _json(text)
    w = words(pack)
    if isinstance(value, dict):
        action = str(value.get("action", value.get("decision", ""))).strip().lower()
        if action == "continue":
            return Replan("continue", [])
        if action == "answer" and str(value.get("answer", "")).strip():
            return Replan("answer", [], str(value["answer"]).strip())
        if action == "revise" or "steps" in value:
            return Replan("revise", read_plan(pack, json.dumps(value), agents, max_steps))
    first = text.strip().split(None, 1)
    if first and first[0].strip(".:!").lower() == "continue":
        return Replan("continue", [])
    for label in (pack.labels.final_answer, "Final Answer", "Answer"):
        match = re.search(rf"{re.escape(label)}\s*[:：]\s*(.+)", text, re.IGNORECASE | re.DOTALL)
        if match and match.group(1).strip():
            return Replan("answer", [], match.group(1).strip())
    raise PlanError(w.no_decision)


def _json(text: str) -> object:
    """The first JSON object or list in ``text`` (fences and prose around it allowed)."""
    stripped = text.strip()
    if "[" in stripped and ("{" not in stripped or stripped.find("[") < stripped.find("{")):
        start, stop = stripped.find("["), stripped.rfind("]")
        try:
            return json.loads(stripped[start : stop + 1])
        except json.JSONDecodeError:
            pass
    value = parse_input(stripped)
    return value if isinstance(value, dict) else None


def _steps(pack: PromptPack, raw: list[object], agents: set[str], max_steps: int) -> list[PlanStep]:
    w = words(pack)
    steps: list[PlanStep] = []
    for item in raw:
        agent: str | None = None
        if isinstance(item, dict):
            task = str(item.get("task") or item.get("step") or "").strip()
            agent = str(item["agent"]).strip() if item.get("agent") else None
        else:
            task = str(item).strip()
            named = _NAMED.match(task)
            if named and named.group(1) in agents:
                agent, task = named.group(1), named.group(2).strip()
        if not task:
            continue
        if agent is not None and agent.lower() in _DEFAULT_NAMES:
            agent = None
        if agent is not None and agent not in agents:
            raise PlanError(w.unknown_agent.format(agent=agent, agents=", ".join(sorted(agents)) or "-"))
        steps.append(PlanStep(task=task, agent=agent))
    if not steps:
        raise PlanError(w.no_steps)
    if len(steps) > max_steps:
        raise PlanError(w.too_many.format(count=len(steps), max_steps=max_steps))
    return steps


__all__ = ["PLAN_WORDS", "PlanError", "PlanStep", "PlanWords", "Replan", "read_plan", "read_replan"]
