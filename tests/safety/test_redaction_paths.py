"""Every path a secret could take out of the kernel, beside tool results (tests/test_secrets.py):
a cassette's streamed deltas, an agent's repr, and the errors a run raises. Each case checks the
bytes that left: the file on disk, the repr string, the error message."""

from __future__ import annotations

import base64
import json

import pytest

import bettong_nb
from bettong_nb import events
from bettong_nb.core.provider import Response
from bettong_nb.providers.replay import Recording, Replay
from bettong_nb.core.usage import Usage
from support.servers import ChatScript, LoopbackServer, Reply, chat_message

KEY = "sk-proj-Q7w2E9r4T1y8U3i6O0p5"  # the provider's own key
ENV = "vault-Z3x8C1v6B9n2M5q4W7e0"  # the value of a credential-named variable


class SplittingModel:
    """Streams an answer holding both secrets, cut into deltas at every place in turn."""

    name, model = "splitter", "splitter-1"

    def __init__(self, text: str, size: int):
        self.text, self.size = text, size

    def secret_values(self):
        return [KEY]

    async def complete(self, request):
        return Response(content=[{"type": "text", "text": self.text}], usage=Usage(requests=1))

    async def stream(self, request, on_event):
        for start in range(0, len(self.text), self.size):
            on_event(events.TextDelta(self.text[start:start + self.size]))
        return await self.complete(request)


def _pieces(secret: str) -> list[str]:
    """What a leak would look like: the secret, any 10 characters of it, its base64."""
    return [secret, base64.b64encode(secret.encode()).decode(),
            *(secret[i:i + 10] for i in range(len(secret) - 9))]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11, 16])
def test_a_cassette_never_rebuilds_a_secret_split_across_deltas(tmp_path, monkeypatch, size):
    monkeypatch.setenv("PAYMENTS_API_TOKEN", ENV)
    answer = f"The key is {KEY} and the vault says {ENV}; done."
    path = tmp_path / "split.jsonl"
    recorded = bettong_nb.agent(provider=Recording(SplittingModel(answer, size), path), stream=True).run("go")
    text = path.read_text()
    for secret in (KEY, ENV):
        for piece in _pieces(secret):
            assert piece not in text, (size, piece)
    (record,) = [json.loads(line) for line in text.splitlines()]
    joined = "".join(d["text"] for d in record["stream"])
    assert joined == record["response"]["content"][0]["text"] == (
        "The key is [redacted] and the vault says [redacted]; done.")
    assert recorded.output == answer  # the live run itself is the model's own answer
    seen = []
    replayed = bettong_nb.agent(provider=Replay(path), stream=True, on_event=seen.append).run("go")
    assert "".join(e.text for e in seen if isinstance(e, events.TextDelta)) == replayed.output == joined


def test_an_agents_repr_shows_no_key():
    agent = bettong_nb.openai(api_key=KEY, base_url="http://127.0.0.1:9/v1")
    for shown in (repr(agent), repr(agent.provider), str(agent.options)):
        assert KEY not in shown


def test_provider_errors_carry_no_secret_from_any_path(monkeypatch):
    """A provider of your own that puts a secret in its error: the run's error is scrubbed."""
    monkeypatch.setenv("PAYMENTS_API_TOKEN", ENV)

    class Leaky:
        def secret_values(self):
            return [KEY]

        async def complete(self, request):
            raise bettong_nb.ProviderError(f"auth failed for {KEY} ({ENV})", provider="leaky",
                                           body_excerpt=f'{{"key": "{KEY}"}}')

        async def stream(self, request, on_event):
            return await self.complete(request)

    with pytest.raises(bettong_nb.ProviderError) as caught:
        bettong_nb.agent(provider=Leaky()).run("go")
    assert KEY not in str(caught.value) and ENV not in str(caught.value)
    assert KEY not in caught.value.body_excerpt and "[redacted]" in str(caught.value)


# --- errors quoting what a server sent: redacted whole, cut after ---------------------------------

def _sse_reply(*events_: str) -> Reply:
    return Reply(200, headers={"Content-Type": "text/event-stream"},
                 chunks=[f"data: {event}\n\n".encode() for event in events_])


