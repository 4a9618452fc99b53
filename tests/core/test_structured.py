"""Structured output (``output_type``) against a loopback server per wire format: the schema in
each provider's native form, answers validated into the type, corrections, tools, batches."""

from __future__ import annotations

import copy
import dataclasses
import enum
import json
import os
import subprocess
import sys
from typing import Annotated, Literal, NotRequired, TypedDict

import pandas as pd
import pydantic
import pytest

import bettong_nb
from bettong_nb.core.agent import BASE_SYSTEM_PROMPT
from bettong_nb.errors import OptionError
from bettong_nb.providers.anthropic import output_schema
from bettong_nb.providers.openai import SCHEMA_INSTRUCTIONS
from bettong_nb.core.structured import Invalid, Shape
from support import REPO
from support.servers import ChatScript, LoopbackServer, Reply, chat_message
from support.wire import KEY, weather



class Sentiment(enum.Enum):
    POSITIVE = "positive"
    NEUTRAL = "neutral"
    NEGATIVE = "negative"


@dataclasses.dataclass
class Entity:
    name: str
    kind: Literal["person", "place", "thing"]


@dataclasses.dataclass
class Review:
    stars: Annotated[int, "from 1 to 5"]
    sentiment: Sentiment
    score: float
    recommended: bool
    topics: list[str]
    entities: list[Entity]
    summary: str | None = None


class ReviewDict(TypedDict):
    stars: int
    sentiment: Sentiment
    topics: NotRequired[list[str]]


class ReviewModel(pydantic.BaseModel):
    stars: int = pydantic.Field(ge=1, le=5)
    sentiment: Sentiment
    entities: list[Entity]


REVIEW = {"stars": 4, "sentiment": "positive", "score": 0.82, "recommended": True, "topics": ["price", "service"],
          "entities": [{"name": "Vilnius", "kind": "place"}]}
REVIEW_VALUE = Review(4, Sentiment.POSITIVE, 0.82, True, ["price", "service"], [Entity("Vilnius", "place")])


# --- a text answer in each wire format ---------------------------------------------------------

def answer(w, text: str) -> dict:
    """The wire's recorded answer with ``text`` as what the model said."""
    body = copy.deepcopy(w.body("answer"))
    if w.name == "openai":
        body["choices"][0]["message"]["content"] = text
    elif w.name == "anthropic":
        body["content"] = [{"type": "text", "text": text}]
    else:
        body["message"]["content"] = text
    return body


def native_format(w, body: dict) -> dict:
    """Where each wire format carries the answer's schema."""
    if w.name == "openai":
        assert body["response_format"]["type"] == "json_schema" and body["response_format"]["json_schema"]["name"]
        return body["response_format"]["json_schema"]["schema"]
    if w.name == "anthropic":
        assert body["output_config"]["format"]["type"] == "json_schema"
        return body["output_config"]["format"]["schema"]
    return body["format"]


def last_user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    assert body["messages"][-1]["role"] == "user"
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


# --- over the three wire formats ---------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_the_request_carries_the_schema_in_the_native_form_and_the_value_is_typed(w, board, stream):
    server = board.serve(w.name, w.script([answer(w, json.dumps(REVIEW))]))
    result = w.build(server.url, stream=stream).run("Review: lovely stay in Vilnius", output_type=Review)
    assert result.done and result.data == REVIEW_VALUE and isinstance(result.data.sentiment, Sentiment)
    assert result.output == json.dumps(REVIEW), "the raw text stays as the model wrote it"
    sent = native_format(w, server.only_request().json())
    expected = Shape.of(Review).schema
    assert sent == (output_schema(expected) if w.name == "anthropic" else expected)
    assert sent["properties"]["stars"] == {"type": "integer", "description": "from 1 to 5"}
    assert sent["properties"]["sentiment"]["enum"] == ["positive", "neutral", "negative"]
    assert sent["properties"]["entities"]["items"]["properties"]["kind"]["enum"] == ["person", "place", "thing"]
    assert sent["required"] == ["stars", "sentiment", "score", "recommended", "topics", "entities"]


