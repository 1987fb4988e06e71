"""The real-output corpus: is every case read as the model that wrote it intended?

    python benchmarks/real_output.py            # share per form, and every miss

The cases (``tests/fixtures/real_output.txt``) are steps written in the shapes real
models produce: the ReAct paper's numbered trajectories and ``Finish[…]``, LangChain's
JSON action blobs, ``<think>`` reasoning, and the in-text tool calls of open-weight
chat templates (Hermes/Qwen, Llama 3.x, Mistral). Text-protocol cases go through
``reactchat.react.parse``, native ones through ``NativeTranscript.read``, the
native protocol's own reading of a reply.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactchat import FormatError
from reactchat.messages import Reply, TextPart, ToolSpec
from reactchat.protocols.native import NativeTranscript
from reactchat.protocols.packs import get_pack
from reactchat.react import Action, FinalAnswer, parse

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real_output.txt"


@dataclass(frozen=True)
class Case:
    name: str
    form: str
    protocol: str
    tools: tuple[str, ...]
    expect: dict[str, Any]
    text: str


def load(path: Path = CORPUS) -> list[Case]:
    """The corpus's cases, in file order."""
    cases: list[Case] = []
    blocks = path.read_text(encoding="utf-8").split("\n### ")[1:]
    for block in blocks:
        head, _, text = block.partition("\n---\n")
        name, *lines = head.splitlines()
        fields = dict(line.split(": ", 1) for line in lines)
        cases.append(
            Case(
                name=name.strip(),
                form=fields["form"],
                protocol=fields["protocol"],
                tools=tuple(t.strip() for t in fields["tools"].split(",")),
                expect=json.loads(fields["expect"]),
                text=text.removesuffix("\n"),
            )
        )
    return cases


def read(case: Case) -> dict[str, Any]:
    """What reactchat makes of the case, in the shape of ``Case.expect``."""
    if case.protocol == "react":
        try:
            step = parse(case.text, "en", ", ".join(case.tools))
        except FormatError as error:
            return {"error": error.kind}
        if isinstance(step, FinalAnswer):
            return {"answer": step.answer}
        assert isinstance(step, Action)
        return {"tool": step.tool, "input": step.input}
    specs = [ToolSpec(name=name, description=name, input_schema={"type": "object"}) for name in case.tools]
    transcript = NativeTranscript(get_pack("en"), specs, [], "question")
    decision = transcript.read(Reply(parts=[TextPart(text=case.text)]))
    if decision.answer is not None:
        return {"answer": decision.answer}
    return {"calls": [[tool, value] for _, tool, value in decision.calls], "text": decision.raw}


def score(cases: list[Case]) -> tuple[dict[str, tuple[int, int]], list[tuple[Case, dict[str, Any]]]]:
    """Per form ``(read as intended, cases)``, and the cases that were not."""
    per_form: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses: list[tuple[Case, dict[str, Any]]] = []
    for case in cases:
        got = read(case)
        per_form[case.form][1] += 1
        if got == case.expect:
            per_form[case.form][0] += 1
        else:
            misses.append((case, got))
    return {form: (ok, n) for form, (ok, n) in per_form.items()}, misses


def report() -> float:
    """Print the share per form and every miss; return the overall share."""
    cases = load()
    per_form, misses = score(cases)
    total = sum(n for _, n in per_form.values())
    right = sum(ok for ok, _ in per_form.values())
    print(f"real-output corpus: {right}/{total} cases read as intended ({right / total:.0%})")
    for form, (ok, n) in sorted(per_form.items()):
        print(f"  {form:<28}{ok:>3}/{n}")
    for case, got in misses:
        print(f"  MISS {case.name}: expected {case.expect}, got {got}")
    return right / total


if __name__ == "__main__":
    report()
