"""``LocalModel``: a GGUF model run in-process by llama.cpp (``llama-cpp-python``).

``model="local"`` runs the embedded default; ``local:gemma-270m`` and
``local:smollm2-135m`` name the embedded models (see ``_embedded``);
``local:/path/to/model.gguf`` runs any other GGUF file.

* **Lazy.** Importing this module imports neither ``llama_cpp`` nor the model packages;
  the model is loaded on the first call, once per process (a module-level cache keyed
  by file and context settings), in a worker thread.
* **Prompt.** Rendered with the model's own chat template from the GGUF metadata, or
  as plain text for a base model without one (see ``_render``); the ReAct scratchpad is
  continued, not answered. The text protocol shows its worked example (``few_shot``).
* **Grammar.** Text ReAct steps are constrained to valid steps and native tool calls
  to the tool schemas (see ``_grammar``); ``grammar=False`` turns this off.
* **Prefix reuse.** The ReAct prompt only grows, and llama.cpp keeps the tokens of the
  previous call in its KV cache: a step evaluates only the tokens added since. Each
  reply's ``usage`` says how many prompt tokens were actually evaluated, from
  llama.cpp's own counters; ``last_stats`` / ``calls`` add the seconds.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from reactchat.messages import Reply, Request, StopReason, TextPart, ToolCallPart, Usage
from reactchat.models._base import ContextTooLong
from reactchat.models._embedded import EMBEDDED
from reactchat.models._grammar import Limits, final_answer_grammar, react_step_grammar, tool_call_grammar
from reactchat.models._llama import Runtime, Sampling, Watch, generate, import_llama_cpp, load
from reactchat.models._render import chat_messages, render
from reactchat.protocols.formats import calls_in_text

__all__ = ["DEFAULT_EMBEDDED", "EMBEDDED", "CallStats", "Limits", "LocalModel", "default_model_path", "from_spec"]

#: the embedded model ``model="local"`` runs, chosen by measurement (docs/local-model.md)
DEFAULT_EMBEDDED = "gemma-270m"
# tokens a reply needs at the least; with less room the prompt is "too long"
_MIN_ROOM = 64


def default_model_path() -> Path:
    """The default embedded model's file (joined into the cache first if it must be)."""
    return EMBEDDED[DEFAULT_EMBEDDED]()


@dataclass
class CallStats:
    """What one model call cost."""

    prompt_tokens: int
    #: prompt tokens llama.cpp actually evaluated (the rest came from its KV cache)
    evaluated_tokens: int
    output_tokens: int
    #: seconds spent evaluating the prompt (up to the first generated token)
    prompt_seconds: float
    #: seconds spent generating after the first token
    decode_seconds: float
    seconds: float
    grammar: bool
    stop_reason: str
    #: CPU seconds of the whole process during the call: on a busy machine this says
    #: what the call cost where wall-clock seconds also count the wait for a core
    cpu_seconds: float = 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        """Generation speed, excluding prompt evaluation."""
        generated = self.output_tokens - 1  # the first token's time is in prompt_seconds
        return generated / self.decode_seconds if generated > 0 and self.decode_seconds > 0 else 0.0