def _ndjson_reply(*lines: str) -> Reply:
    return Reply(200, headers={"Content-Type": "application/x-ndjson"}, chunks=[f"{line}\n".encode() for line in lines])


# Each: the preset, whether it streams, and the reply quoting ``said`` (filler then both secrets)
# in one of the places a provider error quotes a server from.
SERVER_QUOTES = {
    "openai stream event not JSON": ("openai", True, lambda said: _sse_reply(said)),
    "openai message not an object": ("openai", False, lambda said: Reply.json({"choices": [{"message": said}]})),
    "anthropic error in a 200": ("anthropic", False, lambda said: Reply.json(
        {"type": "error", "error": {"type": "invalid_request_error", "message": said}})),
    "anthropic stream error event": ("anthropic", True, lambda said: _sse_reply(json.dumps(
        {"type": "error", "error": {"type": "overloaded_error", "message": said}}))),
    "anthropic stream event not JSON": ("anthropic", True, lambda said: _sse_reply(said)),
    "ollama error in a 200": ("ollama", False, lambda said: Reply.json({"error": said})),
    "ollama stream line not JSON": ("ollama", True, lambda said: _ndjson_reply(said)),
    "ollama stream error line": ("ollama", True, lambda said: _ndjson_reply(json.dumps({"error": said}))),
    "an HTTP 500 body": ("openai", False, lambda said: Reply.text(said, 500, "text/plain")),
}


@pytest.mark.parametrize("filler", [150, 190, 230, 250, 262, 270, 280, 290, 300, 340])
@pytest.mark.parametrize("path", sorted(SERVER_QUOTES))
def test_an_error_quoting_the_server_never_keeps_a_piece_of_a_secret_at_its_cut(monkeypatch, path, filler):
    """A secret wherever the message is cut short: redacted whole first, so no prefix survives
    in the error, its Retry events or the CLI's line."""
    monkeypatch.setenv("PAYMENTS_API_TOKEN", ENV)
    preset, stream, reply = SERVER_QUOTES[path]
    said = "x" * filler + KEY + " " + ENV
    seen = []
    with LoopbackServer(lambda request: reply(said)) as server:
        agent = getattr(bettong_nb, preset)(base_url=server.url, api_key=KEY, model="m", max_retries=1,
                                            stream=stream, on_event=seen.append)
        agent.provider.transport.backoff = 0.001
        with pytest.raises(bettong_nb.ProviderError) as caught:
            agent.run("go")
    shown = [str(caught.value), caught.value.body_excerpt or "",
             *(event.reason for event in seen if isinstance(event, events.Retry))]
    for secret in (KEY, ENV):
        for piece in [secret[:8], *_pieces(secret)]:
            assert not any(piece in text for text in shown), (path, filler, piece, shown)
    assert len(str(caught.value)) <= bettong_nb.errors.MESSAGE_CHARS


def test_a_retry_event_shows_no_key(monkeypatch):
    """A retried stream error quoting the key: the Retry event the display prints is redacted too."""
    seen = []
    overloaded = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": f"bad key {KEY}"}})
    with LoopbackServer(lambda request: _sse_reply(overloaded)) as server:
        agent = bettong_nb.anthropic(base_url=server.url, api_key=KEY, model="m", max_retries=2, stream=True,
                                     on_event=seen.append)
        agent.provider.transport.backoff = 0.001
        with pytest.raises(bettong_nb.ProviderError):
            agent.run("go")
    retries = [event for event in seen if isinstance(event, events.Retry)]
    assert len(retries) == 2 and all("[redacted]" in event.reason and KEY not in event.reason for event in retries)


# --- credentials in base_url ---------------------------------------------------------------------

