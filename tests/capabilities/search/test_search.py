"""Search: the builder, result formatting, the HTML helpers, and every source over real HTTP on
127.0.0.1 with response bodies shaped like the real APIs' (tests/corpora/search/)."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

import bettong_nb
from bettong_nb.core.capability import ToolError, registry, schemas
from bettong_nb.capabilities.search.brave import brave, parse_brave
from bettong_nb.capabilities.search.duckduckgo import duckduckgo, parse_duckduckgo, unwrap_duckduckgo_url
from bettong_nb.capabilities.search.google import google, parse_google
from bettong_nb.capabilities.search.base import SearchError, format_results, search, strip_tags, unescape_html
from bettong_nb.capabilities.search.serper import parse_serper, serper
from bettong_nb.capabilities.search.tavily import parse_tavily, tavily
from bettong_nb.capabilities.search.wikipedia import parse_wikipedia, wikipedia
from support import REPO, TESTS
from support.servers import ChatScript, LoopbackServer, Reply, chat_message, tool_call
from support.tools import model_reads

CORPUS = TESTS / "corpora" / "search"
KEYS = {"google": "AIzaSy-test-google-key-000111", "tavily": "tvly-dev-test-key-0123456789",
        "brave": "BSA-test-subscription-token-42", "serper": "serper-test-key-abcdef012345"}
CX = "017576662512468239146:omuauf_lfve"
TWO_RESULTS = "1. Clojure\n   https://clojure.org/\n   A dynamic Lisp.\n\n2. Guides\n   https://clojure.org/guides"
CLOJURE = [{"title": "Clojure", "url": "https://clojure.org/", "snippet": "A dynamic Lisp."},
           {"title": "Guides", "url": "https://clojure.org/guides", "snippet": None}]


def corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def cases(name: str) -> list:
    items = json.loads(corpus(name))
    return [pytest.param(item, id=item["case"]) for item in items]


def build(source: str, url: str, **options):
    """A named source pointed at a loopback server, with an explicit key where it needs one."""
    keyed = {"google": lambda: google(KEYS["google"], CX, base_url=url, **options),
             "tavily": lambda: tavily(KEYS["tavily"], base_url=url, **options),
             "brave": lambda: brave(KEYS["brave"], base_url=url, **options),
             "serper": lambda: serper(KEYS["serper"], base_url=url, **options),
             "duckduckgo": lambda: duckduckgo(base_url=url, **options),
             "wikipedia": lambda: wikipedia(base_url=url, **options)}
    return keyed[source]()


# One loop for the module, so the shared HTTP client (one per loop) is built once, not per call.
call = model_reads  # a search capability has one tool


@pytest.fixture(scope="module")
def _shared_server():
    with LoopbackServer(lambda req: Reply(599)) as server:
        yield server


@pytest.fixture
def api(_shared_server):
    """A loopback API server for one test: set ``api.handler``; ``api.requests`` starts empty.

    Shared across the module because stopping a server costs half a second.
    """
    _shared_server.requests.clear()
    yield _shared_server
    _shared_server.handler = lambda req: Reply(599)


def json_reply(name: str, status: int = 200) -> Reply:
    return Reply(status, corpus(name).encode(), {"Content-Type": "application/json; charset=utf-8"})


def html_reply(name: str, status: int = 200) -> Reply:
    return Reply.text(corpus(name), status)


class Recorder:
    """A backend that remembers what it was asked and answers with canned results."""

    def __init__(self, results=()):
        self.calls = []
        self.results = list(results)

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return self.results


# --- the builder ------------------------------------------------------------------------------

def test_a_search_capability_offers_one_tool_that_advertises_its_cap():
    cap = search(id="docs", tool_name="docs_search", backend=Recorder(), max_results=7)
    assert cap.id == "docs" and cap.instructions is None
    (schema,) = schemas(registry([cap]))
    assert schema["name"] == "docs_search"
    assert schema["parameters"]["required"] == ["query"]
    assert schema["parameters"]["properties"]["query"]["type"] == "string"
    assert schema["parameters"]["properties"]["max_results"] == {
        "type": "integer", "description": "How many results to return, at most 7."}
    assert "title, URL and snippet" in schema["description"]


def test_the_backend_gets_exactly_the_query_and_the_limit():
    backend = Recorder(CLOJURE)
    text = call(search(backend=backend), query="clojure lisp")
    assert backend.calls == [{"query": "clojure lisp", "max_results": 5}]
    assert text == TWO_RESULTS


@pytest.mark.parametrize("asked, sent", [(50, 3), (0, 1), (None, 3), (2, 2), (-4, 1), ("2", 2), (2.0, 2)])
def test_what_the_model_asks_for_is_clamped_to_the_cap(asked, sent):
    backend = Recorder(CLOJURE[:1])
    args = {"query": "q"} if asked is None else {"query": "q", "max_results": asked}
    text = call(search(backend=backend, max_results=3), **args)
    assert backend.calls == [{"query": "q", "max_results": sent}]
    over = asked is not None and int(asked) > 3
    assert text.endswith("(search returns at most 3 results; 50 were asked for.)") is over
    assert text.startswith("1. Clojure\n   https://clojure.org/")


def test_max_results_that_is_not_a_number_is_reported():
    backend = Recorder()
    assert call(search(backend=backend), query="q", max_results="lots") == \
        "ERROR: max_results must be a whole number, not 'lots'"
    assert backend.calls == []


@pytest.mark.parametrize("args", [{"query": "  "}, {}, {"query": None}, {"query": "\n\t"}])
def test_a_blank_query_is_refused_before_the_backend_runs(args):
    backend = Recorder(CLOJURE)
    assert call(search(backend=backend), **args) == "ERROR: query must not be blank"
    assert backend.calls == []


def test_a_backend_that_overshoots_is_trimmed():
    text = call(search(backend=Recorder(CLOJURE), max_results=1), query="clojure")
    assert text == "1. Clojure\n   https://clojure.org/\n   A dynamic Lisp."


def test_a_failing_backend_is_reported_to_the_model():
    def down(query, max_results):
        raise RuntimeError("search API is down")

    assert call(search(backend=down), query="x") == "ERROR: search API is down"


def test_any_function_is_a_backend_async_ones_and_object_results_too():
    @dataclass
    class Hit:
        title: str
        url: str
        snippet: str

    async def runbooks(query, max_results):
        await asyncio.sleep(0)
        return [Hit("Deploy runbook", "https://wiki.internal/deploy", f"How to {query}.")]

    cap = search(id="runbooks", tool_name="runbook_search", backend=runbooks,
                 instructions="runbook_search is the only source of truth for deploys.")
    assert call(cap, query="roll back") == "1. Deploy runbook\n   https://wiki.internal/deploy\n   How to roll back."
    assert cap.instructions == "runbook_search is the only source of truth for deploys."


def test_a_backend_may_ignore_the_limit():
    seen = []

    def find(query):
        seen.append(query)
        return CLOJURE

    assert call(search(backend=find, max_results=1), query="clojure") == \
        "1. Clojure\n   https://clojure.org/\n   A dynamic Lisp."
    assert seen == ["clojure"]
    kwargs = Recorder(CLOJURE)
    call(search(backend=lambda **kw: kwargs(**kw)), query="q")
    assert kwargs.calls == [{"query": "q", "max_results": 5}]


@pytest.mark.parametrize("backend", [None, "duckduckgo", 42])
def test_a_search_capability_needs_a_backend_function(backend):
    with pytest.raises(TypeError, match="needs a backend function"):
        search(id="s", tool_name="s", backend=backend)


@pytest.mark.parametrize("options, message", [
    ({"max_results": 0}, "max_results must be a whole number of at least 1"),
    ({"max_results": True}, "max_results must be a whole number"),
    ({"snippet_length": -1}, "snippet_length must be a whole number"),
    ({"tool_name": "web search"}, "tool_name must be 1-64 letters"),
    ({"id": " "}, "non-blank id"),
])
def test_bad_options_fail_when_the_capability_is_built(options, message):
    with pytest.raises(ValueError, match=message):
        search(backend=Recorder(), **options)


def test_two_sources_with_one_tool_name_fail_loudly():
    with pytest.raises(ToolError, match="Two capabilities both provide the tool web_search"):
        registry([search(id="a", tool_name="web_search", backend=Recorder()),
                  search(id="b", tool_name="web_search", backend=Recorder())])


def test_instructions_and_description_are_overridable():
    cap = duckduckgo(instructions="Only search for recipes.", description="Recipe finder.")
    assert cap.instructions == "Only search for recipes."
    assert cap.tools[0].description == "Recipe finder."
    assert duckduckgo(instructions="").instructions is None


# --- formatting -------------------------------------------------------------------------------

def test_results_are_numbered_plain_text():
    assert format_results("clojure", CLOJURE) == TWO_RESULTS
    odd = [{"title": "", "url": None, "snippet": "  "},
           {"url": "https://x.example", "snippet": "spread\nover\n\n  lines"}]
    assert format_results("q", odd) == "1. (untitled)\n   \n\n2. (untitled)\n   https://x.example\n   spread over lines"


@pytest.mark.parametrize("query, text", [("obscure query", 'No results for "obscure query".'),
                                         ('say "hi"', 'No results for "say \\"hi\\"".'),
                                         ("Vilnius ąčę", 'No results for "Vilnius ąčę".')])
def test_no_results_say_so(query, text):
    assert format_results(query, []) == text
    assert call(search(backend=Recorder()), query=query) == text


@pytest.mark.parametrize("snippet, length, shown", [
    ("The quick brown fox jumps over the lazy dog", 20, "The quick brown fox..."),
    ("The quick brown fox jumps over the lazy dog", 22, "The quick brown fox..."),
    ("The quick brown fox, jumps", 21, "The quick brown fox..."),
    ("x" * 60, 50, "x" * 50 + "..."),
    ("a " + "y" * 60, 50, "a " + "y" * 48 + "..."),
    ("exactly twenty chars", 20, "exactly twenty chars"),
])
def test_long_snippets_are_cut_on_a_word_boundary(snippet, length, shown):
    text = format_results("q", [{"title": "T", "url": "u", "snippet": snippet}], snippet_length=length)
    assert text == f"1. T\n   u\n   {shown}"


def test_snippet_length_reaches_the_tool():
    cap = search(backend=Recorder([{"title": "T", "url": "u", "snippet": "word " * 100}]), snippet_length=12)
    assert call(cap, query="q") == "1. T\n   u\n   word word..."


# --- HTML helpers -----------------------------------------------------------------------------

@pytest.mark.parametrize("case", cases("html_text.json"))
def test_html_becomes_plain_text(case):
    assert strip_tags(case["input"]) == case["strip"]
    if "unescape" in case:
        assert unescape_html(case["input"]) == case["unescape"]


def test_html_helpers_pass_none_through():
    assert strip_tags(None) is None and unescape_html(None) is None


@pytest.mark.parametrize("case", cases("duckduckgo_links.json"))
def test_duckduckgo_links_are_unwrapped_to_the_real_address(case):
    assert unwrap_duckduckgo_url(case["href"]) == case["url"]


# --- DuckDuckGo -------------------------------------------------------------------------------

def test_a_duckduckgo_results_page_is_parsed_in_order_without_the_ad():
    assert parse_duckduckgo(corpus("duckduckgo/results.html")) == [
        {"title": "Clojure", "url": "https://clojure.org/",
         "snippet": "Clojure is a robust, practical, and fast programming language with a set of useful features "
                    "that together form a simple, coherent, and powerful tool. Clojure is a dialect of Lisp, and "
                    "shares with Lisp the code-as-data philosophy."},
        {"title": "Clojure & the JVM - Wikipedia", "url": "https://en.wikipedia.org/wiki/Clojure",
         "snippet": "Clojure (/ˈkloʊʒər/, like closure) is a dynamic and functional dialect of the programming "
                    "language Lisp on the Java platform. Like most other Lisps, Clojure's syntax is built on "
                    "S-expressions that are first parsed into data structures by a Lisp reader before being compiled."},
        # no snippet here, and the next result's snippet is not shifted onto it
        {"title": "Clojure for the Brave and True", "url": "https://www.braveclojure.com/", "snippet": None},
        {"title": 'Is Clojure a "real" Lisp? : r/Clojure - Reddit',
         "url": "https://www.reddit.com/r/Clojure/comments/1abc2de/is_clojure_a_real_lisp/?utm_source=ddg&sort=top",
         "snippet": "It has macros, homoiconicity and a REPL, so yes — but its persistent data structures set it "
                    "apart from Common Lisp & Scheme."},
    ]


def test_duckduckgo_no_results_page_is_no_results_and_a_challenge_is_not():
    assert parse_duckduckgo(corpus("duckduckgo/no_results.html")) == []
    for page, status in [(corpus("duckduckgo/challenge.html"), 200), ("", 202), ("<html></html>", 202)]:
        with pytest.raises(SearchError, match="bot challenge") as raised:
            parse_duckduckgo(page, status=status)
        assert raised.value.source == "DuckDuckGo" and raised.value.status == status


def test_duckduckgo_over_http(api):
    api.handler = lambda req: html_reply("duckduckgo/results.html")
    text = call(build("duckduckgo", api.url), query="clojure lisp", max_results=2)
    req = api.only_request()
    assert (req.method, req.path, req.query) == ("GET", "/html/", {"q": ["clojure lisp"]})
    assert req.headers["user-agent"].startswith("Mozilla/5.0")
    assert req.headers["accept-language"] == "en-US,en;q=0.9"
    assert text == (
        "1. Clojure\n   https://clojure.org/\n   Clojure is a robust, practical, and fast programming language with "
        "a set of useful features that together form a simple, coherent, and powerful tool. Clojure is a dialect "
        "of Lisp, and shares with Lisp the code-as-data philosophy.\n\n"
        "2. Clojure & the JVM - Wikipedia\n   https://en.wikipedia.org/wiki/Clojure\n   Clojure (/ˈkloʊʒər/, like "
        "closure) is a dynamic and functional dialect of the programming language Lisp on the Java platform. Like "
        "most other Lisps, Clojure's syntax is built on S-expressions that are first parsed into data structures "
        "by a Lisp reader before being compiled.")


def test_duckduckgo_with_nothing_found_says_no_results(api):
    api.handler = lambda req: html_reply("duckduckgo/no_results.html")
    assert call(build("duckduckgo", api.url), query="qzxv flurbish obscure query") == \
        'No results for "qzxv flurbish obscure query".'


# --- Wikipedia --------------------------------------------------------------------------------

def test_wikipedia_over_http(api):
    api.handler = lambda req: json_reply("api/wikipedia_results.json")
    text = call(build("wikipedia", api.url, max_results=3), query="rich hickey")
    req = api.only_request()
    assert (req.method, req.path) == ("GET", "/w/api.php")
    assert req.query == {"action": ["query"], "list": ["search"], "format": ["json"],
                         "srsearch": ["rich hickey"], "srlimit": ["3"]}
    assert req.headers["user-agent"].startswith("bettong_nb/")
    assert text == (
        f"1. Rich Hickey\n   {api.url}/wiki/Rich_Hickey\n   Rich Hickey is an American computer programmer and "
        "software consultant. He is the creator of the Clojure programming language and the Datomic database.\n\n"
        f"2. Clojure\n   {api.url}/wiki/Clojure\n   Clojure is a dynamic and functional dialect of the "
        'programming language Lisp on the Java platform. Hickey developed "Clojure" because he wanted a modern Lisp'
        f"\n\n3. Lisp (programming language)\n   {api.url}/wiki/Lisp_(programming_language)")


def test_article_urls_follow_the_edition_that_was_searched():
    lt = parse_wikipedia(json.loads(corpus("api/wikipedia_lt_results.json")), "https://lt.wikipedia.org")
    assert lt == [{"title": "Vilniaus universitetas", "url": "https://lt.wikipedia.org/wiki/Vilniaus_universitetas",
                   "snippet": "Vilniaus universitetas – seniausia aukštoji mokykla Lietuvoje, įkurta 1579 m."}]
    en = parse_wikipedia(json.loads(corpus("api/wikipedia_results.json")))
    assert en[0]["url"] == "https://en.wikipedia.org/wiki/Rich_Hickey"
    odd = parse_wikipedia({"query": {"search": [{"title": "Who Framed Roger Rabbit?"}, {"title": "100% Pure"}]}})
    assert [r["url"] for r in odd] == ["https://en.wikipedia.org/wiki/Who_Framed_Roger_Rabbit%3F",
                                       "https://en.wikipedia.org/wiki/100%25_Pure"]


def test_the_language_picks_the_edition_the_model_is_told_about():
    lt = wikipedia("lt")
    assert "lt.wikipedia.org" in lt.tools[0].description and "lt.wikipedia.org" in lt.instructions
    assert "en.wikipedia.org" in wikipedia().tools[0].description
    with pytest.raises(ValueError, match="edition code"):
        wikipedia("en.evil.example/")


# --- the keyed APIs ---------------------------------------------------------------------------

def test_google_over_http(api):
    api.handler = lambda req: json_reply("api/google_results.json")
    text = call(build("google", api.url, max_results=4), query="clojure")
    req = api.only_request()
    assert (req.method, req.path) == ("GET", "/customsearch/v1")
    assert req.query == {"key": [KEYS["google"]], "cx": [CX], "q": ["clojure"], "num": ["4"]}
    assert text == "1. Clojure\n   https://clojure.org\n   A dynamic Lisp.\n\n2. Guides\n   https://clojure.org/guides"


def test_google_is_capped_at_ten_results(api):
    with pytest.raises(ValueError, match="at most 10 results per query"):
        google(KEYS["google"], CX, max_results=11)
    api.handler = lambda req: json_reply("api/google_results.json")
    text = call(build("google", api.url, max_results=10), query="clojure", max_results=50)
    assert api.only_request().query["num"] == ["10"]
    assert text.endswith("\n\n(google_search returns at most 10 results; 50 were asked for.)")


def test_tavily_over_http(api):
    api.handler = lambda req: json_reply("api/tavily_results.json")
    text = call(build("tavily", api.url), query="clojure lisp", max_results=2)
    req = api.only_request()
    assert (req.method, req.path) == ("POST", "/search")
    assert req.headers["authorization"] == f"Bearer {KEYS['tavily']}"
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {"query": "clojure lisp", "max_results": 2, "search_depth": "basic"}
    assert text == (
        "1. Rationale - Clojure\n   https://clojure.org/about/rationale\n   Clojure is a Lisp not constrained by "
        "backwards compatibility. It extends the code-as-data paradigm to maps and vectors, and defaults to "
        "immutable data.\n\n2. Clojure - Wikipedia\n   https://en.wikipedia.org/wiki/Clojure\n   Clojure is a "
        "dynamic and functional dialect of the programming language Lisp on the Java platform.")


def test_tavily_search_depth_is_sent_and_checked(api):
    api.handler = lambda req: json_reply("api/tavily_empty.json")
    call(build("tavily", api.url, search_depth="advanced"), query="q")
    assert api.only_request().json()["search_depth"] == "advanced"
    with pytest.raises(ValueError, match="search_depth"):
        tavily(KEYS["tavily"], search_depth="deep")


def test_brave_over_http(api):
    api.handler = lambda req: json_reply("api/brave_results.json")
    text = call(build("brave", api.url), query="clojure lisp", max_results=2)
    req = api.only_request()
    assert (req.method, req.path) == ("GET", "/res/v1/web/search")
    assert req.query == {"q": ["clojure lisp"], "count": ["2"]}
    assert req.headers["x-subscription-token"] == KEYS["brave"]
    assert req.headers["accept"] == "application/json"
    assert text == (
        "1. Clojure\n   https://clojure.org/\n   Clojure is a dynamic, general-purpose programming language, "
        "combining the approachability and interactive development of a scripting language with an efficient and "
        "robust infrastructure for multithreaded programming.\n\n2. Clojure - Wikipedia\n   "
        "https://en.wikipedia.org/wiki/Clojure\n   Clojure (/ˈkloʊʒər/, like closure) is a dynamic and functional "
        "dialect of the programming language Lisp on the Java platform.")


def test_serper_over_http(api):
    api.handler = lambda req: json_reply("api/serper_results.json")
    text = call(build("serper", api.url), query="clojure lisp", max_results=2)
    req = api.only_request()
    assert (req.method, req.path) == ("POST", "/search")
    assert req.headers["x-api-key"] == KEYS["serper"]
    assert req.headers["content-type"] == "application/json"
    assert req.json() == {"q": "clojure lisp", "num": 2}
    assert text == (
        "1. Clojure\n   https://clojure.org/\n   Clojure is a robust, practical, and fast programming language with "
        "a set of useful features that together form a simple, coherent, and powerful tool.\n\n"
        "2. Clojure - Wikipedia\n   https://en.wikipedia.org/wiki/Clojure\n   Clojure is a dynamic and functional "
        "dialect of the programming language Lisp on the Java platform.")


@pytest.mark.parametrize("source", ["wikipedia", "google", "tavily", "brave", "serper"])
def test_an_empty_answer_is_no_results(source, api):
    api.handler = lambda req: json_reply(f"api/{source}_empty.json")
    assert call(build(source, api.url), query="qzxv flurbish") == 'No results for "qzxv flurbish".'


def test_malformed_payloads_parse_to_nothing():
    for parse in (parse_google, parse_tavily, parse_brave, parse_serper, parse_wikipedia):
        for body in ({}, None, [], "text", {"items": "x", "results": 3, "web": [], "organic": {}, "query": 1}):
            assert parse(body) == []


@pytest.mark.parametrize("make, env", [(lambda: google(cx=CX), "GOOGLE_API_KEY"), (tavily, "TAVILY_API_KEY"),
                                       (brave, "BRAVE_API_KEY"), (serper, "SERPER_API_KEY")])
def test_a_missing_key_fails_when_the_capability_is_built(monkeypatch, make, env):
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(ValueError, match=f"needs an API key: pass api_key=..., or set {env}"):
        make()
    monkeypatch.setenv(env, "   ")
    with pytest.raises(ValueError, match=env):
        make()


def test_google_needs_a_search_engine_id_after_its_key(monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_CSE_ID", raising=False)
    with pytest.raises(ValueError, match="GOOGLE_API_KEY"):
        google()
    with pytest.raises(ValueError, match="GOOGLE_CSE_ID") as raised:
        google(api_key=KEYS["google"])
    assert "programmablesearchengine.google.com" in str(raised.value)
    monkeypatch.setenv("GOOGLE_API_KEY", KEYS["google"])
    monkeypatch.setenv("GOOGLE_CSE_ID", CX)
    assert google().tools[0].name == "google_search"


@pytest.mark.parametrize("source, header", [("brave", "x-subscription-token"), ("serper", "x-api-key"),
                                            ("tavily", "authorization")])
def test_keys_come_from_the_environment(monkeypatch, source, header, api):
    monkeypatch.setenv(f"{source.upper()}_API_KEY", "env-key-from-the-notebook")
    make = {"brave": brave, "serper": serper, "tavily": tavily}[source]
    api.handler = lambda req: json_reply(f"api/{source}_empty.json")
    call(make(base_url=api.url), query="q")
    assert api.only_request().headers[header].endswith("env-key-from-the-notebook")


@pytest.mark.parametrize("source, cap", [("google", 10), ("brave", 20), ("tavily", 20)])
def test_limits_the_api_would_refuse_are_refused_up_front(source, cap):
    make = {"google": lambda n: google(KEYS["google"], CX, max_results=n),
            "brave": lambda n: brave(KEYS["brave"], max_results=n),
            "tavily": lambda n: tavily(KEYS["tavily"], max_results=n)}[source]
    assert make(cap).tools[0].parameters["max_results"]["description"] == f"How many results to return, at most {cap}."
    with pytest.raises(ValueError, match=f"at most {cap} results per query"):
        make(cap + 1)


# --- failures the model reads -----------------------------------------------------------------

@pytest.mark.parametrize("case", cases("errors.json"))
def test_failures_reach_the_model_as_one_clear_sentence(case, api):
    key = KEYS.get(case["source"], "no-key")
    body = corpus(case["body_file"]) if "body_file" in case else case["body"].replace("{key}", key)
    content_type = case.get("content_type", "application/json")
    reply = Reply(case["status"], body.encode(), {"Content-Type": content_type})
    api.handler = lambda req: reply
    text = call(build(case["source"], api.url), query="clojure")
    assert len(api.requests) == 1, "no retries: the model decides whether to search again"
    if "exact" in case:
        assert text == case["exact"]
    else:
        assert text.startswith(case["prefix"])
    assert key not in text


@pytest.mark.parametrize("timeout", [0, -1, "15", None])
def test_a_timeout_must_be_a_positive_number_of_seconds(timeout):
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        duckduckgo(timeout=timeout)


def test_an_unreachable_source_is_reported():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    text = call(build("brave", url), query="q")
    assert text.startswith("ERROR: Brave search could not be reached (ConnectError")
    assert text.endswith("; try again later or use another source")
    assert KEYS["brave"] not in text


def test_a_slow_source_hits_the_timeout():
    with socket.socket() as listener:  # takes the connection and the request, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        started = time.monotonic()
        text = call(build("serper", f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.3), query="q")
        elapsed = time.monotonic() - started
    assert text == "ERROR: Serper search timed out after 0.3 s; try again or use another source"
    assert 0.3 <= elapsed < 2.5


# --- sources side by side ---------------------------------------------------------------------

def all_sources():
    return [duckduckgo(), wikipedia(), google(KEYS["google"], CX), tavily(KEYS["tavily"]), brave(KEYS["brave"]),
            serper(KEYS["serper"])]


def test_each_source_is_its_own_tool_and_says_what_it_covers():
    caps = all_sources()
    reg = registry(caps)
    assert list(reg) == ["duckduckgo_search", "wikipedia_search", "google_search", "tavily_search",
                         "brave_search", "serper_search"]
    assert [c.id for c in caps] == ["duckduckgo", "wikipedia", "google", "tavily", "brave", "serper"]
    descriptions = [s["description"] for s in schemas(reg)]
    assert len(set(descriptions)) == 6
    for cap, word in zip(caps, ["DuckDuckGo", "Wikipedia", "Google", "Tavily", "Brave", "serper.dev"]):
        assert word in cap.tools[0].description
    ddg, wiki, *keyed = caps
    assert "cite the URLs" in ddg.instructions and "open web" in ddg.instructions
    assert "Wikipedia" in wiki.instructions
    assert all("open web" in c.instructions for c in keyed)
    assert all(c.tools[0].name in c.instructions for c in caps), "instructions name the tool they are about"


def test_an_agent_with_three_sources_uses_the_one_the_model_picks():
    wiki_hits = LoopbackServer(lambda req: json_reply("api/wikipedia_results.json"))
    ddg_hits = LoopbackServer(lambda req: html_reply("duckduckgo/results.html"))
    brave_hits = LoopbackServer(lambda req: json_reply("api/brave_results.json"))
    script = ChatScript([chat_message(tool_calls=[tool_call("wikipedia_search", {"query": "rich hickey",
                                                                                  "max_results": 1}, "c1")]),
                         chat_message("Rich Hickey created Clojure.")])
    with wiki_hits, ddg_hits, brave_hits, LoopbackServer(script) as model:
        caps = [duckduckgo(base_url=ddg_hits.url), wikipedia(base_url=wiki_hits.url),
                brave(KEYS["brave"], base_url=brave_hits.url)]
        result = bettong_nb.openai(base_url=model.url, api_key="sk-test", capabilities=caps).run("Who made Clojure?")
    assert result.output == "Rich Hickey created Clojure."
    first, second = (r.json() for r in model.requests)
    tools = [t["function"] for t in first["tools"]]
    assert [t["name"] for t in tools] == ["duckduckgo_search", "wikipedia_search", "brave_search"]
    assert len({t["description"] for t in tools}) == 3
    system = first["messages"][0]["content"]
    assert all(c.instructions in system for c in caps)
    assert (len(wiki_hits.requests), len(ddg_hits.requests), len(brave_hits.requests)) == (1, 0, 0)
    assert wiki_hits.requests[0].query["srsearch"] == ["rich hickey"]
    (record,) = result.tool_calls
    assert (record.tool, record.capability) == ("wikipedia_search", "wikipedia")
    expected = (f"1. Rich Hickey\n   {wiki_hits.url}/wiki/Rich_Hickey\n   Rich Hickey is an American computer "
                "programmer and software consultant. He is the creator of the Clojure programming language and the "
                "Datomic database.")
    assert record.result == expected
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": expected}


def test_a_challenged_source_tells_the_model_to_use_another():
    ddg_wall = LoopbackServer(lambda req: html_reply("duckduckgo/challenge.html", status=202))
    wiki_hits = LoopbackServer(lambda req: json_reply("api/wikipedia_results.json"))
    script = ChatScript([chat_message(tool_calls=[tool_call("duckduckgo_search", {"query": "rich hickey"}, "c1")]),
                         chat_message(tool_calls=[tool_call("wikipedia_search", {"query": "rich hickey"}, "c2")]),
                         chat_message("He created Clojure.")])
    with ddg_wall, wiki_hits, LoopbackServer(script) as model:
        caps = [duckduckgo(base_url=ddg_wall.url), wikipedia(base_url=wiki_hits.url)]
        result = bettong_nb.openai(base_url=model.url, api_key="sk-test", capabilities=caps).run("Who is he?")
    challenged, found = result.tool_calls
    assert challenged.result.startswith("ERROR: DuckDuckGo answered with a bot challenge")
    assert "No results" not in challenged.result and "another search source" in challenged.result
    assert found.result.startswith("1. Rich Hickey\n")
    assert result.done and result.output == "He created Clojure."


def test_a_google_search_and_answer_run_over_http():
    script = ChatScript([chat_message(tool_calls=[tool_call("google_search", {"query": "clojure",
                                                                               "max_results": 1}, "c1")]),
                         chat_message("Clojure is a dynamic Lisp.")])
    with LoopbackServer(lambda req: json_reply("api/google_results.json")) as api, LoopbackServer(script) as model:
        cap = google(KEYS["google"], CX, base_url=api.url)
        result = bettong_nb.openai(base_url=model.url, api_key="sk-test", capabilities=[cap]).run("What is Clojure?")
    assert api.only_request().query["q"] == ["clojure"]
    assert result.tool_calls[0].result == "1. Clojure\n   https://clojure.org\n   A dynamic Lisp."
    assert all(r.headers["authorization"] == "Bearer sk-test" for r in model.requests)
    assert KEYS["google"] not in json.dumps([r.json() for r in model.requests])


def test_the_package_names_stay_constructors_whatever_was_imported_first():
    code = ("import bettong_nb.capabilities as caps, types\n"
            "caps.duckduckgo\n"
            "from bettong_nb.capabilities.search.brave import parse_brave\n"
            "bad = [n for n in ('search', 'duckduckgo', 'brave') if isinstance(getattr(caps, n), types.ModuleType)]\n"
            "assert not bad, bad\n")
    root = REPO
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr
