"""llama.cpp mechanics for ``LocalModel``: loading once per process, the token cache, sampling.

Nothing here knows about messages or protocols: ``Runtime`` holds one loaded model and
what its KV cache contains, ``generate`` turns prompt tokens into a ``Sample``.
"""

from __future__ import annotations

import atexit
import bisect
import ctypes
import importlib
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactchat.models._states import MIN_SAVED_BYTES, SavedState, SessionStates, capture, common_prefix, restore

INSTALL_HINT = "pip install 'reactchat[local]'"


@dataclass
class Runtime:
    """One loaded model; calls to it are serialized by ``lock``."""

    llama: Any
    #: llama_cpp's Jinja2ChatFormatter for the GGUF's chat template; None when the file has
    #: none (a base model): the prompt is then plain text
    template: Any
    bos_text: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the text (bytes) and tokens now in the KV cache, with each token's end offset
    cached_text: bytes = b""
    cached_tokens: list[int] = field(default_factory=list)
    cached_ends: list[int] = field(default_factory=list)
    checked_grammars: set[str] = field(default_factory=set)
    #: the KV states of other sessions, restored when their next step comes
    states: SessionStates = field(default_factory=SessionStates)

    def recall(self, head: str, prefill: str) -> None:
        """Before a call: save the cache if the call would overwrite a session's state, and
        restore the saved state that shares more of this prompt than the cache does."""
        text = self.text(head, prefill)
        current = common_prefix(text, self.cached_text)
        if len(self.cached_text) - current >= MIN_SAVED_BYTES and self.states.max_states > 0:
            data = capture(import_llama_cpp(), self.llama)
            self.states.save(SavedState(self.cached_text, self.cached_tokens, self.cached_ends, data))
        # looked up after saving: a save may drop the states it extends, or the oldest
        key, shared = self.states.best(text)
        if key is not None and shared > current:
            state = self.states.take(key)
            if restore(import_llama_cpp(), self.llama, state.data, state.tokens):
                self.cached_text, self.cached_tokens, self.cached_ends = state.text, state.tokens, state.ends
            else:
                self.forget()

    def text(self, head: str, prefill: str) -> bytes:
        """The prompt as the cache records it: with the BOS token's text when tokenizing
        adds one (a plain-text prompt), since the cached text comes from the tokens; saved
        states are matched by it."""
        bos = self.bos_text if self.bos_text and not head.startswith(self.bos_text) else ""
        return (bos + head + prefill).encode()

    def count(self, text: str) -> int:
        """How many tokens ``text`` is for this model (no BOS, special tokens as plain text)."""
        with self.lock:
            return len(self.llama.tokenize(text.encode(), add_bos=False, special=False))

    @property
    def trained_context(self) -> int:
        """The context window the GGUF was trained with (``n_ctx_train``: the file's
        ``<architecture>.context_length`` metadata, as llama.cpp reads it)."""
        metadata = self.llama.metadata
        return int(metadata[f"{metadata['general.architecture']}.context_length"])

    def tokenize(self, head: str, prefill: str) -> list[int]:
        """Tokens of ``head + prefill``, reusing the cached tokens of a shared prefix.

        Re-tokenizing the previous prompt plus the generated text does not always give
        back the tokens the model generated (a grammar often forces odd splits), and
        llama.cpp's cache matches tokens, not text; keeping the cached tokens for the
        common text prefix makes a step evaluate only what is new.
        """
        llama = self.llama
        # without the BOS text: a plain-text prompt (Gemma) is tokenized afresh each step, and
        # its generated tokens are reused only as far as they match that tokenization;
        # measured, the base model does worse when it sees its own grammar-forced splits
        text = (head + prefill).encode()
        common = common_prefix(text, self.cached_text)
        if common >= len(head.encode()):
            kept = bisect.bisect_right(self.cached_ends, common)
            start = self.cached_ends[kept - 1] if kept else 0
            if kept:
                rest = text[start:]
                return self.cached_tokens[:kept] + (llama.tokenize(rest, add_bos=False, special=False) if rest else [])
        # special tokens are parsed in the rendered template only, never in the scratchpad
        add_bos = not (self.bos_text and head.startswith(self.bos_text))
        tokens: list[int] = llama.tokenize(head.encode(), add_bos=add_bos, special=True)
        if prefill:
            tokens += llama.tokenize(prefill.encode(), add_bos=False, special=False)
        return tokens

    def remember(self, tokens: list[int]) -> None:
        """Record the tokens now in the KV cache (prompt + fed-back generated tokens)."""
        same = 0
        for old, new in zip(self.cached_tokens, tokens, strict=False):
            if old != new:
                break
            same += 1
        start = self.cached_ends[same - 1] if same else 0
        pieces = [self.llama.detokenize([t], special=True) for t in tokens[same:]]
        self.cached_text = self.cached_text[:start] + b"".join(pieces)
        self.cached_ends = (
            self.cached_ends[:same] + list(itertools.accumulate((len(p) for p in pieces), initial=start))[1:]
        )
        self.cached_tokens = list(tokens)

    def check_grammar(self, text: str) -> None:
        """Raise if llama.cpp cannot parse ``text`` (it would crash on a null sampler)."""
        if text in self.checked_grammars:
            return
        llama_cpp = import_llama_cpp()
        sampler = llama_cpp.llama_sampler_init_grammar(self.llama._model.vocab, text.encode(), b"root")
        if not sampler:
            raise ValueError(f"llama.cpp rejected the grammar built from the tool schemas:\n{text}")
        llama_cpp.llama_sampler_free(sampler)
        self.checked_grammars.add(text)

    def forget(self) -> None:
        """The KV cache no longer matches what was recorded (a call failed midway)."""
        self.cached_text, self.cached_tokens, self.cached_ends = b"", [], []

    def clear(self) -> None:
        """Empty the KV cache and the saved states: the next call starts as in a fresh process."""
        with self.lock:
            self.forget()
            self.states.clear()
            self.llama.reset()
            self.llama._ctx.kv_cache_clear()


