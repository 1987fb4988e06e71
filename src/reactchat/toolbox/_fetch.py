"""Chat with a link: ``fetch_url`` reads a web page into the session's knowledge base.

The page's main text is extracted (trafilatura for HTML, the knowledge base's readers for
PDF and plain text) and added like an uploaded file: same citations, same retention in
rounds, same clear. Both run in the knowledge base's parser processes, under its CPU and
memory limits, so a hostile page cannot stall or bloat the process that fetched it. The
page's URL is stored with it: fetching the same URL again in a session replaces the copy.

Fetching is SSRF-safe by default: only ``http``/``https``; the host name is resolved
here and every address it resolves to must be public (no loopback, private, link-local,
cloud metadata, multicast or reserved address), checked again for every redirect, and
the connection goes to the address that was checked (a second DNS answer cannot swap
it). Bodies are capped in size and the whole fetch in time. The cap counts decoded bytes
before they are inflated: only gzip and deflate are offered and accepted, one layer, and
decoded here with an output limit; redirects are followed here, their bodies unread.
``FetchPolicy(allow=[...])`` (or ``REACTCHAT_FETCH_ALLOW``) lists the networks and host
names of an intranet that may be fetched anyway.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from reactchat.errors import ReactchatError
from reactchat.messages import LinkSkippedEvent
from reactchat.toolbox._inflate import ACCEPT_ENCODING, Body, BodyRefused
from reactchat.tools import RunContext, Tool

if TYPE_CHECKING:
    from reactchat.engine.spec import AgentSpec
    from reactchat.knowledge import FileInfo, KnowledgeBase, Limits
    from reactchat.store import Store

log = logging.getLogger("reactchat.fetch")

#: comma-separated networks, addresses and host names that may be fetched although private
ENV_ALLOW = "REACTCHAT_FETCH_ALLOW"
DEFAULT_MAX_BYTES = 10 * 2**20
DEFAULT_TIMEOUT = 20.0
MAX_REDIRECTS = 5
#: characters of a page shown in the observation of ``fetch_url``
DEFAULT_BUDGET = 3000

_HTML = ("text/html", "application/xhtml+xml")
_READABLE = ("application/pdf", "text/plain", "text/markdown", "text/csv", "application/json", "text/x-markdown")
# NAT64 and 6to4 addresses carry an IPv4 address inside: judge the one inside
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class FetchRefused(ReactchatError, ValueError):
    """A URL or its answer was refused (address rules, size, time, type); the message says why."""


def _address_problem(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address may not be fetched, or None for a public one."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = (
            ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        )
        if inner is not None:
            return _address_problem(inner)
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if ip.is_private:
        return "a private address"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified or not ip.is_global:
        return "not a public address"
    return None


@dataclass
class FetchPolicy:
    """What ``fetch_url`` may reach and how much it reads.

    ``allow``: networks (``10.1.0.0/16``), addresses and host names that may be fetched
    although they are not public; defaults to ``REACTCHAT_FETCH_ALLOW``.
    """

    allow: Sequence[str] | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(init=False, default_factory=list)
    names: set[str] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        entries: Iterable[str] = self.allow if self.allow is not None else os.environ.get(ENV_ALLOW, "").split(",")
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.add(entry.lower().rstrip("."))

    def check_url(self, url: str) -> str:
        """The host of an acceptable URL, or ``FetchRefused``."""
        try:
            parts = urlsplit(url)
            host = parts.hostname or ""
            parts.port  # noqa: B018 - raises ValueError for a malformed port
        except ValueError as exc:
            raise FetchRefused(f"{url!r} is not a valid URL ({exc})") from None
        if parts.scheme not in ("http", "https"):
            raise FetchRefused(f"only http and https addresses can be fetched, not {parts.scheme or 'no scheme'}:")
        if not host:
            raise FetchRefused(f"{url!r} has no host name")
        return host

    def check_address(self, host: str, address: str) -> None:
        """Refuse an address ``host`` resolved to, unless the allow-list admits it."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if host.lower().rstrip(".") in self.names or any(ip in net for net in self.networks):
            return
        problem = _address_problem(ip)
        if problem:
            raise FetchRefused(
                f"{host} resolves to {ip}, {problem}: refused to protect the internal network "
                f"(an operator can allow it with {ENV_ALLOW})"
            )


@dataclass
class Page:
    """A fetched answer: where it ended up, its type and its bytes."""

    url: str
    content_type: str
    data: bytes


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise FetchRefused("fetching links needs httpx: pip install 'reactchat[web]'") from None
    return httpx


def _transport(policy: FetchPolicy) -> Any:
    """An httpx transport whose every connection goes to an address ``policy`` accepted."""
    httpx = _httpx()
    # httpx's own transport, of the web extra (checked by _httpx above)
    import httpcore

    class GuardedBackend(httpcore.AsyncNetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise FetchRefused(f"{host} could not be resolved ({exc.strerror})") from None
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
            for address in addresses:  # every answer, so that no retry can land on a refused one
                policy.check_address(host, address)
            error: Exception | None = None
            for address in addresses:
                try:
                    return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
                except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                    error = exc
            raise error or FetchRefused(f"{host} has no address")

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
            raise FetchRefused("unix sockets cannot be fetched")

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    transport = httpx.AsyncHTTPTransport(trust_env=False, retries=0)
    # the connection pool is the one seam for the network backend: httpx does not take one directly
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(), max_connections=4, network_backend=GuardedBackend()
    )
    return transport


