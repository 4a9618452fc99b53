"""Every path a secret could take out of the kernel, beside tool results (tests/test_secrets.py):
a cassette's streamed deltas, an agent's repr, and the errors a run raises. Each case checks the
bytes that left: the file on disk, the repr string, the error message."""

from __future__ import annotations

import base64
import json

import pytest

import bettong_nb
from bettong_nb import events
from bettong_nb.provider import Response
from bettong_nb.providers.replay import Recording, Replay
from bettong_nb.usage import Usage

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