PASSWORD = "Hunter2-pw-9f8e7d6c5b"
CREDENTIAL_URLS = [
    f"http://alice:{PASSWORD}@127.0.0.1:9/v1",
    f"http://{PASSWORD}:@127.0.0.1:9/v1",  # a token as the user name, empty password
    f"http://{PASSWORD}@127.0.0.1:9/v1",
    f"http://alice:{PASSWORD}\"x@127.0.0.1:9/v1",  # characters that end a URL in prose
    f"http://alice:{PASSWORD} x@127.0.0.1:9/v1",
    f"http://alice:{PASSWORD}<x@127.0.0.1:9/v1",
    f"http://alice:{PASSWORD}'x@127.0.0.1:9/v1",
    f"http://alice:{PASSWORD}`x@127.0.0.1:9/v1",
    f"http://127.0.0.1:9/v1?api_key={PASSWORD}",
    f"http://127.0.0.1:9/v1?x=1&access_token={PASSWORD}",
]


@pytest.mark.parametrize("preset", ["openai", "anthropic", "ollama"])
@pytest.mark.parametrize("url", CREDENTIAL_URLS)
def test_credentials_in_base_url_show_in_no_repr_and_no_error(preset, url):
    agent = getattr(bettong_nb, preset)(base_url=url, api_key=KEY, model="m", max_retries=0)
    with pytest.raises(bettong_nb.ProviderError) as caught:
        agent.run("go")
    for shown in (repr(agent), repr(agent.provider), repr(agent.options), str(caught.value)):
        assert PASSWORD[:10] not in shown and KEY not in shown, shown


# --- a search source's key -------------------------------------------------------------------------

SEARCH_KEY = "srchZ3x8C1v6B9n2M5q4W7e0key"


@pytest.mark.parametrize("source", ["brave", "serper", "tavily", "google"])
def test_a_search_key_quoted_back_by_a_page_is_redacted_and_never_pickled(tmp_path, monkeypatch, source):
    """The key given as api_key= is no environment value: the capability holds it, so a result
    quoting it reaches neither the model nor a saved session; pickled (for a Dask worker), the
    capability is the call that made it, without the key."""
    import cloudpickle

    from bettong_nb import capabilities as caps
    from bettong_nb.providers.scripted import Scripted

    hit = {"title": "t", "url": "https://example.invalid", "description": f"echo {SEARCH_KEY}",
           "snippet": f"echo {SEARCH_KEY}", "content": f"echo {SEARCH_KEY}", "link": "https://example.invalid"}
    body = {"web": {"results": [hit]}, "organic": [hit], "results": [hit], "items": [hit]}
    extra = {"cx": "engine"} if source == "google" else {}
    with LoopbackServer(lambda request: Reply.json(body)) as server:
        capability = getattr(caps, source)(api_key=SEARCH_KEY, base_url=server.url, **extra)
        model = Scripted([[(f"{source}_search", {"query": "q"})], "done"])
        session = bettong_nb.agent(provider=model, capabilities=[capability]).session()
        session.run("go")
    sent = json.dumps([repr(message) for message in model.requests[-1].messages])
    assert "echo [redacted]" in sent and SEARCH_KEY not in sent
    session.save(tmp_path / "s.json")
    assert SEARCH_KEY not in (tmp_path / "s.json").read_text()
    pickled = cloudpickle.dumps(capability)
    assert SEARCH_KEY.encode() not in pickled
    monkeypatch.setenv(f"{source.upper()}_API_KEY", "worker-own-key-0123456789")  # the worker's environment
    rebuilt = cloudpickle.loads(pickled)
    assert rebuilt.tools[0].name == f"{source}_search" and rebuilt.secret_values() == ["worker-own-key-0123456789"]


def test_a_cassette_keeps_no_secret_broken_across_lines(tmp_path, monkeypatch):
    """The cassette is JSON, where a line break is the two characters \\n: each string is
    redacted before it is written, so a value broken across lines is caught as it is in output."""
    monkeypatch.setenv("PAYMENTS_API_TOKEN", ENV)
    broken = ENV[:12] + "\n" + ENV[12:]
    path = tmp_path / "c.jsonl"
    with LoopbackServer(ChatScript([chat_message("echo: " + broken)])) as server:
        live = bettong_nb.openai(base_url=server.url, api_key=KEY, model="m").provider
        bettong_nb.agent(provider=Recording(live, path)).run("config:\n" + broken)
    text = path.read_text()
    assert ENV[:12] not in text and ENV[12:] not in text and "[redacted]" in text
