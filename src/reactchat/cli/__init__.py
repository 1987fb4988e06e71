"""The ``reactchat`` command: ``main`` (``cli.main``), stored sessions for people (``report``),
expiry (``retention``) and the ``--tools`` / ``--mcp`` references (``tool_refs``)."""

from reactchat.cli.main import main

__all__ = ["main"]
