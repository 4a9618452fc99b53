"""Search as a capability: one tool per source, results as numbered plain text.

Your own source is a function of ``query`` and ``max_results`` returning
``[{"title", "url", "snippet"}]`` (sync or async)::

    from bettong_nb import capabilities as caps

    runbooks = caps.search(
        id="runbooks", tool_name="runbook_search",        # unique across capabilities
        backend=lambda query, max_results: my_index.find(query)[:max_results],
        instructions="runbook_search is the only source of truth for deploys.")

Say what a source covers in ``instructions`` when it is not the open web, or the model
answers from memory instead of searching it. The named sources (``duckduckgo``,
``wikipedia``, ``google``, ``tavily``, ``brave``, ``serper``) are this builder with a
backend that calls their API; the HTTP, error and HTML handling they share lives here.
"""

from __future__ import annotations

import functools
import html
import inspect
import json
import os
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...core.capability import Tool
from ...safety import secrets
from ...errors import ServiceError
from ...http.client import Transport
from ...http.json_body import loads
from ...core.portable import rebuild, withheld

if TYPE_CHECKING:
    import httpx

__all__ = ["SearchCapability", "SearchError", "search", "keyed", "format_results", "strip_tags", "unescape_html"]

DEFAULT_DESCRIPTION = ("Search and return the top results as title, URL and snippet. "
                       "Snippets are short: follow the URL for more.")
RESULTS_TAIL = "Returns the top results as title, URL and snippet; snippets are short, so follow the URL for more."
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what every provider accepts as a function name


class SearchError(ServiceError):
    """A search source failed; the message is written for the model, naming the source."""

    def __init__(self, message: str, *, source: str | None = None, service: str | None = None, **details: Any):
        super().__init__(message, service=source or service or "search", **details)

    @property
    def source(self) -> str:
        return self.service


@dataclass
class SearchCapability:
    """One search source: a single tool that returns numbered title / URL / snippet text."""

    id: str
    instructions: str | None
    tools: list[Tool] = field(default_factory=list)
    secret: str | None = field(default=None, repr=False, compare=False)
    # (factory, its arguments but the key): how a named source travels, see keyed()
    made_by: tuple[Callable[..., Any], dict] | None = field(default=None, repr=False, compare=False)

    def secret_values(self) -> list[str]:
        """The source's key: a page or another tool may quote it back, and it is redacted there."""
        return [self.secret] if self.secret else []

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self.made_by is None:
            return super().__reduce_ex__(protocol)
        factory, settings = self.made_by
        return rebuild, (factory, withheld(settings))


def keyed(factory: Callable[..., SearchCapability]) -> Callable[..., SearchCapability]:
    """For a named source's factory: its capabilities pickle (to a Dask worker) as the call that
    made them without ``api_key``, so the key never enters a task graph; the worker reads it from
    its environment (see :mod:`bettong_nb.portable`)."""
    signature = inspect.signature(factory)

    @functools.wraps(factory)
    def make(*args: Any, **kwargs: Any) -> SearchCapability:
        capability = factory(*args, **kwargs)
        settings = signature.bind(*args, **kwargs).arguments
        settings.pop("api_key", None)
        capability.made_by = (make, settings)
        return capability

    return make


