"""Saved KV states of the sessions that take turns on one loaded model.

One llama.cpp context has one KV cache. Two sessions that alternate on it would each
find the other's tokens there and evaluate their whole prompt again at every step.
So before a call overwrites a good part of the cache, the cache (llama.cpp sequence 0)
is saved with the text it holds; and a call whose prompt shares more text with a saved
state than with the cache restores that state first, then evaluates only its new
tokens. A single session never pays for this: nothing is saved while each call only
extends the last one.

States are kept newest first within a count and a byte budget (least recently used
out first); a state that a later one extends is dropped, since the later one holds it.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: a call that drops less than this many bytes of cached text (the last generated token,
#: a different closing note) leaves nothing worth saving
MIN_SAVED_BYTES = 256


@dataclass
class SavedState:
    """The KV cache of one session as it was: its text, tokens and token end offsets,
    and llama.cpp's sequence state."""

    text: bytes
    tokens: list[int]
    ends: list[int]
    data: bytes


class SessionStates:
    """Saved states, least recently used first, bounded by ``max_states`` and ``max_bytes``."""

    def __init__(self, max_states: int = 8, max_bytes: int = 512 * 2**20) -> None:
        self.max_states = max_states
        self.max_bytes = max_bytes
        self._saved: OrderedDict[int, SavedState] = OrderedDict()
        self._next = 0

    def __len__(self) -> int:
        return len(self._saved)

    @property
    def size(self) -> int:
        """Memory held by the saved states."""
        return sum(len(s.data) + len(s.text) for s in self._saved.values())

    def best(self, text: bytes) -> tuple[int | None, int]:
        """The saved state sharing the longest prefix with ``text``, and that length."""
        found, longest = None, 0
        for key, state in self._saved.items():
            shared = common_prefix(text, state.text)
            if shared > longest:
                found, longest = key, shared
        return found, longest

    def take(self, key: int) -> SavedState:
        """Remove and return a state (it is about to become the cache itself)."""
        return self._saved.pop(key)

    def save(self, state: SavedState) -> None:
        """Keep ``state``, dropping the states it extends, then the least recently used
        ones beyond the budgets."""
        if self.max_states <= 0:
            return
        for key in [k for k, old in self._saved.items() if state.text.startswith(old.text)]:
            del self._saved[key]
        self._saved[self._next] = state
        self._next += 1
        while len(self._saved) > self.max_states or (len(self._saved) > 1 and self.size > self.max_bytes):
            self._saved.popitem(last=False)

    def clear(self) -> None:
        """Forget every saved state."""
        self._saved.clear()


def capture(llama_cpp: Any, llama: Any) -> bytes:
    """llama.cpp's state of sequence 0 (its KV cells), as bytes."""
    size = llama_cpp.llama_state_seq_get_size(llama.ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(llama.ctx, buffer, size, 0)
    return bytes(buffer[:written])


def restore(llama_cpp: Any, llama: Any, data: bytes, tokens: list[int]) -> bool:
    """Put a captured sequence state back into sequence 0; False if llama.cpp refused it
    (the cache is then empty)."""
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llama.ctx), 0, -1, -1)
    buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if not llama_cpp.llama_state_seq_set_data(llama.ctx, buffer, len(data), 0):
        llama.n_tokens = 0
        return False
    # llama-cpp-python's own record of what the cache holds: decoding reuses its prefix
    llama.input_ids[: len(tokens)] = tokens
    llama.n_tokens = len(tokens)
    return True


def common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes ``a`` and ``b`` share."""
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low