_RUNTIMES: dict[tuple[str, int, int, int], Runtime] = {}
_LOAD_LOCK = threading.Lock()


def import_llama_cpp() -> Any:
    try:
        # through importlib: typing must not depend on whether the extra is installed
        return importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ImportError(f"model='local' needs llama-cpp-python: {INSTALL_HINT}") from exc


def load(path: Path, n_ctx: int, n_threads: int, n_gpu_layers: int) -> Runtime:
    key = (str(path.resolve()), n_ctx, n_threads, n_gpu_layers)
    with _LOAD_LOCK:
        if key in _RUNTIMES:
            return _RUNTIMES[key]
        llama_cpp = import_llama_cpp()
        chat_format: Any = importlib.import_module("llama_cpp.llama_chat_format")

        if not path.is_file():
            raise FileNotFoundError(f"no GGUF model file at {path}")
        # llama.cpp prints notes while it creates the context (Gemma's "full-size SWA
        # cache") whatever verbose says: they are not for the user
        with importlib.import_module("llama_cpp._utils").suppress_stdout_stderr(disable=False):
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                # prompt batches too: by default they use every core, however busy
                n_threads_batch=n_threads,
                n_gpu_layers=n_gpu_layers,
                verbose=False,
            )
        bos, eos = llama.token_bos(), llama.token_eos()
        bos_text = llama._model.token_get_text(bos) if bos >= 0 else ""
        eos_text = llama._model.token_get_text(eos) if eos >= 0 else ""
        source = llama.metadata.get("tokenizer.chat_template")
        template = (
            chat_format.Jinja2ChatFormatter(
                template=source, eos_token=eos_text, bos_token=bos_text, add_generation_prompt=True
            )
            if source
            else None
        )
        runtime = Runtime(llama=llama, template=template, bos_text=bos_text)
        if not _RUNTIMES:
            atexit.register(_close_all)
        _RUNTIMES[key] = runtime
        return runtime


