"""``web_search``: the agent searches the web and cites what it found.

The backend is chosen by configuration: ``REACTCHAT_SEARCH=searxng:URL`` (a self-hosted
SearXNG's JSON API), ``tavily`` (``TAVILY_API_KEY``), ``brave`` (``BRAVE_API_KEY``) or
``duckduckgo`` (the ``ddgs`` package, no key); or pass a backend object to
``web_search_tool``. Results come back numbered ``[1]``, ``[2]``… so that the final
answer can cite them.

A problem the operator must fix (no backend configured, a missing key or package, a
key the service refuses) raises ``SearchConfigError``; a passing one (rate limit, the
service down, a timeout) raises ``SearchUnavailable``. Inside a run both become the
tool's error observation, the second with advice the model can follow.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from reactchat.errors import ConfigError, ReactchatError
from reactchat.tools import Tool
from reactchat.tools.cite import cited

#: the environment variable that picks the backend of the built-in ``web_search``
ENV_SEARCH = "REACTCHAT_SEARCH"
DEFAULT_RESULTS = 5
DEFAULT_TIMEOUT = 15.0
#: characters of the observation (titles, addresses and snippets together)
DEFAULT_BUDGET = 3000


class SearchConfigError(ConfigError):
    """The search backend cannot work until the operator fixes its configuration."""


class SearchUnavailable(ReactchatError, RuntimeError):
    """The search service could not answer now (rate limit, outage, timeout)."""


@dataclass(frozen=True)
class SearchResult:
    """One web result: what a citation points to."""

    title: str
    url: str
    snippet: str


@runtime_checkable
class SearchBackend(Protocol):
    """Anything that answers a query with results: the four built-in backends or your own."""

    name: str

    async def search(self, query: str, k: int) -> list[SearchResult]:
        """At most ``k`` results for ``query``, best first."""
        ...


def _results(rows: Any, k: int, *, url: str = "url", snippet: str = "content") -> list[SearchResult]:
    """The first ``k`` rows that have an address, read with the service's field names."""
    return [
        SearchResult(str(r.get("title") or ""), str(r[url]), str(r.get(snippet) or ""))
        for r in rows or []
        if isinstance(r, dict) and r.get(url)
    ][:k]


def _require(package: str, extra: str) -> Any:
    try:
        return importlib.import_module(package)
    except ImportError:
        raise SearchConfigError(
            f"this search backend needs the {package!r} package: pip install 'reactchat[{extra}]'"
        ) from None


def _key(explicit: str | None, variable: str, service: str) -> str:
    key = explicit or os.environ.get(variable)
    if not key:
        raise SearchConfigError(f"{service} search needs an API key: set {variable}")
    return key


def _http() -> Any:
    return _require("httpx", "web")


def _refused(service: str, status: int, detail: str, variable: str | None) -> Exception:
    """The exception for an HTTP error answer of a search service."""
    detail = f": {detail}" if detail else ""
    if status in (401, 403) and variable:
        return SearchConfigError(f"{service} refused the API key in {variable} (HTTP {status}){detail}")
    if status == 429:
        return SearchUnavailable(f"{service} is rate-limiting these searches (HTTP 429){detail}; try again later")
    if status >= 500:
        return SearchUnavailable(f"{service} is failing (HTTP {status}){detail}; try again later")
    return SearchUnavailable(f"{service} answered HTTP {status}{detail}")


