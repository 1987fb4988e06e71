"""Known attacks against a real server: time to rejection, peak memory, responsiveness.

    .venv/bin/python benchmarks/attacks.py [--only NAME ...] [--timeout 120]

Each attack runs against a fresh ``uvicorn`` process (the rule model of the tests over
a SQLite file) while another session keeps asking; it prints the answer's status, the
time to it, the server's peak resident memory, the peak of its parser processes and
the slowest answer the other session got. To measure an older checkout, put its
``src`` first: ``PYTHONPATH=/path/to/old/src .venv/bin/python benchmarks/attacks.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import attack_files  # noqa: E402
from attack_support import Watch, serve  # noqa: E402

MB = 2**20


Send = Callable[[httpx.Client, str], httpx.Response]


def _upload(name: str, make: Callable[[Path], Path]) -> Callable[[Path], Send]:
    def prepare(work: Path) -> Send:
        data = make(work / name).read_bytes()  # made before the clock starts
        return lambda client, session: client.post(f"/v1/sessions/{session}/files", files={"file": (name, data)})

    return prepare


def _message(text: str) -> Callable[[Path], Send]:
    def prepare(work: Path) -> Send:
        return lambda client, session: client.post(
            f"/v1/sessions/{session}/messages", json={"message": text, "stream": False}
        )

    return prepare


ATTACKS: dict[str, Callable[[Path], Send]] = {
    "calc-round-1e7": _message("compute round(1, -10**7)"),
    "calc-round-1e1000": _message("compute round(7, -10**1000)"),
    "docx-700k-paragraphs": _upload("many.docx", attack_files.many_paragraphs_docx),
    "docx-40M-empty-paragraphs": _upload("empty.docx", attack_files.empty_paragraphs_docx),
    "json-20MB": _upload("data.json", attack_files.json_array),
    "csv-20MB": _upload("rows.csv", attack_files.csv_rows),
    "text-20MB": _upload("lines.txt", attack_files.text_lines),
    "pdf-90k-pages-shared-stream": _upload("pages.pdf", attack_files.shared_stream_pdf),
    # large files within the limits: accepted, in bounded memory
    "json-20MB-records": _upload("records.json", attack_files.json_records),
    "csv-20MB-records": _upload("records.csv", attack_files.csv_records),
    "text-20MB-prose": _upload("prose.txt", attack_files.text_paragraphs),
}


def run(name: str, timeout: float) -> dict[str, object]:
    """One attack on a fresh server."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        send = ATTACKS[name](work)
        with serve(work, max_upload=25_000_000) as served:
            client = httpx.Client(base_url=served.url, timeout=timeout)
            session = client.post("/v1/sessions").json()["session"]
            with Watch(served) as watch:
                start = time.perf_counter()
                try:
                    response = send(client, session)
                    status: object = response.status_code
                    detail = response.text[:160]
                except httpx.TimeoutException:
                    status, detail = "timeout", f"no answer within {timeout:.0f} s"
                elapsed = time.perf_counter() - start
                time.sleep(0.5)
            client.close()
    return {
        "attack": name,
        "status": status,
        "seconds": round(elapsed, 2),
        "server_peak_mb": round(watch.peak_server / MB),
        "parsers_peak_mb": round(watch.peak_children / MB),
        "largest_parser_peak_mb": round(watch.peak_child / MB),
        "other_session_slowest_s": round(max(watch.latencies, default=0.0), 2),
        "other_session_failures": len(watch.failures),
        "detail": detail,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", nargs="*", choices=sorted(ATTACKS), help="run only these attacks")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for an answer")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores)", flush=True)
    for name in args.only or list(ATTACKS):
        result = run(name, args.timeout)
        print(json.dumps(result, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