def whole_number(name: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be a whole number of at least {minimum}, not {value!r}")
    return value


def _asked_for(value: Any) -> int | None:
    """The model's max_results as an int; models send 3, 3.0 or "3" alike."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not number.is_integer():
        raise ValueError(f"max_results must be a whole number, not {value!r}")
    return int(number)


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: assume the documented call
        return True
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def search(*, backend: Callable[..., Any] | None = None, id: str = "search", tool_name: str = "search",
           instructions: str | None = None, description: str | None = None,
           max_results: int = 5, snippet_length: int = 300) -> SearchCapability:
    """A capability with one tool, ``tool_name``, that searches through ``backend``.

    ``backend(query=..., max_results=...)`` is called once per search with the model's query
    and the number of results to return (at least 1, at most ``max_results``); a backend
    without a ``max_results`` parameter gets only the query and its extra results are
    trimmed. Whatever it raises reaches the model as ``ERROR: <message>``. ``instructions``
    default to none.
    """
    if not callable(backend):
        raise TypeError(f"a search capability needs a backend function, got {backend!r}; "
                        "pass backend=lambda query, max_results: [{'title': ..., 'url': ..., 'snippet': ...}]")
    if not isinstance(id, str) or not id.strip():
        raise ValueError(f"a search capability needs a non-blank id, not {id!r}")
    if not isinstance(tool_name, str) or not _TOOL_NAME.fullmatch(tool_name):
        raise ValueError(f"tool_name must be 1-64 letters, digits, _ or -, not {tool_name!r}")
    limit = whole_number("max_results", max_results)
    snippet_length = whole_number("snippet_length", snippet_length)
    wants_limit = _accepts(backend, "max_results")

    async def run_search(query: Any = None, max_results: Any = None) -> str:
        text = "" if query is None else str(query).strip()
        if not text:
            raise ValueError("query must not be blank")
        asked = _asked_for(max_results)
        n = limit if asked is None else max(1, min(limit, asked))
        results = backend(query=text, max_results=n) if wants_limit else backend(query=text)
        if inspect.isawaitable(results):
            results = await results
        results = list(results or [])[:n]  # a backend that overshoots is trimmed
        out = format_results(text, results, snippet_length=snippet_length)
        if results and asked is not None and asked > limit:
            out += f"\n\n({tool_name} returns at most {limit} results; {asked} were asked for.)"
        return out

    tool = Tool(
        name=tool_name,
        handler=run_search,
        description=description or DEFAULT_DESCRIPTION,
        parameters={
            "query": {"type": "string", "required": True,
                      "description": "What to search for, in the words you would type into a search engine."},
            "max_results": {"type": "integer", "description": f"How many results to return, at most {limit}."},
        },
    )
    return SearchCapability(id=id, instructions=instructions or None, tools=[tool])


# --- formatting -------------------------------------------------------------------------------

def _field(result: Any, key: str) -> Any:
    return result.get(key) if isinstance(result, Mapping) else getattr(result, key, None)


def _one_line(value: Any) -> str:
    # a newline inside a title or snippet would break the numbered, indented layout
    return "" if value is None else " ".join(str(value).split())


def _shorten(text: str, length: int) -> str:
    if len(text) <= length:
        return text
    cut = text[:length]
    if not text[length].isspace():
        space = cut.rfind(" ")
        if space > length // 2:  # back off to a word boundary unless that loses most of it
            cut = cut[:space]
    return cut.rstrip(" ,;:-") + "..."


def format_results(query: str, results: list[Any], *, snippet_length: int = 300) -> str:
    """Numbered results for the model::

        1. Clojure
           https://clojure.org
           A dynamic Lisp.

    Results are mappings (or objects) with ``title``, ``url`` and ``snippet``; a missing title
    prints ``(untitled)``, a blank snippet is left out, a long one is cut on a word boundary.
    """
    if not results:
        return f"No results for {json.dumps(query, ensure_ascii=False)}."
    entries = []
    for number, result in enumerate(results, 1):
        entry = f"{number}. {_one_line(_field(result, 'title')) or '(untitled)'}\n   {_one_line(_field(result, 'url'))}"
        snippet = _one_line(_field(result, "snippet"))
        if snippet:
            entry += "\n   " + _shorten(snippet, snippet_length)
        entries.append(entry)
    return "\n\n".join(entries)


# --- HTML helpers -----------------------------------------------------------------------------

def unescape_html(text: str | None) -> str | None:
    """Decode HTML entities (``&amp;``, ``&#39;``, ``&eacute;``...); ``&nbsp;`` becomes a space."""
    if text is None:
        return None
    return html.unescape(text).replace("\xa0", " ")


_HIDDEN_TAGS = frozenset({"script", "style", "title"})  # an error page's <title> repeats its <h1>
_BREAKING_TAGS = frozenset({"br", "p", "div", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6"})


class _Text(HTMLParser):
    """The text of an HTML fragment; block tags separate words, script/style/title say nothing."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in _HIDDEN_TAGS:
            self._hidden += 1
        elif tag in _BREAKING_TAGS:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN_TAGS:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _BREAKING_TAGS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def strip_tags(text: str | None) -> str | None:
    """Plain text from an HTML snippet: tags removed, entities decoded, whitespace collapsed.

    ``strip_tags("<b>Clojure</b>&nbsp;&amp; Lisp") == "Clojure & Lisp"``; a ``<`` that starts
    no tag (``a < b``) is kept as text.
    """
    if text is None:
        return None
    parser = _Text()
    parser.feed(str(text))
    parser.close()
    return " ".join("".join(parser.parts).split())


# --- shared by the source modules -------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """A named source: how it is spoken of in errors, where its API key comes from, and the
    capability it makes (tool ``<id>_search``, its default description and instructions)."""

    name: str  # "Brave", as in "Brave search is rate limited"
    id: str  # "brave": the capability's id; the tool is brave_search
    base_url: str
    description: str
    instructions: str
    env: str | None = None  # the variable holding its key
    signup: str | None = None  # where to get one
    max_results: int | None = None  # what its API accepts per query, when it caps it

    def api_key(self, given: str | None) -> str:
        """``given``, else the environment variable; raise saying which variable to set."""
        key = given if given is not None else os.environ.get(self.env or "", "")
        if not key.strip():
            where = f" (get one at {self.signup})" if self.signup else ""
            raise ValueError(f"{self.name} search needs an API key: pass api_key=..., or set {self.env} "
                             f"in the environment{where}")
        return key.strip()

    def endpoint(self, base_url: str | None, path: str) -> str:
        url = (base_url or self.base_url).rstrip("/") + path
        # a password or ?api_key= in it is redacted everywhere, as a held key is: an API's error
        # may echo the request's URL
        secrets.hold(secrets.embedded_credentials(url))
        return url

    def json_api(self, api_key: str | None, path: str, parse: Callable[[Any], list[dict]],
                 request: Callable[[str, str, int], Mapping[str, Any]], *, base_url: str | None, timeout: Any,
                 max_results: int, snippet_length: int, instructions: str | None,
                 description: str | None) -> SearchCapability:
        """The capability of a keyed JSON search API: ``request(key, query, n)`` gives the
        keyword arguments of one :func:`fetch_json` call (method, headers, params or json_body)
        and ``parse`` reads the results from the answer."""
        timeout = seconds(timeout)
        key = self.api_key(api_key)
        endpoint = self.endpoint(base_url, path)

        async def backend(*, query: str, max_results: int) -> list[dict]:
            asked = {"method": "GET", **request(key, query, max_results)}
            return parse(await fetch_json(self, asked.pop("method"), endpoint, timeout=timeout, secret=key, **asked))

        capability = self.capability(backend, max_results=max_results, snippet_length=snippet_length,
                                     instructions=instructions, description=description)
        capability.secret = key
        return capability

    def capability(self, backend: Callable[..., Any], *, max_results: int, snippet_length: int,
                   instructions: str | None, description: str | None) -> SearchCapability:
        """The capability searching through ``backend``; a ``max_results`` the API would refuse
        is refused now, rather than on every search."""
        if self.max_results is not None and whole_number("max_results", max_results) > self.max_results:
            raise ValueError(f"{self.name} search returns at most {self.max_results} results per query (its API's "
                             f"limit), so max_results={max_results} is too many; use {self.max_results} or fewer")
        return search(id=self.id, tool_name=f"{self.id}_search", backend=backend,
                      description=description or self.description,
                      instructions=self.instructions if instructions is None else instructions,
                      max_results=max_results, snippet_length=snippet_length)


def seconds(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return float(timeout)


def _detail(body: str) -> str:
    """What the server said: the message inside its JSON error, else the body's text, on one
    line and whole (the transport cuts the message once it is redacted)."""
    try:
        data = loads(body)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        error, errors, detail = data.get("error"), data.get("errors"), data.get("detail")
        candidates = [
            error.get("message") or error.get("detail") or error.get("info") if isinstance(error, Mapping) else error,
            errors[0].get("detail") or errors[0].get("message")
            if isinstance(errors, list) and errors and isinstance(errors[0], Mapping) else None,
            data.get("message"),
            detail.get("error") or detail.get("message") if isinstance(detail, Mapping) else detail,
        ]
        for candidate in candidates:
            if isinstance(candidate, str) and candidate.strip():
                return _one_line(candidate)
    return _one_line(strip_tags(body) if "<" in body else body)


# Words a server uses when it is the key it refuses, not the request.
_KEY_TROUBLE = re.compile(r"api[ _-]?key|subscription[ _-]?token|unauthori[sz]ed|authenticat|credential", re.I)


class SourceTransport(Transport):
    """A search source's HTTP: one attempt (the model can search again or elsewhere), the whole
    answer within ``timeout`` (a server trickling it byte by byte included), and errors worded
    for the model, naming the source, never the key."""

    def __init__(self, source: Source, *, timeout: float, secret: str | None = None):
        super().__init__(source.name, max_retries=0, secret=lambda: secret, error=SearchError, deadline=timeout,
                         timeout={"connect": timeout, "read": timeout, "write": timeout, "pool": timeout})
        self.source = source
        self.seconds = timeout

    def status_message(self, status: int, body: str) -> str:
        name, detail = self.source.name, _detail(body)
        said = f". {name} said: {detail}" if detail else ""
        key_trouble = bool(_KEY_TROUBLE.search(body))
        if self.source.env and (status == 401 or (status in (400, 403, 422) and key_trouble)
                                or (status == 403 and not detail)):
            return f"{name} search rejected the API key (HTTP {status}) — check {self.source.env}{said}"
        if status == 429:
            return f"{name} search is rate limited (HTTP 429); try again later or use another source"
        if status >= 500:
            return (f"{name} search failed (HTTP {status}): {detail or 'server error'}; "
                    "the service is having trouble, so try again later or use another source")
        return f"{name} search failed (HTTP {status})" + (f": {detail}" if detail else "")

    def connection_message(self, url: str, exc: Exception) -> str:
        import httpx

        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            return f"{self.source.name} search timed out after {self.seconds:g} s; try again or use another source"
        reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
        return f"{self.source.name} search could not be reached ({reason}); try again later or use another source"

    def not_json_message(self, status: int, body: str) -> str:
        return (f"{self.source.name} search answered with something that is not JSON: "
                f"{_one_line(strip_tags(body)) or '(empty body)'}")

    def status_error(self, status: int, body: str) -> SearchError:
        """The error for a non-2xx answer read by the caller (``check=False``)."""
        return self.fail(self.status_message(status, self._redacted(body)), status=status)


async def fetch(source: Source, method: str, url: str, *, timeout: float, params: Mapping[str, Any] | None = None,
                json_body: Any = None, headers: Mapping[str, str] | None = None, secret: str | None = None,
                check: bool = True) -> "httpx.Response":
    """One request to ``url``; with ``check`` a non-2xx answer raises :class:`SearchError`, and so
    do network failures and timeouts, so every failure reads as one sentence naming the source."""
    return await SourceTransport(source, timeout=timeout, secret=secret).request(
        method, url, params=params, payload=json_body, headers=headers, check=check)


async def fetch_json(source: Source, method: str, url: str, *, timeout: float, secret: str | None = None,
                     **kwargs: Any) -> Any:
    """:func:`fetch`, then the body as JSON; a body that is not JSON is an error naming the source."""
    return await SourceTransport(source, timeout=timeout, secret=secret).json(
        method, url, payload=kwargs.pop("json_body", None), **kwargs)


def results_from(items: Any, *, title: str = "title", url: str = "url", snippet: str = "snippet") -> list[dict]:
    """``[{"title", "url", "snippet"}]`` from an API's list of hits, cleaned of HTML highlights.

    A missing or malformed list is no results, not a crash.
    """
    if not isinstance(items, list):
        return []
    return [{"title": strip_tags(item.get(title)), "url": item.get(url), "snippet": strip_tags(item.get(snippet))}
            for item in items if isinstance(item, Mapping)]


def dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...``, or None when any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data
