"""What changed between two eval results (``reactchat eval --against OLD.json``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reactchat.evals.cases import BadCases
from reactchat.evals.runner import EvalReport


@dataclass
class Changes:
    """Case ids by how their verdict moved since the old result."""

    fixed: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """A readable account, one line per kind of change that happened."""
        labels = (
            ("now pass", self.fixed),
            ("now fail", self.broken),
            ("new", self.added),
            ("gone", self.removed),
        )
        found = [f"{label} ({len(ids)}): {', '.join(ids)}" for label, ids in labels if ids]
        return found or ["no case changed its verdict"]


def read_result(path: str | Path) -> dict[str, bool]:
    """Verdicts by case id from a ``--json`` result file; ``BadCases`` if it is not one."""
    try:
        data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
        return {str(c["id"]): bool(c["passed"]) for c in data["cases"]}
    except (OSError, ValueError) as exc:
        raise BadCases(str(path), 0, f"cannot read the old result ({exc})") from None
    except (KeyError, TypeError):
        raise BadCases(str(path), 0, 'not an eval result: expected {"cases": [{"id", "passed"}, ...]}') from None


def compare(old: dict[str, bool], new: EvalReport) -> Changes:
    """How ``new`` differs from the ``old`` verdicts (``read_result``)."""
    changes = Changes()
    now = {c.id: c.passed for c in new.cases}
    for case_id, passed in now.items():
        if case_id not in old:
            changes.added.append(case_id)
        elif passed and not old[case_id]:
            changes.fixed.append(case_id)
        elif old[case_id] and not passed:
            changes.broken.append(case_id)
    changes.removed = [case_id for case_id in old if case_id not in now]
    return changes