async def _get_json(service: str, url: str, params: dict[str, Any], headers: dict[str, str], timeout: float) -> Any:
    httpx = _http()
    try:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            response = await client.get(url, params=params, headers=headers)
    except httpx.TimeoutException:
        raise SearchUnavailable(f"{service} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise SearchUnavailable(f"{service} could not be reached ({type(exc).__name__}: {exc})") from None
    if response.status_code != 200:
        return response
    try:
        return response.json()
    except ValueError:
        raise SearchUnavailable(f"{service} answered with something that is not JSON") from None


class SearxNG:
    """A SearXNG instance's JSON API (``/search?format=json``); ``json`` must be enabled
    in the instance's ``search.formats`` setting."""

    name = "searxng"

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        if not url.startswith(("http://", "https://")):
            raise SearchConfigError(
                f"searxng needs the instance's address: {ENV_SEARCH}=searxng:https://host, not {url!r}"
            )
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, k: int) -> list[SearchResult]:
        """The instance's first ``k`` results."""
        params = {"q": query, "format": "json"}
        data = await _get_json("SearXNG", f"{self.url}/search", params, {"Accept": "application/json"}, self.timeout)
        if not isinstance(data, dict):
            if data.status_code == 403:
                raise SearchConfigError(
                    f"the SearXNG instance at {self.url} refuses JSON (HTTP 403): add 'json' to search.formats "
                    "in its settings.yml"
                )
            raise _refused("SearXNG", data.status_code, "", None)
        return _results(data.get("results"), k)


class Brave:
    """The Brave Search API (web search endpoint); the key comes from ``BRAVE_API_KEY``."""

    name = "brave"
    URL = "https://api.search.brave.com/res/v1"

    def __init__(self, api_key: str | None = None, *, url: str = URL, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api_key = _key(api_key, "BRAVE_API_KEY", "Brave")
        self.url = url.rstrip("/")
        self.timeout = timeout

    async def search(self, query: str, k: int) -> list[SearchResult]:
        """The first ``k`` web results."""
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key}
        params = {"q": query, "count": min(max(k, 1), 20)}
        data = await _get_json("Brave", f"{self.url}/web/search", params, headers, self.timeout)
        if not isinstance(data, dict):
            raise _refused("Brave", data.status_code, _brave_detail(data), "BRAVE_API_KEY")
        web = data.get("web") or {}
        return [
            SearchResult(r.title, r.url, _plain(r.snippet))
            for r in _results(web.get("results"), k, snippet="description")
        ]


def _brave_detail(response: Any) -> str:
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        return ""
    return str(error.get("detail") or error.get("code") or "")


def _plain(text: str) -> str:
    """Brave marks the query's words with ``<strong>``: keep the words."""
    return text.replace("<strong>", "").replace("</strong>", "")


