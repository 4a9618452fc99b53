"""Arguments for a tool the offline model knows nothing about (your @tool functions, MCP tools),
filled from its JSON schema and the prompt's words, or the list of what could not be filled.

    arguments(get_weather_schema, "What is the weather in Paris?")   # ({"city": "Paris"}, [])
"""

from __future__ import annotations

import re

from ._words import first_line, numbers, proper_nouns, quoted, words

__all__ = ["arguments", "the_prompt_itself"]

# Parameters that take the request as it stands: a search query, a question, a text to work on.
_WHOLE_PROMPT = frozenset({"query", "q", "question", "prompt", "text", "message", "input", "request", "search"})
_AFTER = re.compile(r"\b(?:in|for|of|about|named|called|from|to)\s+([A-Za-z][\w-]*)")


def the_prompt_itself(prompt: str) -> str:
    """The request as a search query: its first line, without a leading 'search (the web) for'."""
    line = first_line(prompt, 300)
    return re.sub(r"^(?:please\s+)?(?:search|look up|find)(?:\s+the\s+web)?(?:\s+for)?\s+", "", line, flags=re.I) or line


def _type(spec: dict) -> str | None:
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and isinstance(spec.get("anyOf"), list):
        kind = next((s.get("type") for s in spec["anyOf"] if isinstance(s, dict) and s.get("type") != "null"), None)
    return kind


def arguments(schema: dict, prompt: str) -> tuple[dict, list[str]]:
    """``(arguments, missing)``: a value for each required parameter the prompt supplies (or its
    default), and for an optional one the prompt names outright (an enum value, or the whole
    request); the required ones found nowhere are named in ``missing``."""
    parameters = schema.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = [n for n in parameters.get("required") or [] if n in properties]
    said = words(prompt)
    texts = [*quoted(prompt), *proper_nouns(prompt)]
    texts += [w for w in _AFTER.findall(prompt) if w not in texts and w.lower() in said and w[0].islower()]
    figures = numbers(prompt)
    values, missing = {}, []
    for name in [*required, *(n for n in properties if n not in required)]:
        spec = properties[name] if isinstance(properties[name], dict) else {}
        kind, found = _type(spec), None
        if isinstance(spec.get("enum"), list) and spec["enum"]:
            found = next((v for v in spec["enum"] if str(v).lower() in said or str(v) in prompt), None)
        elif kind in ("integer", "number") and figures and name in required:
            figure = figures.pop(0)
            found = int(float(figure)) if kind == "integer" else float(figure)
        elif kind == "string" and name.lower() in _WHOLE_PROMPT:  # what the prompt quotes, else all of it
            found = next((t for t in quoted(prompt) if t in texts), None) or the_prompt_itself(prompt)
            texts = [t for t in texts if t != found]
        elif kind == "string" and texts and name in required:  # an optional one keeps its default
            found = texts.pop(0)
        elif kind == "boolean" and name in required:
            found = name.lower() in said
        elif kind == "array" and _type(spec.get("items") or {}) == "string" and texts and name in required:
            found, texts = texts, []
        if found is None and name in required and "default" in spec:
            found = spec["default"]
        if found is not None:
            values[name] = found
        elif name in required:
            missing.append(name)
    return values, missing