async def fetch(url: str, policy: FetchPolicy | None = None) -> Page:
    """GET ``url`` under ``policy`` (default: public addresses only). Raises ``FetchRefused``."""
    policy = policy or FetchPolicy()
    httpx = _httpx()

    async def check_redirect(request: Any) -> None:
        policy.check_url(str(request.url))

    policy.check_url(url)
    timeout = httpx.Timeout(min(10.0, policy.timeout), pool=policy.timeout)
    client = httpx.AsyncClient(
        transport=_transport(policy),
        timeout=timeout,
        trust_env=False,
        headers={
            "User-Agent": "reactchat (fetch_url)",
            "Accept": "text/html, application/pdf, text/plain;q=0.9",
            "Accept-Encoding": ACCEPT_ENCODING,
        },
        event_hooks={"request": [check_redirect]},
    )
    try:
        async with asyncio.timeout(policy.timeout), client:
            return await _follow(client, client.build_request("GET", url), policy)
    except TimeoutError:
        raise FetchRefused(f"{url} did not answer within {policy.timeout:g} s") from None
    except httpx.UnsupportedProtocol:
        raise FetchRefused(f"{url} redirects to an address that is not http or https") from None
    except (httpx.InvalidURL, UnicodeError) as exc:  # IDNAError is a UnicodeError; so is an empty label
        raise FetchRefused(f"{url!r} (or where it redirects) is not a valid URL ({exc})") from None
    except httpx.HTTPError as exc:
        raise FetchRefused(f"{url} could not be fetched ({type(exc).__name__}: {exc})") from None


async def _follow(client: Any, request: Any, policy: FetchPolicy) -> Page:
    """The answer to ``request`` after its redirects, followed here: httpx would read (and
    inflate) a redirect's whole body before the next request, out of reach of any limit."""
    for _ in range(MAX_REDIRECTS + 1):
        response = await client.send(request, stream=True)
        try:
            if response.next_request is None:
                return await _read(response, policy)
            request = response.next_request
        finally:
            await response.aclose()
    raise FetchRefused(f"{request.url} is reached by more than {MAX_REDIRECTS} redirects")


async def _read(response: Any, policy: FetchPolicy) -> Page:
    url = str(response.url)
    if response.status_code >= 400:
        raise FetchRefused(f"{url} answered HTTP {response.status_code}")
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > policy.max_bytes:
        raise FetchRefused(f"{url} is {int(declared) / 2**20:.1f} MB, over the {_mb(policy.max_bytes)} limit")
    try:
        body = Body(response.headers.get("content-encoding", ""), policy.max_bytes)
        # raw bytes, decoded here with an output limit: httpx would inflate a whole network
        # chunk before the size could be counted (64 KB of gzip is 64 MB of zeros)
        async for chunk in response.aiter_raw():
            body.feed(chunk)
        data = body.data()
    except BodyRefused as exc:
        raise FetchRefused(f"{url} {exc}") from None
    kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return Page(url, kind, data)


def _mb(size: int) -> str:
    return f"{size / 2**20:.3g} MB"


def _file_name(url: str, title: str, extension: str) -> str:
    parts = urlsplit(url)
    base = title or (parts.path.rstrip("/").rsplit("/", 1)[-1] or parts.hostname or "page")
    base = re.sub(r"[\x00-\x1f/\\]+", " ", base).strip()[:120] or "page"
    if base.lower().endswith(extension):
        base = base[: -len(extension)]
    return f"{base} ({parts.hostname}){extension}"


async def page_document(page: Page, limits: Limits | None = None) -> tuple[str, bytes]:
    """The file that stands for a page in the knowledge base: ``(name, bytes)``.

    HTML becomes Markdown of its main text (headings kept, menus and footers dropped),
    extracted in a parser process under ``limits`` (``FetchRefused`` when it has no text
    or goes over them); PDF and plain text are kept as they are, for the knowledge base's
    own readers.
    """
    head = page.data[:1024].lstrip().lower()
    if page.content_type in _HTML or (not page.content_type and head.startswith((b"<!doctype html", b"<html"))):
        return await _extract_html(page, limits)
    if page.content_type in _READABLE or page.data.startswith(b"%PDF-"):
        extension = {"application/pdf": ".pdf", "text/csv": ".csv", "application/json": ".json"}.get(
            page.content_type, ".pdf" if page.data.startswith(b"%PDF-") else ".txt"
        )
        return _file_name(page.url, "", extension), page.data
    raise FetchRefused(f"{page.url} is {page.content_type or 'of no declared type'}, not a page, a PDF or text")