def test_an_invalid_answer_is_sent_back_with_what_was_wrong(w, board):
    wrong = {**REVIEW, "stars": "four", "sentiment": "glad"}
    server = board.serve(w.name, w.script([answer(w, json.dumps(wrong)), answer(w, json.dumps(REVIEW))]))
    result = w.build(server.url).run("Review: lovely", output_type=Review)
    assert result.done and result.data == REVIEW_VALUE and result.steps == 2
    first, second = (r.json() for r in server.requests)
    told = last_user_text(second)
    assert '$.stars: expected integer, got "four"' in told
    assert '$.sentiment: must be one of "positive", "neutral", "negative"; got "glad"' in told
    assert "four" in json.dumps(second["messages"][-2]), "the wrong answer is in the transcript before the correction"
    assert native_format(w, second) == native_format(w, first), "the retry still asks for the schema"


def test_retries_exhausted_leave_the_run_not_done_with_the_reason(w, board):
    bad = answer(w, "Four stars, I'd say.")
    server = board.serve(w.name, w.script([bad, bad, bad]))
    result = w.build(server.url).run("Review: fine", output_type=Review)
    assert len(server.requests) == 3, "output_retries=2: three requests for the answer"
    assert (result.done, result.data, result.stop_reason) == (False, None, "invalid_output")
    assert result.reason.startswith("the answer did not match Review: the answer is not JSON")
    assert result.output == "Four stars, I'd say."
    server = board.serve(w.name, w.script([bad]))
    once = w.build(server.url).run("Review: fine", output_type=Review, output_retries=0)
    assert len(server.requests) == 1 and once.done is False


def test_tools_first_then_an_answer_in_the_schema(w, board):
    @dataclasses.dataclass
    class Weather:
        city: str
        raining: bool
        celsius: int

    cities = []
    turns = [w.body(w.tool_case), answer(w, '```json\n{"city": "Vilnius", "raining": true, "celsius": 11}\n```')]
    server = board.serve(w.name, w.script(turns))
    result = w.build(server.url, capabilities=[weather(cities)]).run("Weather in Vilnius?", output_type=Weather)
    assert cities == ["Vilnius"] and [c.status for c in result.tool_calls] == ["ok"]
    assert result.done and result.data == Weather("Vilnius", True, 11), "a fenced answer is read inside its fence"
    first, second = (r.json() for r in server.requests)
    assert native_format(w, first) == native_format(w, second)
    assert w.tool_results(second) == ["raining in Vilnius, 11 °C"]


KINDS = {
    "dataclass": (Review, json.dumps(REVIEW), REVIEW_VALUE),
    "typeddict": (ReviewDict, '{"stars": 3, "sentiment": "neutral"}', {"stars": 3, "sentiment": Sentiment.NEUTRAL}),
    "pydantic": (ReviewModel, '{"stars": 5, "sentiment": "negative", "entities": [{"name": "Ada", "kind": "person"}]}',
                 ReviewModel(stars=5, sentiment=Sentiment.NEGATIVE, entities=[Entity("Ada", "person")])),
    "enum": (Sentiment, '{"value": "negative"}', Sentiment.NEGATIVE),
    "literal": (Literal["spam", "ham"], '{"value": "ham"}', "ham"),
    "json schema": ({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                     "required": ["tags"]}, '{"tags": ["a", "b"]}', {"tags": ["a", "b"]}),
}


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_output_type_gives_a_value_of_it(w, board, kind):
    output_type, text, expected = KINDS[kind]
    server = board.serve(w.name, w.script([answer(w, text)]))
    result = w.build(server.url).run("Classify it", output_type=output_type)
    assert result.done and result.data == expected and type(result.data) is type(expected)
    sent = native_format(w, server.only_request().json())
    assert sent["type"] == "object", "every provider is asked for an object at the top"
    if kind in ("enum", "literal"):
        assert sent["properties"]["value"]["enum"] == ([s.value for s in Sentiment] if kind == "enum"
                                                       else ["spam", "ham"])


# --- DeepSeek: JSON mode, the schema in the system text -----------------------------------------

