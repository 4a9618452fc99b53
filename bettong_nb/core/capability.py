"""Capabilities: everything an agent can do comes from one of these.

A capability is anything with ``id``, ``instructions`` and ``tools`` — a plain dict::

    weather = {
        "id": "weather",
        "instructions": "Temperatures are in celsius.",
        "tools": [{
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {"city": {"type": "string", "description": "City name.", "required": True}},
            "handler": lambda city: f"It is raining in {city}",
        }],
    }

or any object with those attributes (a dataclass that holds state). A tool is a dict with
``name``, ``description``, ``parameters`` and ``handler``, or a :class:`Tool` (see :func:`tool`).

When the model asks for several calls in one step they run side by side (a sync handler in a
worker thread). A tool that must not — it writes, or depends on the order of calls — says
``"concurrent": False`` (``Tool(..., concurrent=False)``): it then runs alone.
"""

from __future__ import annotations

import asyncio
import collections.abc
import inspect
import json
import re
import traceback
import types
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from . import images
from ..safety import secrets
from ..http.json_body import loads
from ..safety.sanitize import as_text, clean

__all__ = [
    "Capability",
    "Tool",
    "tool",
    "RegisteredTool",
    "ToolError",
    "capability_id",
    "capability_label",
    "spec_field",
    "capability_instructions",
    "capability_tools",
    "parameters_schema",
    "tool_schema",
    "registry",
    "schemas",
    "system_text",
    "invoke",
    "run_tool",
    "arguments",
    "stringify",
    "ToolOutput",
]


@dataclass(frozen=True)
class ToolOutput:
    """What a handler returns when the text for the model is not all it has.

        return ToolOutput(text=table_text, data=frame)          # the person gets the frame
        return ToolOutput(text="the plot", images=(Image.from_path("p.png"),))

    ``text`` goes to the model (redacted); ``data`` stays on the ToolCall for the person, never
    sent; ``images`` (a :class:`bettong_nb.Image`, a matplotlib Figure, a PIL or IPython image)
    go to the model as image parts, bounded like a prompt's. A handler that returns an image
    alone (a Figure) returns ``ToolOutput("", images=(figure,))``.
    ``traceback`` is set by :func:`run_tool` when the handler raised (for the person, never sent).
    ``redactions``: how many credentials the capability itself already replaced in ``text`` (an
    MCP server's output, scrubbed of its own secrets), so the tool frame counts them too; an
    exception with a ``redactions`` attribute carries its count the same way.
    """

    text: str
    data: Any = None
    images: tuple = ()
    traceback: str | None = None
    redactions: int = 0


class ToolError(ValueError):
    """A capability or tool is malformed; raised when the registry is built."""


@runtime_checkable
class Capability(Protocol):
    """What an agent can be handed. A dict with the same keys works too."""

    id: str
    instructions: str | None
    tools: list


