"""The house rules of docs/architecture.md, checked on the source: which module imports
which, read with ``ast`` (nothing is imported).

Run ``pytest tests/test_layout.py -q -s`` to see the circles and the imports that run
back up, as the tests count them.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import reactchat

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "reactchat"

#: each folder's place, bottom (0) to top, as docs/architecture.md draws it; an import of a
#: module of a higher place "runs back up". Top-level modules are their own folders.
LAYERS: dict[str, int] = {
    "errors": 0,
    "messages": 0,
    "protocols": 1,
    "models": 2,
    "store": 2,
    "tools": 2,
    "engine": 3,
    "orchestration": 4,
    "knowledge": 4,
    "memory": 4,
    "toolbox": 4,
    "agent": 5,
    "__init__": 5,
    "react": 5,
    "langchain": 5,
    "mcp": 6,
    "testing": 6,
    "evals": 6,
    "temporal": 6,
    "cli": 7,
    "__main__": 7,
    "server": 8,
    "a2a": 9,
}
#: what the engine's lower layers must never import
BELOW_THE_AGENT = ("engine", "protocols", "tools", "store")
MAX_UPWARD = 3
MAX_TOP_LEVEL = 6


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int
    lazy: bool  # inside a function
    typing_only: bool  # under ``if TYPE_CHECKING``


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = modules()


def folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> Iterator[Import]:
    path = MODULES[module]
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def targets(node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        assert isinstance(node, ast.ImportFrom)
        base = node.module or ""
        if node.level:
            base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
        return [f"{base}.{alias.name}" for alias in node.names]

    def walk(body: list[Any], lazy: bool, typing_only: bool) -> Iterator[Import]:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in targets(node):
                    target = _resolve(name) if name.startswith("reactchat") else None
                    if target is not None and target != module:
                        yield Import(module, target, node.lineno, lazy, typing_only)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield from walk(node.body, True, typing_only)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from walk(node.body, lazy, True)
                yield from walk(node.orelse, lazy, typing_only)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        yield from walk(inner, lazy, typing_only)

    tree = ast.parse(path.read_text(encoding="utf-8"))
    yield from walk(tree.body, False, False)


ALL_IMPORTS = [imp for module in MODULES for imp in imports_of(module)]


def circles() -> list[list[str]]:
    """The import circles: the strongly connected components of more than one module, an
    import inside a function counted like any other (it hides a circle, it does not end
    it), one for typing only not."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for imp in ALL_IMPORTS:
        if not imp.typing_only:
            graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    return found


def upward() -> list[tuple[str, str]]:
    """(importing module, folder above it) for every import that runs back up."""
    found = {
        (imp.source, folder(imp.target))
        for imp in ALL_IMPORTS
        if LAYERS[folder(imp.target)] > LAYERS[folder(imp.source)]
    }
    return sorted(found)


def test_every_folder_has_a_place() -> None:
    assert sorted({folder(module) for module in MODULES} - LAYERS.keys()) == []


def test_few_modules_at_the_top() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top


def test_every_import_circle_lies_inside_one_folder() -> None:
    found = circles()
    for circle in found:
        print("circle:", " ".join(circle))
    assert [circle for circle in found if len({folder(m) for m in circle}) > 1] == []


def test_at_most_three_imports_run_back_up() -> None:
    found = upward()
    for source, target in found:
        print(f"upward: {source} -> {target}/")
    assert len(found) <= MAX_UPWARD, found


def test_nothing_below_the_agent_imports_it() -> None:
    offenders = [
        f"{imp.source}:{imp.line}"
        for imp in ALL_IMPORTS
        if folder(imp.source) in BELOW_THE_AGENT and imp.target == "reactchat.agent"
    ]
    assert offenders == []


_IMPORT = re.compile(r"^\s+(import|from)\s+\S")


def _optional(tree: ast.AST) -> set[int]:
    """Lines of imports inside a ``try:`` that catches ``ImportError``: an optional
    dependency, whose handler says which extra to install."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            handler.type is not None and re.search(r"\b(ImportError|ModuleNotFoundError)\b", ast.unparse(handler.type))
            for handler in node.handlers
        ):
            lines.update(
                n.lineno for stmt in node.body for n in ast.walk(stmt) if isinstance(n, ast.Import | ast.ImportFrom)
            )
    return lines


def _reasonless_imports(path: Path) -> list[int]:
    """Line numbers of imports inside a function that neither handle a missing optional
    dependency nor carry a comment saying why: on the line itself, or on the nearest line
    above it that is not another import or a ``try:``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    optional = _optional(tree)
    found: set[int] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in optional:
                continue
            if not _IMPORT.match(lines[node.lineno - 1]) or "#" in lines[node.lineno - 1]:
                continue
            above = node.lineno - 2
            while above >= 0 and (_IMPORT.match(lines[above]) or lines[above].strip() in ("try:", "")):
                above -= 1
            if above < 0 or not lines[above].strip().startswith("#"):
                found.add(node.lineno)
    return sorted(found)


def test_every_import_inside_a_function_says_why() -> None:
    offenders = [f"{path.relative_to(SRC)}:{line}" for path in MODULES.values() for line in _reasonless_imports(path)]
    assert offenders == []


def test_pydantic_internals_are_written_in_one_module() -> None:
    allowed = PACKAGE / "messages" / "_fast.py"
    offenders = [
        f"{path.relative_to(SRC)}:{number}"
        for path in MODULES.values()
        if path != allowed
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "__pydantic_fields_set__" in line or re.search(r"__dict__\[[^]]+\]\s*=", line)
    ]
    assert offenders == []


#: what ``from reactchat import …`` offered before the files moved into folders
PUBLIC_BEFORE = [
    "Action",
    "AlreadyAnswered",
    "Agent",
    "ConfigError",
    "ContextTooLong",
    "FinalAnswer",
    "FormatError",
    "Model",
    "ModelError",
    "NothingToRun",
    "PauseForUser",
    "ReactchatError",
    "Reflexion",
    "RunContext",
    "RunResult",
    "ScriptedModel",
    "SessionBusy",
    "SessionNotFound",
    "SessionState",
    "Step",
    "Store",
    "Tool",
    "ask_user",
    "calculator",
    "resolve_model",
    "resolve_store",
    "tool",
]
#: the public paths below the package, each with a name it gives
PUBLIC_PATHS = {
    "reactchat.react": ("parse", "Action", "FinalAnswer", "FormatError"),
    "reactchat.toolbox": ("calculator", "ask_user", "fetch_url", "web_search", "run_python"),
    "reactchat.store": ("Store", "SharedStore", "resolve_store"),
    "reactchat.knowledge": ("attach", "KnowledgeBase"),
    "reactchat.mcp": ("MCPServer", "load_servers"),
    "reactchat.server": ("create_app", "ServerConfig", "app_from_env"),
    "reactchat.langchain": ("from_langchain",),
}


def test_the_public_names_still_import() -> None:
    missing = [name for name in PUBLIC_BEFORE if not hasattr(reactchat, name)]
    missing += [
        f"{path}.{name}"
        for path, names in PUBLIC_PATHS.items()
        for name in names
        if not hasattr(importlib.import_module(path), name)
    ]
    assert missing == []
