"""Reflexion: retry a rejected answer with a written reflection on what went wrong.

``Agent(reflect=Reflexion(evaluator=check, max_trials=3, window=3))``: each trial is a
ReAct run; an evaluator accepts its answer or says what is wrong with it; after a
rejected trial one call of the agent's model writes a reflection (what went wrong, what
to do differently), stored as an event; the next trial's prompt carries the last
``window`` reflections. ``max_trials`` is a hard cap.

Evaluators:

* a Python function ``check(answer) -> True | str`` (``check(answer, task)`` also works,
  and so does ``async def``): ``True`` accepts, a string is the feedback;
* a ``Tool`` (``@tool``) called with the answer as its one argument, read the same way;
* a ``Command(["python", "check.py"])``: the answer on stdin, the task in
  ``$REACTCHAT_TASK``; exit status 0 accepts, anything else rejects with its output;
* ``"model"`` (``MODEL_JUDGE``): the agent's own model judges (marked as such in the result).

With ``remember=True`` reflections outlive the session: they are stored under a
fingerprint of the agent and the task (at most ``memory_size`` per task, for
``memory_ttl`` seconds) and the first trial of the same task in any later session
starts with them.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import time
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reactchat.engine.session import EvaluatorKind, Trial
from reactchat.messages import Reply, Request, SystemMessage, Usage, UserMessage
from reactchat.protocols.packs import PromptPack
from reactchat.tools import Tool

MODEL_JUDGE = "model"
#: what a trial's answer and feedback may take in the reflection prompt (characters)
MAX_SHOWN = 4000


@dataclass(frozen=True)
class Command:
    """An evaluator that runs a command: the answer on stdin, the task in ``$REACTCHAT_TASK``.

    Exit status 0 accepts the answer; any other status rejects it with the command's
    output (stdout, then stderr) as the feedback. ``timeout`` seconds, then it is killed
    and the answer is rejected.
    """

    argv: Sequence[str]
    timeout: float = 60.0


Evaluator = Callable[..., Any] | Tool | Command | str


@dataclass
class Reflexion:
    """How an agent retries rejected answers (see the module docstring)."""

    evaluator: Evaluator
    max_trials: int = 3
    window: int = 3
    #: remember reflections across sessions, keyed by a fingerprint of the task
    remember: bool = False
    memory_size: int = 20
    memory_ttl: float = 30 * 86400.0

    def __post_init__(self) -> None:
        if self.max_trials < 1:
            raise ValueError("Reflexion.max_trials must be at least 1")
        if self.window < 0:
            raise ValueError("Reflexion.window must be 0 or more")
        if isinstance(self.evaluator, str) and self.evaluator != MODEL_JUDGE:
            raise ValueError(f"unknown evaluator {self.evaluator!r}: use a function, a Tool, a Command or 'model'")

    @property
    def kind(self) -> EvaluatorKind:
        """What kind of evaluator judges the trials."""
        if isinstance(self.evaluator, str):
            return "model"
        if isinstance(self.evaluator, Command):
            return "command"
        if isinstance(self.evaluator, Tool):
            return "tool"
        return "function"


@dataclass(frozen=True)
class Verdict:
    """An evaluator's judgement of one answer (``usage``: the model judge's call)."""

    accepted: bool
    feedback: str = ""
    usage: Usage | None = None


#: one model call (the agent's loop passes its own, so the call is recorded and traced like any)
Complete = Callable[[Request], Awaitable[Reply]]


# ------------------------------------------------------------------------ evaluators


async def evaluate(reflexion: Reflexion, answer: str, task: str, complete: Complete, pack: PromptPack) -> Verdict:
    """Run the evaluator on an answer (``complete`` is the model call of the ``"model"`` judge).

    An evaluator that fails rejects the answer with its error as the feedback: the failure
    is the model's to route around, like a tool's. A failing model judge raises (it is the
    agent's own model: the turn fails as it would on any of its calls).
    """
    judge = reflexion.evaluator
    if isinstance(judge, str):
        return await _model_judge(complete, pack, answer, task)
    try:
        if isinstance(judge, Command):
            return await _command(judge, answer, task)
        if isinstance(judge, Tool):
            return _verdict(await judge.run({judge.params[0]: answer} if judge.params else {}))
        return _verdict(await _call(judge, answer, task))
    except Exception as error:
        return Verdict(False, f"the evaluator raised {type(error).__name__}: {error}")


async def _call(fn: Callable[..., Any], answer: str, task: str) -> Any:
    try:
        takes_task = len(inspect.signature(fn).parameters) >= 2
    except (TypeError, ValueError):
        takes_task = False
    value = fn(answer, task) if takes_task else fn(answer)
    if inspect.isawaitable(value):
        value = await value
    return value


def _verdict(value: Any) -> Verdict:
    if value is True or value is None:
        return Verdict(True)
    if value is False:
        return Verdict(False, "the evaluator rejected the answer without saying why")
    return Verdict(False, str(value))


async def _command(command: Command, answer: str, task: str) -> Verdict:
    proc = await asyncio.create_subprocess_exec(
        *command.argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "REACTCHAT_TASK": task},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(answer.encode()), command.timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return Verdict(False, f"the evaluator command did not finish within {command.timeout:g} s")
    if proc.returncode == 0:
        return Verdict(True)
    text = (out.decode(errors="replace") + err.decode(errors="replace")).strip()
    return Verdict(False, text or f"the evaluator command exited with status {proc.returncode}")


async def _model_judge(complete: Complete, pack: PromptPack, answer: str, task: str) -> Verdict:
    w = words(pack)
    request = Request(
        messages=[
            SystemMessage(content=w.judge),
            UserMessage(content=f"{pack.question}: {task}\n\n{w.answer}: {answer[:MAX_SHOWN]}"),
        ]
    )
    reply = await complete(request)
    text = reply.text.strip()
    head = text.split(None, 1)[0].strip(".:!*").upper() if text else ""
    if head == "ACCEPT":
        return Verdict(True, usage=reply.usage)
    feedback = text.split(":", 1)[1].strip() if head == "REJECT" and ":" in text else text
    return Verdict(False, feedback or w.no_reason, reply.usage)


# ------------------------------------------------------------------------ prompts


@dataclass(frozen=True)
class ReflectWords:
    """The Reflexion prompts in one language."""

    reflect: str
    lessons: str
    judge: str
    answer: str
    feedback: str
    steps: str
    no_reason: str


REFLECT_WORDS: dict[str, ReflectWords] = {
    "en": ReflectWords(
        reflect=(
            "You attempted the task below and your answer was rejected. In two or three sentences, "
            "say what went wrong and what to do differently on the next attempt. Write only the "
            "reflection: it will be shown to you before you try again."
        ),
        lessons=(
            "You have attempted this question before and your answers were rejected. Lessons from "
            "those attempts (do not repeat their mistakes):"
        ),
        judge=(
            "You check answers. Given a question and an answer, reply ACCEPT if the answer is correct "
            "and complete, otherwise REJECT: followed by what is wrong or missing."
        ),
        answer="Answer",
        feedback="Why it was rejected",
        steps="What you did",
        no_reason="the judge rejected the answer without saying why",
    ),
    "fr": ReflectWords(
        reflect=(
            "Vous avez tenté la tâche ci-dessous et votre réponse a été rejetée. En deux ou trois "
            "phrases, dites ce qui n'a pas marché et ce qu'il faut faire autrement à la prochaine "
            "tentative. N'écrivez que la réflexion : elle vous sera montrée avant le nouvel essai."
        ),
        lessons=(
            "Vous avez déjà tenté cette question et vos réponses ont été rejetées. Leçons de ces "
            "tentatives (ne répétez pas leurs erreurs) :"
        ),
        judge=(
            "Vous vérifiez des réponses. Pour une question et une réponse, répondez ACCEPT si la "
            "réponse est juste et complète, sinon REJECT: suivi de ce qui est faux ou manquant."
        ),
        answer="Réponse",
        feedback="Motif du rejet",
        steps="Ce que vous avez fait",
        no_reason="le juge a rejeté la réponse sans dire pourquoi",
    ),
    "ja": ReflectWords(
        reflect=(
            "あなたは次のタスクに取り組みましたが、回答は却下されました。何がうまくいかなかったか、"
            "次の試みで何を変えるべきかを二、三文で書いてください。振り返りだけを書いてください。"
            "次に試す前にあなたに示されます。"
        ),
        lessons="この質問には以前にも取り組み、回答は却下されました。その試みからの教訓（同じ誤りを繰り返さないこと）：",
        judge=(
            "あなたは回答を確認します。質問と回答が与えられたら、回答が正しく完全なら ACCEPT、"
            "そうでなければ REJECT: の後に何が誤りまたは不足しているかを書いてください。"
        ),
        answer="回答",
        feedback="却下の理由",
        steps="行ったこと",
        no_reason="判定者は理由を述べずに回答を却下しました",
    ),
}


def words(pack: PromptPack) -> ReflectWords:
    """The Reflexion prompts in the pack's language (English when it has none)."""
    return REFLECT_WORDS.get(pack.language, REFLECT_WORDS["en"])


def reflection_request(pack: PromptPack, task: str, steps: str, answer: str, feedback: str) -> Request:
    """The request for a reflection on a rejected trial."""
    w = words(pack)
    parts = [f"{pack.question}: {task}"]
    if steps:
        parts.append(f"{w.steps}:\n{steps[-MAX_SHOWN:]}")
    parts += [f"{w.answer}: {answer[:MAX_SHOWN]}", f"{w.feedback}: {feedback[:MAX_SHOWN]}"]
    return Request(messages=[SystemMessage(content=w.reflect), UserMessage(content="\n\n".join(parts))])


def lessons(pack: PromptPack, reflections: Sequence[str]) -> str:
    """The text a trial's prompt carries: the reflections of earlier rejected trials."""
    if not reflections:
        return ""
    numbered = "\n".join(f"{i}. {' '.join(r.split())}" for i, r in enumerate(reflections, start=1))
    return f"{words(pack).lessons}\n{numbered}"


# ------------------------------------------------------------------------ memory


def fingerprint(agent: str, task: str) -> str:
    """The key under which reflections on a task are remembered: the agent's name and the
    task, normalised (Unicode NFKC, case, whitespace), hashed."""
    text = " ".join(unicodedata.normalize("NFKC", task).casefold().split())
    return hashlib.sha256(f"{agent}\n{text}".encode()).hexdigest()[:32]


@runtime_checkable
class ReflectionStore(Protocol):
    """A store that can keep reflections across sessions (the memory, SQLite and PostgreSQL stores)."""

    async def reflections(self, key: str, limit: int, since: float) -> list[str]:
        """The newest ``limit`` reflections under ``key`` made after ``since``, oldest first."""
        ...

    async def add_reflection(self, key: str, text: str, at: float, keep: int, expire_before: float) -> None:
        """Keep a reflection made at ``at``; only the newest ``keep`` under ``key`` stay, none from
        before ``expire_before``."""
        ...


@dataclass
class ReflectionMemory:
    """Reflections remembered across sessions in a store, with a bound and an expiry."""

    store: Any
    reflexion: Reflexion
    clock: Callable[[], float] = field(default=time.time)

    def _store(self) -> ReflectionStore:
        if not isinstance(self.store, ReflectionStore):
            raise TypeError(
                f"{type(self.store).__name__} cannot remember reflections across sessions: use a memory:, "
                "sqlite:/// or postgresql:// store, or Reflexion(remember=False)"
            )
        return self.store

    async def recall(self, key: str) -> list[str]:
        """The remembered reflections on a task, oldest first, at most ``window`` of them."""
        if not self.reflexion.remember or not self.reflexion.window:
            return []
        since = self.clock() - self.reflexion.memory_ttl
        return await self._store().reflections(key, self.reflexion.window, since)

    async def keep(self, key: str, reflection: str) -> None:
        """Remember a reflection on a task."""
        if self.reflexion.remember and reflection.strip():
            now = self.clock()
            expire = now - self.reflexion.memory_ttl
            await self._store().add_reflection(key, reflection, now, self.reflexion.memory_size, expire)


__all__ = [
    "MODEL_JUDGE",
    "Command",
    "ReflectionMemory",
    "ReflectionStore",
    "Reflexion",
    "Trial",
    "Verdict",
    "evaluate",
    "fingerprint",
    "lessons",
    "reflection_request",
]
