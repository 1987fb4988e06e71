"""Two sessions taking turns on the embedded model: prompt vs evaluated tokens per step.

    python benchmarks/local_sessions.py                       # the default model
    python benchmarks/local_sessions.py --model smollm2-135m --steps 5

Two text ReAct transcripts (different questions and tools) alternate on one loaded
model, step by step: A1, B1, A2, B2, ... Each step appends the model's own reply and
an observation to its transcript, as the engine does. Run twice in one process:
``kept_sessions=0`` (one KV cache: each session finds the other's tokens there) and
the default (the other session's KV state is saved and restored). A step that
evaluates only its new tokens shows ``evaluated`` ≈ what was appended since its last
step.
"""

from __future__ import annotations

import argparse
import os
import time

from reactchat import calculator
from reactchat.messages import ToolSpec
from reactchat.models.local import LocalModel
from reactchat.protocols.packs import get_pack
from reactchat.protocols.react import ReactTranscript

LOOKUP = ToolSpec(
    name="country_facts",
    description="Look up the capital, currency or population of a country.",
    input_schema={
        "type": "object",
        "properties": {"country": {"type": "string"}, "field": {"enum": ["capital", "currency", "population"]}},
        "required": ["country", "field"],
    },
)


def run(model: LocalModel, steps: int) -> list[tuple[str, int, int, int, float]]:
    """``(session, step, prompt tokens, evaluated tokens, seconds)`` for each call."""
    pack = get_pack("en")
    sessions = {
        "A": ReactTranscript(pack, [calculator.spec], [], "What is 80.16 * 1.15?", few_shot=model.few_shot),
        "B": ReactTranscript(pack, [LOOKUP], [], "What currency does Japan use?", few_shot=model.few_shot),
    }
    rows = []
    for step in range(1, steps + 1):
        for name, transcript in sessions.items():
            reply = model.complete_sync(transcript.request())
            stats = model.calls[-1]
            rows.append((name, step, stats.prompt_tokens, stats.evaluated_tokens, stats.seconds))
            # the engine appends the step and its observation; so does this loop, whatever the step says
            transcript.add_step(reply.text, "", [])
            transcript.add_observation(f"{name}{step}", f"result {step} of session {name}: nothing new yet.")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="an embedded model (gemma-270m, smollm2-135m) or a GGUF file")
    parser.add_argument("--steps", type=int, default=5, help="steps per session")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    results = {}
    for label, kept in (("before (one cache)", 0), ("after (states kept)", 8)):
        model = LocalModel(args.model, n_threads=args.threads, max_tokens=64, kept_sessions=kept)
        runtime = model._runtime()
        runtime.states.clear()
        runtime.forget()
        started = time.perf_counter()
        results[label] = (run(model, args.steps), time.perf_counter() - started, runtime.states.size)
    print(f"model: {model.name}; two sessions, {args.steps} steps each, interleaved A1 B1 A2 B2 ...")
    print(f"{'step':<6}" + "".join(f"{label + ': prompt / evaluated':>40}" for label in results))
    before, after = (rows for rows, _, _ in results.values())
    for (name, step, prompt, evaluated, _), (_, _, prompt2, evaluated2, _) in zip(before, after, strict=True):
        print(f"{name}{step:<5}" + f"{prompt:>31} / {evaluated:<6}" + f"{prompt2:>31} / {evaluated2:<6}")
    for label, (rows, seconds, held) in results.items():
        later = [evaluated for _, step, _, evaluated, _ in rows if step > 1]
        print(
            f"{label}: evaluated tokens per later step {sum(later) / len(later):.1f}, "
            f"total {seconds:.1f} s, saved states {held / 2**20:.1f} MiB"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
