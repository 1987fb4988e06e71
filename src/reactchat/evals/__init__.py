"""Score an agent on a set of cases: ``reactchat eval`` and its Python API.

```python
from reactchat.evals import load_cases, run_eval
report = await run_eval(agent, load_cases("cases.jsonl"), concurrency=8)
report.passed, report.total, report.cases[0].session
```
"""

from reactchat.evals.cases import BadCases, Case, load_cases, parse_cases
from reactchat.evals.compare import Changes, compare, read_result
from reactchat.evals.runner import CaseResult, EvalReport, run_case, run_eval
from reactchat.evals.scorers import score

__all__ = [
    "BadCases",
    "Case",
    "CaseResult",
    "Changes",
    "EvalReport",
    "compare",
    "load_cases",
    "parse_cases",
    "read_result",
    "run_case",
    "run_eval",
    "score",
]
