"""``python -m reactchat``: the ``reactchat`` command, where its script is not on PATH."""

from reactchat.cli import main

if __name__ == "__main__":  # not when a tool imports the module to inspect it
    raise SystemExit(main())