class LocalModel:
    """A GGUF model run in-process by llama.cpp.

    ``path`` is a GGUF file or the name of an embedded model (``gemma-270m``,
    ``smollm2-135m``); ``None`` is the embedded default. ``few_shot`` asks the text
    protocol to show its worked example (small models need it). ``kept_sessions`` bounds
    the KV states kept for sessions that take turns (see ``_states``). ``grammar=True`` constrains every
    ReAct step (and native tool call) to a valid one; ``limits`` caps its free-text
    parts in characters (raise ``Limits.string`` for tools that take long text). Decoding is greedy by default
    (``temperature=0``) so that runs are reproducible.
    """

    supports_tools = True
    #: the embedded models read text only: images reach them as notes
    supports_images = False

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        grammar: bool = True,
        temperature: float = 0.0,
        top_p: float = 0.95,
        top_k: int = 40,
        repeat_penalty: float = 1.0,
        max_tokens: int = 384,
        limits: Limits | None = None,
        name: str | None = None,
        few_shot: bool = True,
        kept_sessions: int = 8,
    ) -> None:
        embedded = DEFAULT_EMBEDDED if path is None else str(path) if str(path) in EMBEDDED else None
        #: the embedded model's name, or None for a file given by path
        self.embedded = embedded
        self.path = Path(path) if path is not None and embedded is None else None
        self.n_ctx = n_ctx
        # half the cores, as llama.cpp advises: its threads spin at a barrier, and when they
        # outnumber the free cores decoding slows down twentyfold (measured on 2 busy cores)
        self.n_threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        self.n_gpu_layers = n_gpu_layers
        self.grammar = grammar
        #: the loop may rely on the model to write only valid steps
        self.supports_grammar = grammar
        self.sampling = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, repeat_penalty=repeat_penalty)
        self.max_tokens = max_tokens
        #: character caps on thoughts, answers and JSON strings under the grammar
        self.limits = limits or Limits()
        self.name = name or f"local:{embedded or (self.path.stem if self.path else '')}"
        #: the agent shows the prompt pack's worked example to this model
        self.few_shot = few_shot
        #: how many other sessions' KV states the loaded model keeps (0: none), so that
        #: sessions taking turns each evaluate only their new tokens
        self.kept_sessions = kept_sessions
        #: statistics of the calls made through this instance, oldest first (the last
        #: thousand: a long-running server must not keep them all)
        self.calls: deque[CallStats] = deque(maxlen=1000)

    @property
    def context_tokens(self) -> int:
        """The context window in tokens (the engine budgets the prompt by it)."""
        return self.n_ctx

    @property
    def trained_context(self) -> int:
        """The window the GGUF was trained with, read from the file (loads the model)."""
        return self._runtime().trained_context

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model's own tokenizer (loads the model)."""
        return self._runtime().count(text)

    @property
    def last_stats(self) -> CallStats | None:
        """Statistics of the most recent call, or None before the first."""
        return self.calls[-1] if self.calls else None

    def load(self) -> None:
        """Load the model now rather than on the first call (blocking)."""
        self._runtime()

    def reset(self) -> None:
        """Empty the loaded model's KV cache and saved session states, so that the next call
        evaluates its whole prompt as a fresh process would (a prefix carried over from an
        unrelated prompt gives logits a few bits off, which can flip greedy near-ties)."""
        self._runtime().clear()

    def _runtime(self) -> Runtime:
        path = self.path if self.path is not None else EMBEDDED[self.embedded or DEFAULT_EMBEDDED]()
        return load(path, self.n_ctx, self.n_threads, self.n_gpu_layers)

    def render(self, request: Request) -> str:
        """The prompt text this model would be given for ``request`` (loads the model)."""
        chat, prefill = chat_messages(request)
        return render(self._runtime().template, chat, prefill)[0] + prefill

    def grammar_for(self, request: Request) -> str | None:
        """The GBNF grammar that would constrain the reply to ``request``, if any."""
        return self._grammar_for(request, chat_messages(request)[1]) if self.grammar else None

    async def complete(self, request: Request) -> Reply:
        """Answer one request in a worker thread, so the event loop keeps running.

        The text streams to ``request.on_delta`` as it is generated; a cancelled call stops
        generating at the next token (the thread does not run on to ``max_tokens``).
        """
        on_delta = getattr(request, "on_delta", None)
        watch = Watch()
        if on_delta is not None:
            loop = asyncio.get_running_loop()
            watch.on_text = lambda text: loop.call_soon_threadsafe(on_delta, text)
        try:
            return await asyncio.to_thread(self.complete_sync, request, watch)
        except asyncio.CancelledError:
            watch.stop.set()
            raise

    def complete_sync(self, request: Request, watch: Watch | None = None) -> Reply:
        """Answer one request, blocking (``watch`` follows or stops it from another thread)."""
        runtime = self._runtime()
        chat, prefill = chat_messages(request)
        head, stops = render(runtime.template, chat, prefill)
        grammar_text = self._grammar_for(request, prefill) if self.grammar else None
        text, stats = self._generate(runtime, head, prefill, request, grammar_text, [*request.stop, *stops], watch)
        self.calls.append(stats)
        usage = Usage(
            input_tokens=stats.prompt_tokens,
            output_tokens=stats.output_tokens,
            evaluated_tokens=stats.evaluated_tokens,
        )
        # a reply cut short in a loop is as unfinished as one cut by the token limit
        reason = "max_tokens" if stats.stop_reason == "repetition" else stats.stop_reason
        stop_reason: StopReason = reason  # type: ignore[assignment]
        if request.tools and not prefill and (found := calls_in_text(text, [t.name for t in request.tools])):
            calls: list[TextPart | ToolCallPart] = [ToolCallPart(id=i, name=n, input=v) for i, n, v in found.calls]
            return Reply(parts=calls, stop_reason="tool_use", usage=usage)
        return Reply(parts=[TextPart(text=text)], stop_reason=stop_reason, usage=usage)

    def _grammar_for(self, request: Request, prefill: str) -> str | None:
        leading_space = not prefill[-1:].isspace()
        if request.react is not None:
            # the grammar describes what follows "Thought:"; any other prefill is free text
            if not prefill.rstrip().endswith(f"{request.react.thought}:"):
                return None
            return react_step_grammar(
                request.react,
                request.react_tools,
                leading_space=leading_space,
                limits=self.limits,
                answer_schema=request.output_schema,
            )
        if prefill.rstrip().endswith(":") and request.stop:
            # a scratchpad ending in a label with no step grammar: the engine's last call,
            # "Final Answer:" once the step budget is spent; the value is one line
            return final_answer_grammar(
                leading_space=leading_space, limits=self.limits, answer_schema=request.output_schema
            )
        if request.tools and not prefill:
            return tool_call_grammar(request.tools, limits=self.limits, answer_schema=request.output_schema)
        return None

    def _generate(
        self,
        runtime: Runtime,
        head: str,
        prefill: str,
        request: Request,
        grammar_text: str | None,
        stops: list[str],
        watch: Watch | None = None,
    ) -> tuple[str, CallStats]:
        llama_cpp = import_llama_cpp()
        llama = runtime.llama
        if grammar_text:
            runtime.check_grammar(grammar_text)
        with runtime.lock:
            runtime.states.max_states = self.kept_sessions
            runtime.recall(head, prefill)
            tokens = runtime.tokenize(head, prefill)
            budget = self.n_ctx - len(tokens)
            # a step squeezed into a few tokens would not parse: ask the engine to shrink
            if budget < _MIN_ROOM:
                raise ContextTooLong(
                    f"the prompt has {len(tokens)} tokens and the context holds {self.n_ctx}: "
                    "use LocalModel(n_ctx=...) with a larger value"
                )
            max_tokens = min(request.max_tokens or self.max_tokens, budget)
            llama_cpp.llama_perf_context_reset(llama.ctx)
            started, cpu_started = time.perf_counter(), time.process_time()
            try:
                sample = generate(llama_cpp, llama, tokens, grammar_text, stops, max_tokens, self.sampling, watch)
            except BaseException:
                runtime.forget()
                raise
            ended, cpu = time.perf_counter(), time.process_time() - cpu_started
            perf = llama_cpp.llama_perf_context(llama.ctx)
            out = sample.tokens
            # the last sampled token was never fed back, so it is not in the cache
            runtime.remember(tokens + out if sample.stop_reason == "end" else tokens + out[:-1])
        first_at = sample.first_at or ended
        stats = CallStats(
            prompt_tokens=len(tokens),
            evaluated_tokens=int(perf.n_p_eval),
            output_tokens=len(out),
            prompt_seconds=first_at - started,
            decode_seconds=ended - first_at,
            seconds=ended - started,
            grammar=grammar_text is not None,
            stop_reason=sample.stop_reason,
            cpu_seconds=cpu,
        )
        return sample.text, stats


def from_spec(rest: str) -> LocalModel:
    """``local`` -> the embedded default; ``local:gemma-270m`` -> that embedded model;
    ``local:/path/model.gguf`` -> that file."""
    return LocalModel(rest or None)
