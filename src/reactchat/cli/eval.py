"""``reactchat eval cases.jsonl``: score an agent on a set of cases.

Exit status: 0 when every case ran (and, with ``--min-pass F``, at least that share
passed), 1 when the share is below ``--min-pass`` or the cases cannot be read, 2 bad flags.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from reactchat.cli.tool_refs import close_tools
from reactchat.store import store_url

EXIT_BELOW_GATE = 1


def add_parser(commands: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register the ``eval`` verb (``common`` adds --model, --db, --tools and --mcp)."""
    p = commands.add_parser("eval", help="score the agent on cases from a JSON-lines file")
    p.add_argument("cases", help='JSON lines: {"id", "input", "expected", "scorer"} (see docs/evals.md)')
    common(p)
    p.add_argument("--protocol", choices=["react", "native"], default="react")
    p.add_argument("--max-steps", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=4, help="cases run at once (default 4)")
    p.add_argument("--json", metavar="OUT", help="write the result file here")
    p.add_argument("--min-pass", type=_share, metavar="F", help="exit 1 unless this share (0-1) of cases passes")
    p.add_argument("--against", metavar="OLD.json", help="report which cases changed since this result file")


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {value:g}")
    return value


class Progress:
    """A progress bar on stderr: redrawn on a terminal, a line every tenth of the cases elsewhere."""

    def __init__(self, err: TextIO, total: int) -> None:
        self.err, self.total, self.done, self.failed = err, total, 0, 0
        self.tty = err.isatty()

    def __call__(self, result: Any) -> None:
        """Count one finished case."""
        self.done += 1
        self.failed += not result.passed
        filled = self.done * 30 // self.total
        line = f"[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}, {self.failed} failed"
        if self.tty:
            self.err.write(f"\r{line}" + ("\n" if self.done == self.total else ""))
        elif self.done == self.total or self.done * 10 // self.total != (self.done - 1) * 10 // self.total:
            self.err.write(line + "\n")
        self.err.flush()


def summary(report: Any) -> list[str]:
    """The lines printed after an eval: passed/total, tokens, cost, time, and per tag."""
    cost = report.cost
    lines = [
        f"passed {report.passed}/{report.total} ({report.share:.1%}) in {report.seconds:.2f} s, "
        f"{report.tokens} tokens, cost {'unknown' if cost is None else f'${cost:.4f}'}"
    ]
    for tag, (passed, count) in report.by_tag().items():
        lines.append(f"  {tag}: {passed}/{count}")
    for case in report.cases:
        if not case.passed:
            why = case.error or (f"status {case.status}" if case.status != "done" else f"answer {case.answer!r}")
            lines.append(f"FAIL {case.id}: {why} (reactchat show {case.session})")
    return lines


async def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``reactchat eval``."""
    # imported by the verb that needs it: the command starts without the agent (0.2-1 s)
    from reactchat.agent import Agent
    from reactchat.cli.tool_refs import configured_tools, offered_tools
    from reactchat.evals import compare, load_cases, read_result, run_eval
    from reactchat.toolbox import calculator

    if args.concurrency < 1 or args.max_steps < 1:
        print("reactchat: error: --concurrency and --max-steps must be at least 1", file=err)
        return 2
    # the ``reactchat`` script does not put the current directory on the path as ``python -m``
    # does: a ``python:myscorers:check`` scorer means ./myscorers.py (as --tools does)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    cases = load_cases(args.cases)
    old = read_result(args.against) if args.against else None
    tools, _ = offered_tools(args.model, [calculator, *configured_tools(args.tools, args.mcp)])
    agent = Agent(
        model=args.model, tools=tools, protocol=args.protocol, max_steps=args.max_steps, store=store_url(args.db)
    )
    try:
        report = await run_eval(agent, cases, concurrency=args.concurrency, on_result=Progress(err, len(cases)))
    finally:
        await close_tools(agent.toolsets)
        await agent.store.close()
    print("\n".join(summary(report)), file=out)
    if old is not None:
        print("\n".join(compare(old, report).lines()), file=out)
    if args.json:
        report.write(args.json)
    if args.min_pass is not None and report.share < args.min_pass:
        print(f"below --min-pass {args.min_pass:g}: {report.share:.1%} passed", file=err)
        return EXIT_BELOW_GATE
    return 0
