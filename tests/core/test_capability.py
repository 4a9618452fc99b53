"""Capabilities: dicts, objects, @tool, the registry's order and checks, and invoke."""

import asyncio
from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest

from bettong_nb import Tool, tool
from bettong_nb.core.capability import (ToolError, invoke, parameters_schema, registry, run_tool, schemas, stringify,
                                   system_text, tool_schema)


def run(coro):
    return asyncio.run(coro)


WEATHER = {"id": "weather", "instructions": "Temperatures are in celsius.",
           "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                      "parameters": {"city": {"type": "string", "description": "City name.", "required": True}},
                      "handler": lambda city: f"raining in {city}"}]}


@dataclass
class Counter:
    """A capability with state: any object with id, instructions and tools."""

    id: str = "counter"
    instructions: str | None = None
    count: int = 0
    tools: list = field(default_factory=list)

    def __post_init__(self):
        self.tools = [Tool("bump", self.bump, "Add one.")]

    def bump(self):
        self.count += 1
        return f"{self.count} items"


def test_a_dict_and_an_object_are_capabilities():
    reg = registry([WEATHER, Counter()])
    assert {n: t.capability for n, t in reg.items()} == {"get_weather": "weather", "bump": "counter"}


def test_state_survives_between_calls():
    counter = Counter()
    reg = registry([counter])
    assert run(invoke(reg, "bump", {})) == ("1 items", 0)
    assert run(invoke(reg, "bump", {})) == ("2 items", 0)
    assert counter.count == 2


def test_shorthand_parameters_become_a_schema():
    assert parameters_schema({"a": {"type": "string", "required": True}, "b": {"type": "integer", "items": 1}}) == {
        "type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer", "items": 1}},
        "required": ["a"]}
    full = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}
    assert parameters_schema(full) == full
    assert parameters_schema(None) == parameters_schema({}) == {"type": "object", "properties": {}, "required": []}


def test_tool_schema_omits_an_empty_description():
    assert tool_schema({"name": "t", "handler": print}) == {
        "name": "t", "parameters": {"type": "object", "properties": {}, "required": []}}
    assert list(tool_schema(WEATHER["tools"][0])) == ["name", "parameters", "description"]


def test_declaration_order_survives_many_capabilities():
    caps = [{"id": f"c{i}", "tools": [{"name": f"tool_{i}", "handler": print}]} for i in range(12)]
    assert [s["name"] for s in schemas(registry(caps))] == [f"tool_{i}" for i in range(12)]
    spread = [{"id": "x", "tools": [{"name": n, "handler": print} for n in "abc"]}]
    assert [s["name"] for s in schemas(registry(spread))] == ["a", "b", "c"]


def test_registry_rejects_bad_tools():
    with pytest.raises(ToolError, match="Two capabilities both provide the tool get_weather"):
        registry([WEATHER, {**WEATHER, "id": "w2"}])
    with pytest.raises(ToolError, match="non-blank string name.*'bad'"):
        registry([{"id": "bad", "tools": [{"name": "  ", "handler": print}]}])
    with pytest.raises(ToolError, match="needs a handler function.*'bad'"):
        registry([{"id": "bad", "tools": [{"name": "x"}]}])
    assert registry(None) == {} and schemas(registry([])) == []


def test_invoke_stringifies_and_reports_errors():
    def boom():
        raise ValueError("kaboom")

    class Silent(Exception):
        pass

    def silent():
        raise Silent()

    reg = registry([{"id": "t", "tools": [
        {"name": "one", "handler": lambda: 1}, {"name": "none", "handler": lambda: None},
        {"name": "data", "handler": lambda: {"a": [1, "ü"]}}, {"name": "boom", "handler": boom},
        {"name": "flag", "handler": lambda: False}, {"name": "silent", "handler": silent}]}])
    assert [run(invoke(reg, n, {}))[0] for n in ["one", "none", "data", "boom", "flag", "silent"]] == [
        "1", "", '{"a": [1, "ü"]}', "ERROR: ValueError: kaboom", "false", "ERROR: Silent"]
    assert run(invoke(reg, "nope", {}))[0] == "ERROR: no capability provides a tool called nope"
    assert run(invoke({}, "nope", {}))[0] == "ERROR: no capability provides a tool called nope"


