"""Structured output: a run's answer validated into a Python type.

    @dataclass
    class Review:
        stars: int
        sentiment: Literal["positive", "neutral", "negative"]
        topics: list[str]

    result = agent.run("Read this review: ...", output_type=Review)
    result.data        # Review(stars=4, sentiment='positive', topics=['price'])
    result.output      # the model's text, as it came

``output_type`` is a dataclass, a TypedDict, a pydantic model (pydantic is imported only by the
model itself), an Enum or a Literal (a category), or a JSON Schema dict (the value is the decoded
JSON). Fields may be str, int, float, bool, None, list/tuple/dict of them, unions (``X | None``),
Literal, Enum, Any, nested dataclasses and TypedDicts, and ``Annotated[X, "a description"]``.

:class:`Shape` is what the loop uses: ``shape.schema`` goes to the provider (an object at the top:
a category or any other non-object value is asked for as ``{"value": ...}``), ``shape.parse(text)``
returns the value or raises :class:`Invalid` saying what was wrong, and ``shape.correction`` is
what the model is told before it tries again. A JSON Schema dict is checked for ``type``,
``enum``, ``const``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``anyOf``/``oneOf``/``allOf``, local ``$ref`` and the size, length, range and ``pattern``
bounds; other keywords go to the provider unchecked.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import json
import re
import types
import typing
from typing import Any, Callable, Literal, Mapping

from ..http.json_body import loads
from .provider import unfence

__all__ = ["Shape", "Invalid", "schema_of", "errors", "column_schema"]

_WRAP = "value"  # the one property a non-object answer is asked for under
_MAX_ERRORS = 5
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


class Invalid(ValueError):
    """The answer did not match the output type; the message says where and how."""


# --- Python types as JSON Schema ----------------------------------------------------------------

def _is_pydantic(tp: Any) -> bool:
    # Duck-typed, so checking a type never imports pydantic.
    return isinstance(tp, type) and callable(getattr(tp, "model_json_schema", None)) \
        and callable(getattr(tp, "model_validate", None))


def _is_record(tp: Any) -> bool:
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or typing.is_typeddict(tp))


@functools.lru_cache(maxsize=256)
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        raise TypeError(f"{cls.__name__}'s field types cannot be resolved ({exc}): define the types it names at "
                        "module level") from None


def _fields(cls: type) -> list[tuple[str, Any, bool]]:
    """A dataclass's or TypedDict's fields: (name, type, required)."""
    hints = _hints(cls)
    if typing.is_typeddict(cls):
        # A NotRequired written as a string annotation (``from __future__ import annotations``)
        # is missed by __required_keys__ before Python 3.12; the resolved hint still says it.
        marked = {typing.Required: True, typing.NotRequired: False}
        return [(name, hint, marked.get(typing.get_origin(hint), name in cls.__required_keys__))
                for name, hint in hints.items()]
    return [(f.name, hints[f.name], f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls) if f.init]


def _unwrapped(tp: Any) -> tuple[Any, str | None]:
    """``tp`` without Annotated/Required/NotRequired, and the description Annotated gave it."""
    description = None
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            # Anything else in Annotated (pydantic's Field(ge=1), annotated-types' Gt) would be a
            # constraint this module does not check: refused rather than silently ignored.
            other = [m for m in tp.__metadata__ if not isinstance(m, str)]
            if other:
                raise TypeError(f"Annotated[..., {other[0]!r}]: only a description string is understood in "
                                "Annotated here; for constraints use a pydantic model (its fields' constraints "
                                "are checked) or a JSON Schema dict")
            description = next((m for m in tp.__metadata__ if isinstance(m, str)), description)
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Required, typing.NotRequired):
            tp = typing.get_args(tp)[0]
        else:
            return tp, description


def _scalar_type(values: list[Any]) -> dict:
    kinds = {_JSON_TYPES.get(type(v)) for v in values}
    return {"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}


def _json_choices(tp: Any, values: list[Any]) -> list[Any]:
    """A category's values, which the model answers with: JSON strings, numbers, booleans or null."""
    for value in values:
        if type(value) not in _JSON_TYPES or (isinstance(value, float) and not value == value):
            raise TypeError(f"{getattr(tp, '__name__', tp)!s}: the choice {value!r} is not a JSON string, number, "
                            "boolean or null, so a model cannot answer with it")
    return values


