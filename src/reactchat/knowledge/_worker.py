"""A parser process: ``python -m reactchat.knowledge._worker`` (started by ``_isolate``).

It reads jobs from stdin (a JSON header frame, then the file's bytes) and answers on
stdout with progress messages and then the chunks or the rejection (for a job whose
header has ``extract``, a web page's URL: the page's title and main text instead). Before each job it
lowers its own limits: CPU seconds (SIGXCPU from the kernel ends it, even inside C
code) and address space (allocations beyond it fail with ``MemoryError``). It exits at
the end of its input, so it never outlives the process that started it.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import IO, Any

from reactchat.knowledge._blocks import FileRejected, Limits, Report
from reactchat.knowledge._chunk import chunk
from reactchat.knowledge._extract import extract_page
from reactchat.knowledge._isolate import Parsed, read_frame, write_frame
from reactchat.knowledge._parse import parse


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


_FRAME_CHUNKS = 500
#: the limits the worker started with, restored between jobs
_CPU = resource.getrlimit(resource.RLIMIT_CPU)
_AS = resource.getrlimit(resource.RLIMIT_AS)


def _limit(limits: Limits) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    resource.setrlimit(resource.RLIMIT_CPU, (int(used + limits.seconds) + 1, _CPU[1]))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, _AS[1]))


def read(data: bytes, name: str, limits: Limits, size: int, overlap: int, report: Report | None = None) -> Parsed:
    """Read and chunk a file in this process."""
    doc = parse(data, name, limits, report)
    return Parsed(doc.kind, doc.pages, list(chunk(doc, size, overlap)))


def _send(out: IO[bytes], message: dict[str, Any]) -> None:
    write_frame(out, json.dumps(message, ensure_ascii=False).encode())


def _job(header: dict[str, Any], data: bytes, out: IO[bytes]) -> dict[str, Any]:
    limits = Limits(**header["limits"])
    _limit(limits)

    def report(done: int, total: int) -> None:
        _send(out, {"progress": [done, total]})

    try:
        if "extract" in header:
            title, text = extract_page(data, header["extract"])
            return {"extracted": text, "title": title}
        parsed = read(data, header["name"], limits, header["size"], header["overlap"], report)
    except FileRejected as exc:
        return {"rejected": str(exc), "reason": exc.reason}
    except RecursionError:
        return {"rejected": f"{header['name']}: the file is nested too deeply to read"}
    except MemoryError:  # an Exception too: ``main`` says which limit it was, and this worker ends
        raise
    except Exception as exc:  # a parser's own error on odd input: a rejection with the cause
        return {"rejected": f"{header['name']}: could not be read ({type(exc).__name__}: {exc})"}
    # in frames of a few hundred chunks: the parent decodes each quickly, never holding its GIL long
    for start in range(0, len(parsed.chunks), _FRAME_CHUNKS):
        batch = parsed.chunks[start : start + _FRAME_CHUNKS]
        _send(out, {"chunks": [[c.text, c.page, c.heading, c.span] for c in batch]})
    return {"kind": parsed.kind, "pages": parsed.pages}


def main() -> None:
    """Serve jobs until stdin ends."""
    source = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print cannot corrupt the frames
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGXCPU must not leave core files
    while (header := read_frame(source)) is not None and (data := read_frame(source)) is not None:
        try:
            answer = _job(json.loads(header), data, out)
        except MemoryError:
            answer = None
        del data
        if answer is None:  # memory is exhausted: say so if possible, then make way for a fresh worker
            job = json.loads(header)
            message = (
                f"{job['name']}: reading it took more than the parser's {job['limits']['memory'] >> 20} MB of memory; "
                "split the file or upload the part you need"
            )
            _send(out, {"rejected": message, "reason": "too_large", "rss": 1 << 62})
            return
        resource.setrlimit(resource.RLIMIT_AS, _AS)
        resource.setrlimit(resource.RLIMIT_CPU, _CPU)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        answer["rss"], answer["peak_rss"] = _rss(), usage.ru_maxrss * 1024
        _send(out, answer)


if __name__ == "__main__":
    main()