@dataclass
class Tool:
    """One tool: a name the model calls, a JSON schema of its arguments and the handler.

    The handler is called with keyword arguments decoded from the model's JSON; it may be
    sync or async, and whatever it returns becomes the tool result. ``concurrent=False``: the
    tool never runs beside another call of the same step (writes, order-dependent tools).
    """

    name: str
    handler: Callable[..., Any]
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    concurrent: bool = True

    def __call__(self, *args, **kwargs):
        return self.handler(*args, **kwargs)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    # collections.abc, not typing: typing.Mapping's isinstance check costs ~1.5 µs, and a run
    # makes one per tool field (prepare() of 20 tools took 90 µs)
    if type(obj) is dict or isinstance(obj, collections.abc.Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def spec_field(spec: Any, name: str, default: Any = None) -> Any:
    """A field of a tool spec or a capability, whether it is a dict or an object."""
    return _get(spec, name, default)


def capability_id(cap: Any) -> str | None:
    return _get(cap, "id")


def capability_label(cap: Any) -> str:
    """How a capability is named in a repr, without running anything (an MCP capability's id
    is a property that starts its server; its repr is not)."""
    if isinstance(cap, Mapping):
        return str(cap.get("id"))
    value = inspect.getattr_static(cap, "id", None)
    return repr(cap) if isinstance(value, property) else str(value)


def capability_instructions(cap: Any) -> str | None:
    return _get(cap, "instructions")


def capability_tools(cap: Any) -> list:
    return list(_get(cap, "tools") or [])


# --- parameters -------------------------------------------------------------------------------

def parameters_schema(parameters: Mapping[str, Any] | None) -> dict:
    """A JSON schema from the shorthand ``{"city": {"type": "string", "required": True}}``.

    A mapping whose ``type`` is ``"object"`` is already a schema and passes through untouched.
    """
    if not parameters:
        return {"type": "object", "properties": {}, "required": []}
    if parameters.get("type") == "object":
        return dict(parameters)
    properties, required = {}, []
    for name, spec in parameters.items():
        spec = dict(spec)
        if spec.pop("required", False):
            required.append(name)
        properties[name] = spec
    return {"type": "object", "properties": properties, "required": required}


def tool_schema(spec: Any) -> dict:
    """The neutral schema of one tool: ``{"name", "parameters", "description"?}``.

    The description is present only when it is non-empty; providers wrap this in their
    own wire shape.
    """
    schema = {"name": _get(spec, "name"), "parameters": parameters_schema(_get(spec, "parameters"))}
    description = _get(spec, "description")
    if description:
        schema["description"] = description
    return schema


# --- @tool ------------------------------------------------------------------------------------

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def _json_type(hint: Any) -> dict:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _json_type(options[0]) if len(options) == 1 else {}
    if origin is typing.Literal:
        values = list(typing.get_args(hint))
        return {**_json_type(type(values[0])), "enum": values}
    if origin in (list, tuple, set, frozenset, Iterable):
        args = typing.get_args(hint)
        return {"type": "array", **({"items": _json_type(args[0])} if args else {})}
    if origin in (dict, Mapping):
        return {"type": "object"}
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    return {}


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and the ``Args:`` descriptions."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary, args, current, in_args = [], {}, None, False
    for line in lines:
        stripped = line.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters):", stripped):
            in_args = True
            continue
        if in_args and re.fullmatch(r"[A-Z][A-Za-z ]*:", stripped) and not line.startswith(" "):
            in_args = False  # the next section (Returns:, Raises:) begins
        if in_args:
            match = re.match(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            if match and (len(line) - len(line.lstrip())) <= 4:
                current = match.group(1).lstrip("*")
                args[current] = match.group(2).strip()
            elif current and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
        elif not args:
            summary.append(line)
    return "\n".join(summary).strip(), args


def tool(fn: Callable | None = None, *, name: str | None = None, description: str | None = None):
    """Turn a typed function into a :class:`Tool`.

    ::

        @tool
        def get_weather(city: str, unit: str = "celsius") -> str:
            '''Current weather for a city.

            Args:
                city: City name.
                unit: "celsius" or "fahrenheit".
            '''
    """

    def build(fn: Callable) -> Tool:
        summary, arg_docs = _docstring_parts(fn.__doc__ or "")
        hints = typing.get_type_hints(fn)
        properties, required = {}, []
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            prop = _json_type(hints.get(param.name, Any))
            if param.name in arg_docs:
                prop["description"] = arg_docs[param.name]
            if param.default is param.empty:
                required.append(param.name)
            elif param.default is not None:
                prop["default"] = param.default
            properties[param.name] = prop
        return Tool(
            name=name or fn.__name__,
            handler=fn,
            description=description or summary or None,
            parameters={"type": "object", "properties": properties, "required": required},
        )

    return build(fn) if fn is not None else build


# --- registry ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class RegisteredTool:
    """A tool in a registry: its schema, handler, the capability that gave it, its place, and
    whether it may run beside other calls."""

    name: str
    schema: dict
    handler: Callable[..., Any]
    capability: str | None
    order: int
    concurrent: bool = True


def registry(capabilities: Iterable[Any] | None) -> dict[str, RegisteredTool]:
    """Flatten capabilities into ``name -> RegisteredTool``, keeping declaration order.

    The tool list is part of the prompt the provider caches, so its order must be the order
    the capabilities declared their tools: adding a capability then appends rather than
    reshuffles, and the cached prefix survives.
    """
    tools: dict[str, RegisteredTool] = {}
    ids: set[str] = set()
    for cap in capabilities or ():
        cap_id = capability_id(cap)
        if cap_id is not None:
            # an approval rule names a capability by its id: two of one id would share its rules
            if cap_id in ids:
                raise ToolError(f"Two capabilities have the id {cap_id!r}: give one of them another id= "
                                "(approval rules and records name a capability by its id)")
            ids.add(cap_id)
        for spec in capability_tools(cap):
            name = _get(spec, "name")
            if not isinstance(name, str) or not name.strip():
                raise ToolError(f"A tool needs a non-blank string name (capability {cap_id!r})")
            handler = _get(spec, "handler")
            if not callable(handler):
                raise ToolError(f"Tool {name} needs a handler function (capability {cap_id!r})")
            if name in tools:
                raise ToolError(
                    f"Two capabilities both provide the tool {name}: "
                    f"{tools[name].capability!r} and {cap_id!r}"
                )
            concurrent = _get(spec, "concurrent", True)
            if not isinstance(concurrent, bool):
                raise ToolError(f"Tool {name}: concurrent must be True or False, got {concurrent!r}")
            tools[name] = RegisteredTool(name, tool_schema(spec), handler, cap_id, len(tools), concurrent)
    return tools


def schemas(reg: Mapping[str, RegisteredTool]) -> list[dict]:
    """The tools payload, in declaration order."""
    return [t.schema for t in sorted(reg.values(), key=lambda t: t.order)]


def system_text(capabilities: Iterable[Any] | None) -> str | None:
    """The capabilities' instructions joined by newlines, or None when none has any."""
    parts = [text for cap in capabilities or () if (text := capability_instructions(cap)) is not None]
    return "\n".join(parts) if parts else None


def stringify(value: Any) -> str:
    """How a handler's return value reaches the model: None is empty, str as is, data as JSON,
    anything else as its str()."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple, int, float)):
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except ValueError:  # circular structures
            pass
    return str(value)


_BAD_JSON = ("ERROR: Tool call arguments were not valid JSON ({why}). Send one JSON object, with strings in "
             'double quotes and array elements separated by commas, e.g. {{"path": "a.txt", "keys": [":a", ":b"]}}.')


def arguments(raw: Any) -> tuple[dict | None, str | None]:
    """The model's tool arguments as a dict, or the error text the model reads instead.

    ``raw`` is what the provider decoded (a dict) or the text it could not decode; empty means
    no arguments. The one place arguments are checked, whatever the wire format."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, str):
        try:
            raw = clean(loads(raw))  # a "\ud800" escape decodes to text no request can carry
        except ValueError as exc:
            return None, _BAD_JSON.format(why=exc)
    if not isinstance(raw, Mapping):
        return None, f"ERROR: tool arguments must be a JSON object, got {type(raw).__name__}"
    return dict(raw), None


async def run_tool(reg: Mapping[str, RegisteredTool], name: str, args: Mapping[str, Any], *,
                   in_thread: bool = False) -> ToolOutput:
    """Run a tool and return what it gave, unredacted. A handler that raises gives the model
    ``ERROR: KeyError: 'cost'`` (the exception as Python names it) and the person the traceback;
    bettong_nb's own capabilities raise messages written for the model, which it reads as they
    are (``ERROR: path must not be blank``). A wrapper's refusal
    (:class:`bettong_nb.approvals.Denied`) propagates. ``in_thread``: a sync handler runs in a
    worker thread, so the event loop (and the calls running beside this one) go on meanwhile."""
    from .approvals import Denied

    entry = reg.get(name)
    if entry is None:
        return ToolOutput(f"ERROR: no capability provides a tool called {name}")
    try:
        if in_thread and not inspect.iscoroutinefunction(entry.handler):
            value = await asyncio.to_thread(entry.handler, **args)
        else:
            value = entry.handler(**args)
        if inspect.isawaitable(value):
            value = await value
    except Denied:
        raise
    except Exception as exc:  # the model reads the error; the run goes on
        ours = getattr(entry.handler, "__module__", None) or ""
        said = as_text(exc)  # an exception whose str raises is named by its type
        message = said if ours.startswith("bettong_nb.") else f"{type(exc).__name__}: {said}"
        where = "".join(traceback.format_exception(exc.with_traceback(exc.__traceback__.tb_next)))
        return ToolOutput(f"ERROR: {message}" if said else f"ERROR: {type(exc).__name__}", traceback=where,
                          redactions=getattr(exc, "redactions", 0))
    if isinstance(value, ToolOutput):  # its text as text, whatever the handler put there
        return value if isinstance(value.text, str) else replace(value, text=stringify(value.text))
    return ToolOutput("", images=(value,)) if images.is_image(value) else ToolOutput(stringify(value))


async def invoke(
    reg: Mapping[str, RegisteredTool], name: str, args: Mapping[str, Any], *, extra_secrets: Iterable[str] = ()
) -> tuple[str, int]:
    """Run a tool. Always returns ``(text, redactions)``, never raises for the tool's sake.

    A handler that raises becomes ``ERROR: <message>`` so the model can read it and try
    something else; whatever comes back is redacted, because every tool result is uploaded
    to the model provider — including the output of tools you wrote.
    """
    from .approvals import Denied, denial_text

    try:
        text = (await run_tool(reg, name, args)).text
    except Denied as refused:
        text = denial_text(name, refused.verdict)
    return secrets.redact(text, extra=extra_secrets)