def schema_of(tp: Any, _open: tuple = ()) -> dict:
    """The JSON Schema of a Python type (see the module docstring for the types known)."""
    tp, description = _unwrapped(tp)
    schema = _schema(tp, _open)
    return {**schema, "description": description} if description else schema


def _schema(tp: Any, open_: tuple) -> dict:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _JSON_TYPES:
        return {"type": _JSON_TYPES[tp]}
    if tp is None:
        return {"type": "null"}
    if tp is Any or tp is object:
        return {}
    if origin is Literal:
        return {**_scalar_type(list(args)), "enum": _json_choices(tp, list(args))}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [member.value for member in tp]
        return {**_scalar_type(values), "enum": _json_choices(tp, values)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_of(arm, open_) for arm in args]}
    if tp in (list, tuple) or origin in (list, tuple, collections.abc.Sequence):
        items = args[0] if args and (origin is not tuple or (len(args) == 2 and args[1] is Ellipsis)) else None
        if origin is tuple and args and items is None:
            raise TypeError(f"{tp}: a fixed-length tuple has no JSON Schema here; use tuple[X, ...] or list[X]")
        return {"type": "array", **({"items": schema_of(items, open_)} if items is not None else {})}
    if tp is dict or origin in (dict, collections.abc.Mapping):
        if args and args[0] is not str:
            raise TypeError(f"{tp}: JSON object keys are strings; use dict[str, ...]")
        return {"type": "object", **({"additionalProperties": schema_of(args[1], open_)} if args else {})}
    if _is_record(tp):
        if tp in open_:
            raise TypeError(f"{tp.__name__} refers to itself; recursive output types are not supported")
        fields = _fields(tp)
        return {"type": "object", "properties": {name: schema_of(hint, open_ + (tp,)) for name, hint, _ in fields},
                "required": [name for name, _, required in fields if required], "additionalProperties": False}
    if _is_pydantic(tp):
        raise TypeError(f"{tp.__name__} is a pydantic model inside another type: make the outer type a "
                        "pydantic model too")
    raise TypeError(f"{tp!r} cannot be an output type or field (see bettong_nb.structured for the types known)")


# --- checking decoded JSON against a schema ----------------------------------------------------

def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "…"


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"string": str, "boolean": bool, "null": type(None), "array": list, "object": dict}.get(kind, object) \
        in type(value).__mro__


def _same(a: Any, b: Any) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)  # JSON's true is not 1


