"""The garbage collector of a serving process (``reactchat serve``, ``app_from_env``).

CPython's collector is tuned for scripts: it looks at the youngest objects after every
700 more of them were made than freed, and now and then at every object of the process.
A server under load has thousands of objects alive in its running turns at any moment,
so it collected every few turns, moved those objects into the older generations, and
then scanned them all again in full collections: measured under
``benchmarks/server_load.py`` (100 sessions, SQLite, 20 turns each), 1,400 collections,
eleven of them full ones of up to 240 ms during which no session advanced — the slowest
turns of the run — and 1.4 ms of a turn's ~5 ms of CPU.

So once the app is built, a serving process freezes what start-up made (modules, classes,
functions, the app: never garbage, now never scanned again) and collects the youngest
generation after ``REACTCHAT_GC_THRESHOLD`` (default 50,000) more objects instead of 700.
Memory held only by reference cycles is still freed, a little later: at most that many
container objects wait for the next collection. ``REACTCHAT_GC_THRESHOLD=default``
leaves the interpreter's collector as it is.
"""

from __future__ import annotations

import gc
import os

from reactchat.errors import ConfigError

#: objects made (and not yet freed) between two collections of the youngest generation
SERVING_THRESHOLD = 50_000


def settle_collector() -> None:
    """Freeze the objects start-up made and collect less often (see the module's docstring)."""
    setting = os.environ.get("REACTCHAT_GC_THRESHOLD", "").strip()
    if setting == "default":
        return
    try:
        threshold = int(setting) if setting else SERVING_THRESHOLD
    except ValueError:
        threshold = 0
    if threshold < 1:
        raise ConfigError(f"REACTCHAT_GC_THRESHOLD must be a positive integer or 'default', not {setting!r}")
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(threshold, middle, oldest)