def test_deepseek_gets_json_mode_and_the_schema_in_its_system_text():
    turns = [chat_message('{"stars": 2}', model="deepseek-v4-flash"),
             chat_message('{"stars": 2, "sentiment": "negative"}', model="deepseek-v4-flash")]
    with LoopbackServer(ChatScript(turns)) as server:
        result = bettong_nb.deepseek(base_url=server.url, api_key=KEY).run("Review: meh", output_type=ReviewDict)
    assert result.data == {"stars": 2, "sentiment": Sentiment.NEGATIVE}
    first, second = (r.json() for r in server.requests)
    assert first["response_format"] == {"type": "json_object"}
    system = first["messages"][0]
    assert system["role"] == "system" and system["content"].startswith(BASE_SYSTEM_PROMPT)
    head, _, schema = system["content"].rpartition(SCHEMA_INSTRUCTIONS)
    assert head and json.loads(schema) == Shape.of(ReviewDict).schema
    assert "$.sentiment: required, but missing" in last_user_text(second)
    assert second["messages"][0] == system, "the system text, and so the cached prefix, stays the same"


# --- sessions and batches -----------------------------------------------------------------------

def _labeller():
    """A chat server answering 'Review: <text>' prompts from the text: stars are the count of '*',
    sentiment and topics from words in it; a prompt containing 'garbage' always gets prose back."""

    def handle(request):
        body = request.json()
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        text = prompt.removeprefix("Review: ")
        if "garbage" in text:
            return Reply.json(chat_message("I cannot rate this."))
        stars = text.count("*")
        sentiment = "positive" if stars >= 4 else "negative" if stars <= 2 else "neutral"
        topics = [word for word in ("price", "staff", "food") if word in text]
        return Reply.json(chat_message(json.dumps({
            "stars": stars, "sentiment": sentiment, "score": stars / 5, "recommended": stars >= 4, "topics": topics,
            "entities": [{"name": "Vilnius", "kind": "place"}] if "Vilnius" in text else []})))

    return LoopbackServer(handle)


def test_map_frame_gives_one_typed_column_per_field_and_an_error_column():
    reviews = pd.DataFrame({"id": [10, 11, 12, 13],
                            "text": ["***** staff in Vilnius", "** price", "garbage", "*** food and price"]})
    with _labeller() as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        out = agent.map_frame(reviews, prompt="Review: {text}", output_type=Review, concurrency=4, progress=False)
    assert out["id"].tolist() == [10, 11, 12, 13] and reviews.columns.tolist() == ["id", "text"]
    assert out["stars"].dtype == "Int64" and out["stars"].tolist()[:2] == [5, 2]
    assert out["score"].dtype == "Float64" and out["recommended"].dtype == "boolean"
    assert isinstance(out["sentiment"].dtype, pd.CategoricalDtype)
    assert list(out["sentiment"].cat.categories) == ["positive", "neutral", "negative"]
    assert out["sentiment"].tolist()[:2] == ["positive", "negative"] and out["sentiment"].tolist()[3] == "neutral"
    assert out["topics"].dtype == object and out["topics"].tolist()[3] == ["price", "food"]
    assert out["entities"][0] == [Entity("Vilnius", "place")]
    assert out["summary"].dtype == "string" and out["summary"].isna().all()
    failed = out.iloc[2]
    assert all(pd.isna(failed[c]) for c in ("stars", "sentiment", "score", "recommended", "topics", "entities"))
    assert failed["error"].startswith("the answer did not match Review: the answer is not JSON")
    assert out["error"].isna().tolist() == [True, True, False, True]
    usage = out.attrs["usage_frame"]
    assert usage.groupby("item").size().tolist() == [1, 1, 3, 1], "the failed row was asked three times"


def test_map_frame_with_a_category_fills_the_output_column():
    frame = pd.DataFrame({"text": ["*****", "*", "***"]})
    with _labeller() as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY, output_type=Review)
        typed = agent.map_frame(frame, prompt="Review: {text}", progress=False)  # the agent's own output_type
    assert typed["stars"].tolist() == [5, 1, 3]
    turns = [chat_message('{"value": "spam"}'), chat_message('"ham"')]
    with LoopbackServer(ChatScript(turns)) as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        out = agent.map_frame(pd.DataFrame({"text": ["buy now", "hi mum"]}), prompt="{text}", output="label",
                              output_type=Literal["spam", "ham"], concurrency=1, progress=False)
    assert out["label"].tolist() == ["spam", "ham"] and list(out["label"].cat.categories) == ["spam", "ham"]


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node]