def _resolve(ref: str, root: Mapping) -> Mapping:
    if not ref.startswith("#"):
        raise Invalid(f"the schema refers to {ref!r}, which is not inside it")
    node: Any = root
    for part in filter(None, ref[1:].split("/")):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def errors(value: Any, schema: Mapping, root: Mapping | None = None, path: str = "$") -> list[str]:
    """What is wrong with ``value`` under ``schema``, one line each (empty: it matches)."""
    root = schema if root is None else root
    found: list[str] = []
    if "$ref" in schema:
        found += errors(value, _resolve(schema["$ref"], root), root, path)
    for arm in schema.get("allOf", ()):
        found += errors(value, arm, root, path)
    for keyword in ("anyOf", "oneOf"):
        if keyword in schema:
            failures = [errors(value, arm, root, path) for arm in schema[keyword]]
            matched = sum(not f for f in failures)
            if matched == 0:
                nearest = min(failures, key=len)
                found.append(f"{path}: matches none of the allowed forms (nearest: {nearest[0]})")
            elif keyword == "oneOf" and matched > 1:
                found.append(f"{path}: matches more than one of the allowed forms")
    if "const" in schema and not _same(value, schema["const"]):
        found.append(f"{path}: must be {_shown(schema['const'])}, got {_shown(value)}")
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        found.append(f"{path}: must be one of {', '.join(map(_shown, schema['enum']))}; got {_shown(value)}")
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, kind) for kind in kinds):
            found.append(f"{path}: expected {' or '.join(kinds)}, got {_shown(value)}")
            return found  # the bounds below would only repeat it
    if isinstance(value, dict):
        found += _object_errors(value, schema, root, path)
    elif isinstance(value, list):
        found += _array_errors(value, schema, root, path)
    elif isinstance(value, str):
        found += _bound_errors(len(value), schema, path, "minLength", "maxLength", "characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(f"{path}: must match the pattern {schema['pattern']!r}, got {_shown(value)}")
    elif _is_type(value, "number"):
        found += _range_errors(value, schema, path)
    return found


def _object_errors(value: dict, schema: Mapping, root: Mapping, path: str) -> list[str]:
    found = [f"{path}.{name}: required, but missing" for name in schema.get("required", ()) if name not in value]
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            found += errors(item, properties[name], root, f"{path}.{name}")
        elif extra is False:
            found.append(f"{path}.{name}: not a field of this object (fields: {', '.join(properties) or 'none'})")
        elif isinstance(extra, Mapping):
            found += errors(item, extra, root, f"{path}.{name}")
    return found


def _array_errors(value: list, schema: Mapping, root: Mapping, path: str) -> list[str]:
    found = _bound_errors(len(value), schema, path, "minItems", "maxItems", "items")
    if isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            found += errors(item, schema["items"], root, f"{path}[{index}]")
    return found


def _bound_errors(size: int, schema: Mapping, path: str, low: str, high: str, unit: str) -> list[str]:
    if low in schema and size < schema[low]:
        return [f"{path}: needs at least {schema[low]} {unit}, has {size}"]
    if high in schema and size > schema[high]:
        return [f"{path}: allows at most {schema[high]} {unit}, has {size}"]
    return []


def _range_errors(value: float, schema: Mapping, path: str) -> list[str]:
    checks = (("minimum", lambda b: value >= b, ">="), ("maximum", lambda b: value <= b, "<="),
              ("exclusiveMinimum", lambda b: value > b, ">"), ("exclusiveMaximum", lambda b: value < b, "<"))
    return [f"{path}: must be {sign} {schema[key]}, got {_shown(value)}"
            for key, holds, sign in checks if isinstance(schema.get(key), (int, float)) and not holds(schema[key])]


# --- decoded JSON into the Python type ---------------------------------------------------------

def _build(tp: Any, data: Any) -> Any:
    """``data`` (already checked against ``schema_of(tp)``) as a value of ``tp``."""
    tp, _ = _unwrapped(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is float:
        return float(data)
    if tp is int:
        return int(data)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if origin in (typing.Union, types.UnionType):
        arm = next(a for a in args if not errors(data, schema_of(a)))
        return _build(arm, data)
    if isinstance(data, list) and args:
        items = [_build(args[0], item) for item in data]
        return tuple(items) if origin is tuple else items
    if isinstance(data, dict) and _is_record(tp):
        hints = {name: hint for name, hint, _ in _fields(tp)}
        built = {name: _build(hints[name], item) for name, item in data.items()}
        return built if typing.is_typeddict(tp) else tp(**built)
    if isinstance(data, dict) and len(args) == 2:
        return {key: _build(args[1], item) for key, item in data.items()}
    return tuple(data) if tp is tuple else data


# --- the shape of one run's answer -------------------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class Shape:
    """What a run asks for (``schema``) and how the answer becomes a value (``parse``)."""

    output_type: Any
    name: str
    schema: dict  # sent to the provider; an object at the top
    wrapped: bool  # the answer is {"value": <the value>}
    _convert: Callable[[Any], Any]
    _checked: bool = True  # False: the type checks its own values (pydantic), so the schema is not applied here

    @classmethod
    def of(cls, output_type: Any) -> "Shape":
        """The shape of ``output_type`` (see the module docstring); a TypeError names what is not supported."""
        if isinstance(output_type, Mapping):
            return cls._made(output_type, output_type.get("title") or "the JSON schema", dict(output_type),
                             lambda data: data)
        try:
            hash(output_type)
        except TypeError:  # a list given as a schema, or Annotated with a dict in it: not a type known here
            if typing.get_origin(output_type) is typing.Annotated:
                return _shape_of_type.__wrapped__(output_type)  # so its own error names it
            raise TypeError(f"output_type must be a type or a JSON Schema dict, not {type(output_type).__name__} "
                            f"{output_type!r:.60}") from None
        return _shape_of_type(output_type)

    @classmethod
    def _made(cls, output_type: Any, name: str, schema: dict, convert: Callable[[Any], Any],
              checked: bool = True) -> "Shape":
        if schema.get("type") == "object":
            return cls(output_type, name, schema, False, convert, checked)
        # Providers want an object at the top (OpenAI and Anthropic insist): other values are wrapped.
        defs = {key: schema.pop(key) for key in ("$defs", "definitions") if key in schema}
        wrapper = {"type": "object", "properties": {_WRAP: schema}, "required": [_WRAP],
                   "additionalProperties": False, **defs}
        return cls(output_type, name, wrapper, True, convert, checked)

    def parse(self, text: str) -> Any:
        """The value ``text`` holds (a markdown fence around it is fine); :class:`Invalid` otherwise."""
        body = unfence(text or "").strip()
        if not body:
            raise Invalid("the answer was empty")
        try:
            data = loads(body)
        except ValueError as exc:
            raise Invalid(f"the answer is not JSON ({exc})") from None
        if self.wrapped and not (isinstance(data, dict) and data.keys() == {_WRAP}):
            data = {_WRAP: data}  # the bare value: what the wrapper stood for
        found = errors(data, self.schema) if self._checked else []
        if found:
            more = f" (and {len(found) - _MAX_ERRORS} more)" if len(found) > _MAX_ERRORS else ""
            raise Invalid("; ".join(found[:_MAX_ERRORS]) + more)
        try:
            return self._convert(data[_WRAP] if self.wrapped else data)
        except (TypeError, ValueError) as exc:  # a type's own checks (__post_init__, pydantic validators)
            raise Invalid(_described(exc)) from None

    def correction(self, invalid: Invalid) -> str:
        """What the model is told about an answer that did not match, before it tries again."""
        shape = f'{{"{_WRAP}": ...}} ' if self.wrapped else ""
        return (f"Your answer does not match the required JSON schema: {invalid}. Answer again with only the "
                f"corrected JSON {shape}and nothing else.")

    def columns(self) -> list[tuple[str | None, dict]]:
        """One (field name, field schema) per field of an object answer; one (None, schema) for
        any other value, and for an object without named fields (``dict[str, int]``), whole. ``$ref``s are resolved, so each schema stands alone."""
        if self.wrapped:
            return [(None, column_schema(self.schema["properties"][_WRAP], self.schema))]
        if not self.schema.get("properties"):  # dict[str, int], {"type": "object"}: no fields to spread
            return [(None, column_schema(self.schema, self.schema))]
        return [(name, column_schema(field, self.schema)) for name, field in self.schema.get("properties", {}).items()]

    def row(self, value: Any) -> dict[str | None, Any]:
        """``value``'s fields as plain cells, keyed like :meth:`columns` (an Enum by its value)."""
        if self.wrapped or not self.schema.get("properties"):
            return {None: _plain(value)}
        if callable(getattr(value, "model_dump", None)):  # pydantic: the schema's names are the aliases
            value = value.model_dump(by_alias=True)
        get = value.get if isinstance(value, Mapping) else (lambda name: getattr(value, name, None))
        return {name: _plain(get(name)) for name, _ in self.columns()}


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _described(exc: Exception) -> str:
    """A type's own validation error in the form of :func:`errors`: pydantic's per-field errors
    (without its documentation links), else the exception's text."""
    listed = exc.errors() if callable(getattr(exc, "errors", None)) else None
    if not listed:
        return str(exc)
    lines = [f"$.{'.'.join(map(str, e.get('loc', ()))) or ''}: {e.get('msg')}, got {_shown_any(e.get('input'))}"
             for e in listed[:_MAX_ERRORS]]
    return "; ".join(lines) + (f" (and {len(listed) - _MAX_ERRORS} more)" if len(listed) > _MAX_ERRORS else "")


def _shown_any(value: Any) -> str:
    try:
        return _shown(value)
    except (TypeError, ValueError):
        return repr(value)[:60]


def column_schema(schema: Mapping, root: Mapping) -> dict:
    """``schema`` with ``$ref`` resolved and a nullable union reduced to its one other form."""
    while "$ref" in schema:
        schema = _resolve(schema["$ref"], root)
    arms = [arm for arm in schema.get("anyOf", ()) if arm.get("type") != "null"]
    if "anyOf" in schema and len(arms) == 1:
        return column_schema(arms[0], root)
    return dict(schema)


@functools.lru_cache(maxsize=128)
def _shape_of_type(output_type: Any) -> Shape:
    if _is_pydantic(output_type):
        return Shape._made(output_type, output_type.__name__, output_type.model_json_schema(),
                           output_type.model_validate, checked=False)
    name = getattr(output_type, "__name__", None) or repr(output_type)
    return Shape._made(output_type, name, schema_of(output_type), functools.partial(_build, output_type))