class Tavily:
    """The Tavily search API through ``tavily-python``; the key comes from ``TAVILY_API_KEY``."""

    name = "tavily"

    def __init__(self, api_key: str | None = None, *, url: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api_key = _key(api_key, "TAVILY_API_KEY", "Tavily")
        self.url = url
        self.timeout = timeout
        _require("tavily", "tavily")

    async def search(self, query: str, k: int) -> list[SearchResult]:
        """The first ``k`` results."""
        tavily = _require("tavily", "tavily")
        # the tavily extra, checked by _require above
        from tavily import errors

        client = tavily.AsyncTavilyClient(api_key=self.api_key, api_base_url=self.url)
        try:
            data = await client.search(query, max_results=k, timeout=self.timeout)
        except errors.InvalidAPIKeyError as exc:
            raise SearchConfigError(f"Tavily refused the API key in TAVILY_API_KEY: {exc}") from None
        except errors.UsageLimitExceededError as exc:
            raise SearchUnavailable(f"Tavily is rate-limiting these searches: {exc}; try again later") from None
        except errors.ForbiddenError as exc:
            raise SearchConfigError(f"Tavily refused the search (plan or usage limit of this key): {exc}") from None
        except (errors.BadRequestError, errors.TimeoutError) as exc:
            raise SearchUnavailable(f"Tavily could not answer: {exc}") from None
        except Exception as exc:  # httpx status errors for the codes the SDK does not map
            raise SearchUnavailable(f"Tavily could not answer ({type(exc).__name__}: {exc})") from None
        finally:
            await client.close()
        return _results(data.get("results"), k)


class DuckDuckGo:
    """DuckDuckGo through the ``ddgs`` package (no key; DuckDuckGo may rate-limit an address).

    ``proxy`` and ``verify`` go to ``ddgs.DDGS``.
    """

    name = "duckduckgo"

    def __init__(self, *, proxy: str | None = None, verify: bool = True, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.proxy = proxy
        self.verify = verify
        self.timeout = timeout
        _require("ddgs", "duckduckgo")

    async def search(self, query: str, k: int) -> list[SearchResult]:
        """The first ``k`` results of DuckDuckGo's HTML endpoint."""
        return await asyncio.to_thread(self._search, query, k)

    def _search(self, query: str, k: int) -> list[SearchResult]:
        ddgs = _require("ddgs", "duckduckgo")
        # the duckduckgo extra, checked by _require above
        from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

        client = ddgs.DDGS(proxy=self.proxy, timeout=int(self.timeout), verify=self.verify)
        try:
            rows = client.text(query, max_results=k, backend="duckduckgo")
        except RatelimitException as exc:
            raise SearchUnavailable(f"DuckDuckGo is rate-limiting these searches: {exc}; try again later") from None
        except TimeoutException:
            raise SearchUnavailable(f"DuckDuckGo did not answer within {self.timeout:g} s") from None
        except DDGSException as exc:
            if "No results found" in str(exc):
                # ddgs reports a refused request (an anti-bot page, HTTP 202/403/429) this way too
                return []
            raise SearchUnavailable(f"DuckDuckGo could not answer: {exc}") from None
        return _results(rows, k, url="href", snippet="body")


_BACKENDS: dict[str, Callable[[str], SearchBackend]] = {
    "searxng": SearxNG,
    "tavily": lambda rest: Tavily(),
    "brave": lambda rest: Brave(),
    "duckduckgo": lambda rest: DuckDuckGo(),
    "ddg": lambda rest: DuckDuckGo(),
}


def resolve_backend(spec: str | SearchBackend | None = None) -> SearchBackend:
    """A backend from a spec (``searxng:URL``, ``tavily``, ``brave``, ``duckduckgo``), or
    ``REACTCHAT_SEARCH`` when ``spec`` is None. Raises ``SearchConfigError``."""
    if spec is not None and not isinstance(spec, str):
        return spec
    spec = spec if spec is not None else os.environ.get(ENV_SEARCH, "")
    name, _, rest = spec.strip().partition(":")
    make = _BACKENDS.get(name.lower())
    if make is None:
        hint = f" (got {spec!r})" if spec else ""
        raise SearchConfigError(
            f"no web search backend is configured{hint}: set {ENV_SEARCH} to searxng:URL, tavily, brave or duckduckgo"
        )
    return make(rest)


def render(query: str, results: list[SearchResult], budget: int = DEFAULT_BUDGET) -> str:
    """Numbered results, each snippet trimmed so that every citation fits in ``budget``."""
    if not results:
        return f"No web result for {query!r}. Try other words, or answer from what you know and say so."
    intro = f"{len(results)} web results for {query!r} (cite them as [n]):"
    entries = [(f"[{i}] {r.title or r.url}\n{r.url}", r.snippet) for i, r in enumerate(results, 1)]
    return cited(intro, entries, budget)


def web_search_tool(
    backend: str | SearchBackend | None = None, *, k: int = DEFAULT_RESULTS, budget: int = DEFAULT_BUDGET
) -> Tool:
    """A ``web_search`` tool over ``backend`` (a spec string, an object, or None for
    ``REACTCHAT_SEARCH``, read at the first search)."""
    fixed = None if backend is None else resolve_backend(backend)

    async def web_search(query: str) -> str:
        """Search the web. Returns numbered results (title, address, snippet); cite the ones
        you use as [1], [2]... in the final answer.

        Args:
            query: what to search for, in a few keywords
        """
        chosen = fixed or resolve_backend()  # read per call: the environment may change
        return render(query, await chosen.search(query, k), budget)

    return Tool(web_search, effect="read", timeout=DEFAULT_TIMEOUT * 2, max_chars=budget + 200)


#: the built-in tool; its backend comes from ``REACTCHAT_SEARCH``
web_search = web_search_tool()