def test_map_frame_refuses_an_unsupported_type_before_any_request():
    with _labeller() as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        with pytest.raises(TypeError, match="Node refers to itself"):
            agent.map_frame(pd.DataFrame({"text": ["x"]}), prompt="{text}", output_type=Node, progress=False)
        assert server.requests == []


def _answering(answers: dict[str, object]) -> LoopbackServer:
    """A model that answers each prompt with the JSON of ``answers[prompt]``."""
    def handle(request):
        prompt = next(m["content"] for m in request.json()["messages"] if m["role"] == "user")
        return Reply.json(chat_message(json.dumps(answers[prompt])))

    return LoopbackServer(handle)


@dataclasses.dataclass
class Count:
    n: int


class Aliased(pydantic.BaseModel):
    score_value: int = pydantic.Field(alias="Score")
    label: Sentiment


def test_map_frame_keeps_every_answer_whatever_its_shape():
    answers = {"big": {"n": 1e20}, "ok": {"n": 5}, "huge": {"n": 2 ** 70}, "neg": {"n": -3},
               "d1": {"a": 1, "b": 2}, "d2": {}, "p1": {"Score": 4, "label": "neutral"}}
    with _answering(answers) as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        counts = agent.map_frame(pd.DataFrame({"q": ["big", "ok", "huge", "neg"]}), prompt="{q}",
                                 output_type=Count, progress=False)
        maps = agent.map_frame(pd.DataFrame({"q": ["d1", "d2"]}), prompt="{q}", output_type=dict[str, int],
                               progress=False)
        objects = agent.map_frame(pd.DataFrame({"q": ["d1"]}), prompt="{q}", output="answer",
                                  output_type={"type": "object"}, progress=False)
        aliased = agent.map_frame(pd.DataFrame({"q": ["p1"]}), prompt="{q}", output_type=Aliased, progress=False)
    # A value its Int64 column cannot hold fails that row only; the paid others are kept.
    assert counts["n"].dtype == "Int64" and counts["n"].tolist()[1::2] == [5, -3]
    assert counts["n"].isna().tolist() == [True, False, True, False]
    assert counts["error"].isna().tolist() == [False, True, False, True]
    assert counts["error"][0].startswith("n: 100000000000000000000 does not fit the column")
    assert counts["error"][2].startswith(f"n: {2 ** 70} does not fit the column")
    assert len(counts.attrs["usage_frame"]) == 4
    # An object without named fields is one object column holding each answer.
    assert maps["output"].tolist() == [{"a": 1, "b": 2}, {}] and maps["error"].isna().all()
    assert objects["answer"].tolist() == [{"a": 1, "b": 2}]
    # A pydantic alias names the column, and the value is read by it.
    assert aliased.columns.tolist() == ["q", "Score", "label", "error"]
    assert aliased["Score"].tolist() == [4] and aliased["label"].tolist() == ["neutral"]


@pytest.mark.parametrize("frame, output_type, output, taken", [
    (pd.DataFrame({"name": ["x"]}), Entity, "output", "'name'"),
    (pd.DataFrame({"text": ["x"], "error": ["mine"]}), Count, "output", "'error'"),
    (pd.DataFrame({"text": ["x"], "output": ["mine"]}), None, "output", "'output'"),
    (pd.DataFrame({"text": ["x"], "label": ["mine"]}), Sentiment, "label", "'label'"),
])
def test_map_frame_never_overwrites_a_column_and_says_so_before_any_request(frame, output_type, output, taken):
    with _labeller() as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        with pytest.raises(ValueError, match=f"the frame already has column {taken}, which map_frame would fill"):
            agent.map_frame(frame, prompt="{%s}" % frame.columns[0], output=output, output_type=output_type,
                            progress=False)
        assert server.requests == []


class Pair(enum.Enum):
    A = (1, 2)
    B = (3, 4)


class Opaque(enum.Enum):
    A = object()


