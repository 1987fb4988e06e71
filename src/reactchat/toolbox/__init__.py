"""Built-in tools: ``calculator``, ``ask_user``, ``web_search``, ``fetch_url``, ``run_python``.

``web_search`` reads its backend from ``REACTCHAT_SEARCH`` at each search; build one on
a chosen backend with ``web_search_tool(SearxNG(url))`` (or ``Tavily()``, ``Brave()``,
``DuckDuckGo()``, or any object with ``async search(query, k)``).
"""

from reactchat.toolbox._ask_user import ask_user
from reactchat.toolbox._calculator import CalculatorError, calculator, evaluate
from reactchat.toolbox._fetch import (
    FetchPolicy,
    FetchRefused,
    Page,
    fetch,
    fetch_url,
    fetch_url_tool,
    links_in,
    read_link,
    read_links_in_messages,
)
from reactchat.toolbox._python import SandboxLimits, SandboxRun, run_python, run_python_tool, run_sandboxed
from reactchat.toolbox._web_search import (
    ENV_SEARCH,
    Brave,
    DuckDuckGo,
    SearchBackend,
    SearchConfigError,
    SearchResult,
    SearchUnavailable,
    SearxNG,
    Tavily,
    resolve_backend,
    web_search,
    web_search_tool,
)

__all__ = [
    "ENV_SEARCH",
    "Brave",
    "CalculatorError",
    "DuckDuckGo",
    "FetchPolicy",
    "FetchRefused",
    "Page",
    "SandboxLimits",
    "SandboxRun",
    "SearchBackend",
    "SearchConfigError",
    "SearchResult",
    "SearchUnavailable",
    "SearxNG",
    "Tavily",
    "ask_user",
    "calculator",
    "evaluate",
    "fetch",
    "fetch_url",
    "fetch_url_tool",
    "links_in",
    "read_link",
    "read_links_in_messages",
    "resolve_backend",
    "run_python",
    "run_python_tool",
    "run_sandboxed",
    "web_search",
    "web_search_tool",
]
