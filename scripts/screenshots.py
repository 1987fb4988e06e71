"""Take the page's screenshots in docs/screenshots/, so the pictures in docs/page.md stay true.

    PYTHONPATH=src python scripts/screenshots.py

Runs tests/test_page_people.py (a real Chromium against a real server, at 1100 and 390 px)
with ``REACTCHAT_SCREENSHOTS`` set, then shrinks each PNG to a 64-colour palette.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "docs" / "screenshots"


def main() -> int:
    """Take the screenshots; the exit status is pytest's."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "REACTCHAT_SCREENSHOTS": str(SHOTS)}
    test = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", str(ROOT / "tests" / "test_page_people.py")]
    done = subprocess.run(test, env=env, cwd=ROOT, check=False)
    for png in sorted(SHOTS.glob("page-*.png")):
        # a palette keeps a screenshot of text at a tenth of its size, still sharp
        Image.open(png).convert("RGB").quantize(colors=64).save(png, optimize=True)
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size // 1024} KB")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