@pytest.mark.parametrize("bad_type, message", [
    (Pair, r"Pair: the choice \(1, 2\) is not a JSON string"),
    (Opaque, "Opaque: the choice <object"),
    (Literal[b"x"], r"the choice b'x' is not a JSON"),
    (Annotated[int, {"ge": 1}], r"Annotated\[..., \{'ge': 1\}\]: only a description string"),
    (Annotated[int, pydantic.Field(ge=1)], r"Annotated\[..., FieldInfo.*only a description string"),
    (list[Annotated[int, pydantic.Field(ge=1)]], "only a description string"),
    ([{"type": "integer"}], "output_type must be a type or a JSON Schema dict, not list"),
])
def test_types_that_cannot_work_are_refused_before_any_request(bad_type, message):
    with _labeller() as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        with pytest.raises(TypeError, match=message):
            agent.run("x", output_type=bad_type)
        with pytest.raises(TypeError, match=message):
            agent.map_frame(pd.DataFrame({"text": ["x"]}), prompt="{text}", output_type=bad_type, progress=False)
        assert server.requests == []


@pytest.mark.parametrize("retries", ["2", -1, 1.5, True])
def test_output_retries_is_checked_before_any_request(retries):
    with _labeller() as server:
        with pytest.raises(OptionError, match="output_retries must be a whole number of at least 0, not "):
            bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY, output_retries=retries)
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        with pytest.raises(OptionError, match="output_retries must be"):
            agent.run("x", output_type=Count, output_retries=retries)
        assert server.requests == []


def test_sessions_and_map_take_an_output_type():
    with _labeller() as server:
        agent = bettong_nb.openai(base_url=server.url + "/v1", api_key=KEY)
        chat = agent.session()
        typed = chat.run("Review: **** price", output_type=Review)
        results = agent.map(["Review: *", "Review: ****"], output_type=Review, progress=False)
    assert typed.data.stars == 4 and chat.transcript[-1]["role"] == "assistant"
    assert [r.data.sentiment for r in results] == [Sentiment.NEGATIVE, Sentiment.POSITIVE]


# --- the shapes themselves ----------------------------------------------------------------------

def test_what_the_model_is_told_is_exact_and_bounded():
    shape = Shape.of(ReviewModel)
    with pytest.raises(Invalid) as bad:
        shape.parse('{"stars": 9, "sentiment": "positive", "entities": [{"name": "x", "kind": "boat"}]}')
    assert "$.stars: Input should be less than or equal to 5, got 9" in str(bad.value)
    assert "errors.pydantic.dev" not in str(bad.value)
    with pytest.raises(Invalid, match=r"and 2 more"):
        Shape.of({"type": "object", "properties": {k: {"type": "integer"} for k in "abcdefg"},
                  "required": list("abcdefg")}).parse("{}")
    nested = Shape.of({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "$defs": {
        "N": {"type": "integer", "minimum": 1, "maximum": 3}}})
    with pytest.raises(Invalid, match=r"\$\.n: must be <= 3, got 7"):
        nested.parse('{"n": 7}')
    assert nested.parse('{"n": 2}') == {"n": 2}
    with pytest.raises(Invalid, match="the answer was empty"):
        Shape.of(Sentiment).parse("  ")
    assert Shape.of(Sentiment).parse('"neutral"') is Sentiment.NEUTRAL, "a bare category is what was meant"
    assert Shape.of(list[int]).parse('{"value": [1, 2.0]}') == [1, 2]
    with pytest.raises(Invalid, match=r"\$\.value\[1\]: expected integer, got true"):
        Shape.of(list[int]).parse("[1, true]")


@pytest.mark.parametrize("bad_type, message", [
    (dict[int, str], "keys are strings"),
    (tuple[int, str], "fixed-length tuple"),
    (complex, "cannot be an output type"),
])
def test_unsupported_types_say_so(bad_type, message):
    with pytest.raises(TypeError, match=message):
        Shape.of(bad_type)


def test_a_dataclass_output_type_never_imports_pydantic():
    code = """
import sys, dataclasses
import bettong_nb
from bettong_nb.providers.scripted import Scripted
assert "genai_prices" not in sys.modules, "import bettong_nb loads no price table"
@dataclasses.dataclass
class Point:
    x: int
    y: int
result = bettong_nb.agent(provider=Scripted(['{"x": 1, "y": 2}'])).run("where?", output_type=Point)
assert result.data == Point(1, 2), result
assert result.usage_frame()["price_source"].tolist() == ["unknown"]  # known without loading the table
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core", "genai_prices")))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