def _close_all() -> None:
    # free the models while llama_cpp is still importable: its finalizer fails at shutdown
    for runtime in _RUNTIMES.values():
        runtime.llama.close()
    _RUNTIMES.clear()
    # llama_cpp keeps two /dev/null files open for its output suppression and never closes
    # them: Python reports them as unclosed (ResourceWarning) when the interpreter exits
    utils = importlib.import_module("llama_cpp._utils")
    for name in ("outnull_file", "errnull_file"):
        handle = getattr(utils, name, None)
        if handle is not None:
            handle.close()


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; greedy (``temperature=0``) by default."""

    temperature: float = 0.0
    top_p: float = 0.95
    top_k: int = 40
    repeat_penalty: float = 1.0


def generate(
    llama_cpp: Any,
    llama: Any,
    tokens: list[int],
    grammar_text: str | None,
    stops: list[str],
    max_tokens: int,
    sampling: Sampling,
    watch: Watch | None = None,
) -> Sample:
    """Generate after ``tokens`` (reusing llama.cpp's cached prefix) until the model ends
    its turn, a stop sequence appears, ``max_tokens`` are out or ``watch`` stops it."""
    sample = Sample(watch=watch, hold=max((len(s) for s in stops), default=1) - 1)
    if grammar_text and sampling.temperature == 0 and sampling.repeat_penalty == 1.0:
        _greedy_sample(llama_cpp, llama, tokens, grammar_text, stops, max_tokens, sample)
    else:
        grammar = llama_cpp.LlamaGrammar.from_string(grammar_text) if grammar_text else None
        _full_sample(llama_cpp, llama, tokens, grammar, stops, max_tokens, sampling, sample)
    sample.flush()
    return sample


def _full_sample(
    llama_cpp: Any,
    llama: Any,
    tokens: list[int],
    grammar: Any,
    stops: list[str],
    max_tokens: int,
    sampling: Sampling,
    sample: Sample | None = None,
) -> Sample:
    """Any sampling settings, through ``Llama.generate`` (grammar over the whole vocabulary)."""
    sample = sample or Sample()
    for token in llama.generate(
        tokens,
        temp=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        repeat_penalty=sampling.repeat_penalty,
        grammar=grammar,
    ):
        if sample.add(llama_cpp, llama, token, stops, max_tokens):
            break
    return sample


def _greedy_sample(
    llama_cpp: Any,
    llama: Any,
    tokens: list[int],
    grammar_text: str,
    stops: list[str],
    max_tokens: int,
    sample: Sample | None = None,
) -> Sample:
    """Greedy decoding under a grammar that asks the grammar only about the model's choice.

    llama-cpp-python runs the grammar over the whole vocabulary (49k tokens for SmolLM2)
    at every step, which costs about half as much as the model itself. Greedy decoding
    only needs to know whether the best token is allowed: if it is, it is the answer;
    only when it is not is the grammar applied to every token (what llama.cpp's own
    sampler does too). Same tokens as the slow path, for less work.
    """
    # optional: numpy comes with llama-cpp-python (the [local] extra), as llama_cpp is imported
    import numpy as np

    ctx, vocab, n_vocab = llama._ctx, llama._model.vocab, llama.n_vocab()
    # reuse the cached prefix as Llama.generate does; the last prompt token is evaluated
    # again when the whole prompt is cached, for its logits
    prefix = 0
    for cached, new in zip(llama._input_ids.tolist(), tokens, strict=False):
        if cached != new:
            break
        prefix += 1
    prefix = min(prefix, len(tokens) - 1)
    if prefix > 0 and ctx.kv_cache_seq_rm(-1, prefix, -1):
        llama.n_tokens = prefix
    else:
        llama.reset()
        prefix = 0
    llama.eval(tokens[prefix:])

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar_text.encode(), b"root")
    one = (llama_cpp.llama_token_data * 1)()
    every = np.zeros(n_vocab, dtype=np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)]))
    every["id"] = np.arange(n_vocab, dtype=np.int32)
    every_pointer = every.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data))
    sample = sample or Sample()
    try:
        while True:
            logits = np.ctypeslib.as_array(ctx.get_logits_ith(-1), shape=(n_vocab,))
            token = int(np.argmax(logits))
            one[0].id, one[0].logit = token, 0.0
            single = llama_cpp.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(single))
            if math.isinf(one[0].logit):  # the grammar forbids it: the best token it allows
                every["logit"] = logits
                candidates = llama_cpp.llama_token_data_array(
                    data=every_pointer, size=n_vocab, selected=-1, sorted=False
                )
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
                token = int(every["id"][int(np.argmax(every["logit"]))])
            if sample.add(llama_cpp, llama, token, stops, max_tokens):
                break
            llama_cpp.llama_sampler_accept(sampler, token)
            llama.eval([token])
    finally:
        llama_cpp.llama_sampler_free(sampler)
    return sample


@dataclass
class Watch:
    """Someone following a generation from another thread: ``on_text`` gets the text as it
    grows, ``stop`` ends the generation at the next token (its caller was cancelled)."""

    on_text: Callable[[str], Any] | None = None
    stop: threading.Event = field(default_factory=threading.Event)


@dataclass
class Sample:
    """What one generation produced: tokens (without the end-of-turn), text, why it stopped."""

    tokens: list[int] = field(default_factory=list)
    text: str = ""
    stop_reason: str = "max_tokens"
    first_at: float | None = None
    watch: Watch | None = None
    #: characters kept back from ``watch.on_text``: the longest stop sequence but one,
    #: which a later token may still complete and cut
    hold: int = 0
    shown: int = 0

    def add(self, llama_cpp: Any, llama: Any, token: int, stops: list[str], max_tokens: int) -> bool:
        """Take one sampled token; True when generation ends (end of turn, a stop sequence,
        the limit, or the watcher's ``stop``)."""
        if self.first_at is None:
            self.first_at = time.perf_counter()
        if self.watch is not None:
            if self.watch.stop.is_set():
                self.stop_reason = "cancelled"
                return True
            self.show(len(self.text) - self.hold)
        if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
            self.stop_reason = "end"
            return True
        self.tokens.append(token)
        # decode the whole output each time: a character may span several tokens
        self.text = llama.detokenize(self.tokens).decode("utf-8", errors="ignore")
        cut = _first_stop(self.text, stops)
        if cut is not None:
            self.text, self.stop_reason = self.text[:cut], "stop_sequence"
            return True
        end = loop_end(self.text)
        if end is not None:  # greedy decoding caught in a loop ("12.024.024.024..."): it never ends
            self.text, self.stop_reason = self.text[:end], "repetition"
            return True
        return len(self.tokens) >= max_tokens

    def show(self, upto: int) -> None:
        """Pass the text up to ``upto`` that the watcher has not seen yet."""
        if self.watch is not None and self.watch.on_text is not None and upto > self.shown:
            self.watch.on_text(self.text[self.shown : upto])
            self.shown = upto

    def flush(self) -> None:
        """The generation ended: pass what was held back (stop sequences already cut)."""
        if self.stop_reason != "cancelled":
            self.show(len(self.text))


#: a loop is a unit of up to this many characters ...
_LOOP_UNIT = 16
#: ... repeated at least this many times and over at least this many characters
_LOOP_REPEATS, _LOOP_CHARS = 4, 24


def loop_end(text: str) -> int | None:
    """Where to cut ``text`` whose last line ends in a loop (a short unit repeated over
    and over), keeping one copy of the unit; None when it does not."""
    line_start = text.rfind("\n") + 1
    for period in range(1, _LOOP_UNIT + 1):
        start = len(text) - period  # walk back while the text repeats with this period
        while start > line_start and text[start - 1] == text[start - 1 + period]:
            start -= 1
        span = len(text) - start
        if span >= max(_LOOP_CHARS, _LOOP_REPEATS * period):
            return start + period
    return None


def _first_stop(text: str, stops: list[str]) -> int | None:
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(found) if found else None