def test_a_tool_that_raises_names_the_exception_and_keeps_its_traceback_for_the_person(tmp_path):
    from bettong_nb.capabilities import filesystem

    def price(item: str) -> float:
        costs = {"tea": 2.5}
        return costs[item]["cost"] if item in costs else {}["cost"]

    reg = registry([{"id": "shop", "tools": [{"name": "price", "handler": price}]}, filesystem(root=tmp_path)])
    output = run(run_tool(reg, "price", {"item": "milk"}))
    assert output.text == "ERROR: KeyError: 'cost'"  # what the model reads
    assert output.traceback.startswith("Traceback (most recent call last):")
    assert "in price" in output.traceback and output.traceback.rstrip().endswith("KeyError: 'cost'")
    assert "run_tool" not in output.traceback  # the tool's frames, not the loop's
    # bettong_nb's own capabilities write their errors for the model: read as they are
    refused = run(run_tool(reg, "read_file", {"path": "../outside.txt"})).text
    assert refused.startswith("ERROR: ") and "Error:" not in refused


def test_invoke_awaits_async_handlers_and_passes_keyword_arguments():
    async def greet(name, punctuation="!"):
        await asyncio.sleep(0)
        return f"hi {name}{punctuation}"

    reg = registry([{"id": "g", "tools": [{"name": "greet", "handler": greet}]}])
    assert run(invoke(reg, "greet", {"name": "Ana"}))[0] == "hi Ana!"
    assert "unexpected keyword argument" in run(invoke(reg, "greet", {"name": "A", "bogus": 1}))[0]


def test_system_text_joins_instructions_and_skips_none():
    logger = {"id": "log", "instructions": "Log anything noteworthy.", "tools": []}
    assert system_text([WEATHER, {"id": "quiet", "tools": []}, logger]) == \
        "Temperatures are in celsius.\nLog anything noteworthy."
    assert system_text([{"id": "q", "tools": []}]) is None and system_text([]) is None
    assert system_text([{"id": "e", "instructions": "", "tools": []}]) == ""


def test_the_tool_decorator_builds_a_schema_from_hints_and_docstring():
    @tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius", days: Optional[int] = None,
                    tags: list[str] = ()) -> str:
        """Current weather for a city.

        Args:
            city: City name, e.g. "Vilnius".
            unit: Which scale
                to report in.
            days: How many days ahead.

        Returns:
            A sentence.
        """
        return f"{city} {unit}"

    assert isinstance(get_weather, Tool) and get_weather.name == "get_weather"
    assert get_weather.description == "Current weather for a city."
    assert get_weather.parameters == {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "description": 'City name, e.g. "Vilnius".'},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Which scale to report in.",
                 "default": "celsius"},
        "days": {"type": "integer", "description": "How many days ahead."},
        "tags": {"type": "array", "items": {"type": "string"}, "default": ()}}}
    assert get_weather("Rome") == "Rome celsius"
    reg = registry([{"id": "w", "tools": [get_weather]}])  # a Tool stands where a tool dict can
    assert run(invoke(reg, "get_weather", {"city": "Oslo", "unit": "fahrenheit"}))[0] == "Oslo fahrenheit"


def test_tool_decorator_with_a_name_and_async_function():
    @tool(name="lookup")
    async def find(query: str) -> str:
        """Search."""
        return query.upper()

    assert find.name == "lookup" and find.parameters["required"] == ["query"]
    assert run(invoke(registry([{"id": "s", "tools": [find]}]), "lookup", {"query": "q"}))[0] == "Q"


def test_stringify():
    assert stringify(None) == "" and stringify("s") == "s" and stringify(True) == "true"
    assert stringify(object()).startswith("<object object")
