"""What a hostile web page costs the process that fetched it: trafilatura in that process
(as ``fetch_url`` did before) against ``ParserPool.extract`` (a parser process under the
knowledge base's ``Limits``), side by side on the same page.

    .venv/bin/python benchmarks/fetch_isolation.py [--paragraphs 100000] [--seconds 60]

The page is ``--paragraphs`` small paragraphs (about 30 bytes each; 300,000 is the 9 MB
that ``tests/test_fetch_isolated.py`` uses). Each way runs in a fresh Python process, which
reports its CPU time, wall time and peak RSS (the parser process's own are not counted
in the isolated run: they are what the limits bound). Prints one table and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

PROBE = r"""
import asyncio, json, resource, sys, time
paragraphs, seconds, way = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
html = b"<!DOCTYPE html><html><head><title>Many</title></head><body>"
html += b"<p><b>rose</b> <i>tulip</i></p>" * paragraphs + b"</body></html>"
start, cpu = time.monotonic(), time.process_time()
if way == "in process":
    from reactchat.knowledge._extract import extract_page
    try:
        outcome = f"{len(extract_page(html, 'http://example.org/many')[1]) >> 10} KiB of text"
    except Exception as exc:
        outcome = f"refused: {exc}"
else:
    from reactchat.knowledge import FileRejected, Limits
    from reactchat.knowledge._isolate import pool
    try:
        extracted = asyncio.run(pool().extract(html, "http://example.org/many", Limits(seconds=seconds)))
        outcome = f"{len(extracted.text) >> 10} KiB of text"
    except FileRejected as exc:
        outcome = f"refused: {str(exc).split(': ', 1)[1][:60]}"
print(json.dumps({
    "way": way, "mb": len(html) / 2**20, "wall": time.monotonic() - start, "cpu": time.process_time() - cpu,
    "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "outcome": outcome,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paragraphs", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="the parser's CPU limit (Limits.seconds)")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| way | page MB | wall s | CPU s in the fetching process | peak RSS MB of it | outcome |")
    print("|---|---:|---:|---:|---:|---|")
    for way in ("in process", "parser process"):
        command = [sys.executable, "-c", PROBE, str(args.paragraphs), str(args.seconds), way]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {row['way']} | {row['mb']:.1f} | {row['wall']:.1f} | {row['cpu']:.1f} | {row['rss']:.0f} | "
            f"{row['outcome']} |"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