async def _extract_html(page: Page, limits: Limits | None) -> tuple[str, bytes]:
    # lazy: reactchat.knowledge costs about 0.25 s to import (-X importtime), and reactchat.toolbox loads this module
    from reactchat.knowledge import FileRejected, Limits
    from reactchat.knowledge._isolate import pool

    try:
        extracted = await pool().extract(page.data, page.url, limits or Limits())
    except FileRejected as exc:
        raise FetchRefused(str(exc)) from None
    title, text = extracted.title, extracted.text
    heading = f"# {title}\n\n" if title and not text.lstrip().startswith("#") else ""
    return _file_name(page.url, title, ".md"), f"{heading}{text}\n\nSource: {page.url}\n".encode()


async def read_link(
    kb: KnowledgeBase, session: str, url: str, policy: FetchPolicy | None = None
) -> tuple[FileInfo, str]:
    """Fetch ``url`` and add its text to ``session``'s knowledge base, like an upload.

    Returns the file's info and the beginning of its text ("" for a PDF, whose text
    only the knowledge base's reader sees).
    """
    page = await fetch(url, policy)
    name, data = await page_document(page, kb.limits)
    info = await kb.add_file(session, name, data, source=page.url)  # fetched again, it replaces this copy
    beginning = "" if info.kind == "pdf" else data[: DEFAULT_BUDGET * 4].decode("utf-8", errors="ignore")
    return info, beginning


_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)


def links_in(text: str) -> list[str]:
    """The http(s) URLs in a message, in order, without trailing punctuation."""
    found = [m.group(0).rstrip(".,;:!?)]}»”’") for m in _URL.finditer(text)]
    return list(dict.fromkeys(found))


def read_links_in_messages(agent: AgentSpec, policy: FetchPolicy | None = None, *, limit: int = 3) -> None:
    """Read the links of each message that starts a turn into the session's files first,
    so the turn can search them (``search_files``) and cite them like uploads. A link
    that is refused, cannot be parsed or fails is skipped, logged and recorded in the
    turn after the message (``LinkSkippedEvent``): the model can still try ``fetch_url``.
    Needs ``reactchat.knowledge.attach(agent)``.
    """

    async def read(session: str, store: Store, text: str) -> list[LinkSkippedEvent]:
        # lazy: reactchat.knowledge costs about 0.25 s to import, and reactchat.toolbox loads this module
        from reactchat.knowledge import FileRejected, KnowledgeBase
        from reactchat.knowledge._tool import SERVICE

        kb: KnowledgeBase = agent.services.get(SERVICE) or KnowledgeBase.for_store(store)
        skipped: list[LinkSkippedEvent] = []
        for url in links_in(text)[:limit]:
            try:
                await read_link(kb, session, url, policy)
            except (FetchRefused, FileRejected) as exc:
                log.warning("the link %s in a message of session %s was not read: %s", url, session, exc)
                skipped.append(LinkSkippedEvent(url=url, reason=str(exc)))
            except Exception as exc:  # a link is a convenience: whatever else it breaks, the turn goes on
                log.exception("the link %s in a message of session %s was not read", url, session)
                skipped.append(LinkSkippedEvent(url=url, reason=f"{type(exc).__name__}: {exc}", refused=False))
        return skipped

    agent.hooks.new_message.append(read)


def fetch_url_tool(policy: FetchPolicy | None = None, *, budget: int = DEFAULT_BUDGET) -> Tool:
    """A ``fetch_url`` tool: reads a page into the session's files and shows its beginning
    (or, given a ``query``, its passages that match). Needs ``reactchat.knowledge.attach``."""

    async def fetch_url(url: str, ctx: RunContext, query: str = "") -> str:
        """Read a web page, PDF or text file from the web into this chat's files. Returns the
        beginning of its text, or the passages that match `query`; cite them by file name.

        Args:
            url: the full http(s) address
            query: optional words to look for in the page instead of reading its beginning
        """
        # lazy: reactchat.knowledge costs about 0.25 s to import, and reactchat.toolbox loads this module
        from reactchat.knowledge import KnowledgeBase
        from reactchat.knowledge._tool import SERVICE, render

        kb: KnowledgeBase = ctx.services.get(SERVICE) or KnowledgeBase.for_store(ctx.store)
        # a FetchRefused becomes the error observation
        info, beginning = await read_link(kb, ctx.session, url, policy)
        kept = f"{info.chunks} passages, kept {info.retention} rounds"
        intro = f"Read {url} into this chat's files as {info.name!r} ({kept})."
        if beginning and not query:
            text = " ".join(beginning.split())
            cut = text[:budget].rsplit(" ", 1)[0] + " …" if len(text) > budget else text
            return f"{intro} Its beginning [{info.name}]:\n{cut}"
        hits = [h for h in await kb.search(ctx.session, query or info.name, k=50) if h.file_id == info.id]
        return intro + "\n" + render(query or info.name, hits[:5], budget)

    return Tool(fetch_url, effect="read", timeout=DEFAULT_TIMEOUT * 2, max_chars=budget + 400)


#: the built-in tool (public addresses only, or those in ``REACTCHAT_FETCH_ALLOW``)
fetch_url = fetch_url_tool()
