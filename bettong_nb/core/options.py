"""An agent's options: one frozen, typed record, checked once, overridden per call.

    options = Options.of(max_steps=5, capabilities=[caps.filesystem()])
    per_call = options.merged({"max_steps": 3})       # a new Options; the agent's stays as it was

An unknown name raises :class:`~bettong_nb.errors.OptionError` (a ``TypeError``) naming it and listing the known ones, at construction and
per call: a typo must not be silently ignored.

The functions that take options as ``**options`` show them in their signature, built from the
fields here by :func:`takes_options`, so ``help(bettong_nb.deepseek)`` and a notebook's shift-tab
list every option with its type and default, and cannot drift from this record.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..safety import secrets
from ..errors import OptionError
from .images import DEFAULT_MAX_BYTES, DEFAULT_MAX_SIDE

__all__ = ["Options", "PROVIDER_OPTIONS", "REQUEST_OPTIONS", "OWN_OPTIONS", "AS_SET", "option_names", "takes_options",
           "refuse_others"]

# Options that go into every Request as they are (a provider ignores what it cannot express).
REQUEST_OPTIONS = ("model", "max_tokens", "temperature", "tool_choice", "effort", "format", "thinking_display",
                   "num_ctx", "keep_alive")
# Options that configure the provider deepseek()/openai()/... build; a given provider has its own.
PROVIDER_OPTIONS = frozenset({"api_key", "base_url", "timeout", "max_retries"})
# Options only one preset's provider reads; the other presets refuse them rather than ignore them.
OWN_OPTIONS = {"effort": "anthropic", "thinking_display": "anthropic", "num_ctx": "ollama", "keep_alive": "ollama"}


@dataclass(frozen=True, kw_only=True)
class Options:
    """What a run is made of. See the README's options table for each one."""

    capabilities: tuple = ()
    api_key: str | None = None  # never in repr()
    model: str | None = None
    base_url: str | None = None
    max_steps: int = 10
    system: str | None = None
    approve_fn: Any = None
    on_event: Callable[[Any], Any] | None = None
    temperature: float | None = None
    provider: Any = None
    messages: tuple = ()
    max_tokens: int | None = None
    prices: Mapping[str, Any] | None = None
    timeout: Any = None
    max_retries: int = 2
    tool_choice: str | None = None
    stream: bool = False
    cost_budget: float | None = None
    token_budget: int | None = None
    effort: str | None = None
    format: dict | None = None
    thinking_display: str | None = None
    num_ctx: int | None = None
    keep_alive: str | int | None = None
    image_max_side: int = DEFAULT_MAX_SIDE
    image_max_bytes: int = DEFAULT_MAX_BYTES
    output_type: Any = None
    output_retries: int = 2

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def check(cls, given: Mapping[str, Any], context: str) -> None:
        unknown = sorted(set(given) - cls.names())
        if unknown:
            raise OptionError(f"Unknown {context} option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. "
                            f"Known options: {', '.join(sorted(cls.names()))}")

    @classmethod
    def of(cls, **given: Any) -> "Options":
        """Options from keyword arguments; None means "the default" for every option."""
        cls.check(given, "agent")
        return cls(**_normalised(given))

    def merged(self, overrides: Mapping[str, Any]) -> "Options":
        """These options with ``overrides`` applied (checked like construction); an override
        that is :data:`AS_SET` (a per-call signature's default) leaves the option as it is."""
        overrides = {name: value for name, value in overrides.items() if value is not AS_SET}
        self.check(overrides, "override")
        return dataclasses.replace(self, **_normalised(overrides)) if overrides else self

    def __repr__(self) -> str:
        # base_url may hold ``user:password@`` or ``?api_key=``; api_key is never shown
        shown = (f"{f.name}={secrets.url_without_credentials(value) if f.name == 'base_url' and value else value!r}"
                 for f in dataclasses.fields(self) if f.name != "api_key" for value in [getattr(self, f.name)])
        return f"Options({', '.join(shown)})"

    def request_fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in REQUEST_OPTIONS}


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Options)}


class _AsSet:
    def __repr__(self) -> str:
        return "<as set>"


AS_SET = _AsSet()  # a per-call option's default in a signature: the agent's own value


def option_names(provider: str | None = None) -> list[str]:
    """The options, in the record's order, that ``provider``'s preset takes (None: any provider's)."""
    return [f.name for f in dataclasses.fields(Options) if provider is None or OWN_OPTIONS.get(f.name, provider) == provider]


def refuse_others(given: Mapping[str, Any], provider: str) -> None:
    """Refuse an option only another provider reads (``effort`` given to ``deepseek()``)."""
    foreign = sorted(name for name in given if OWN_OPTIONS.get(name, provider) != provider)
    if foreign:
        raise OptionError(f"{provider}() does not take {', '.join(foreign)}: "
                          + "; ".join(f"{name} is an option of {OWN_OPTIONS[name]}()" for name in foreign))


@functools.cache
def _annotations() -> dict[str, Any]:
    return typing.get_type_hints(Options)


def takes_options(provider: str | None = None, *, per_call: bool = False, leave_out: tuple[str, ...] = ()):
    """Decorator: the function's ``**options`` shown in its signature as the options it takes
    (``provider``'s, or every one), keyword-only, typed, with their defaults (``per_call``:
    :data:`AS_SET`, the agent's value). Only the signature changes; checking stays with Options."""
    def decorate(function: Callable) -> Callable:
        try:
            own = inspect.signature(function, eval_str=True)
        except NameError:  # a name only imported for type checkers: shown as written
            own = inspect.signature(function)
        kept = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        taken = {p.name for p in kept} | set(leave_out)
        added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=_annotations()[name],
                                   default=AS_SET if per_call else _DEFAULTS[name])
                 for name in option_names(provider) if name not in taken]
        function.__signature__ = own.replace(parameters=kept + added)
        return function

    return decorate


def _whole(minimum: int) -> tuple[str, Callable[[Any], bool]]:
    return (f"a whole number of at least {minimum}",
            lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= minimum)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


_TEXT = ("text", lambda value: isinstance(value, str))
_SEQUENCE = ("a list", lambda value: isinstance(value, (list, tuple)))
# What each option must be when it is not None; a wrong type is caught here, not as a TypeError
# deep in a run after a request was paid for.
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "capabilities": _SEQUENCE, "messages": _SEQUENCE,
    "max_steps": _whole(0), "max_tokens": _whole(1), "max_retries": _whole(0), "output_retries": _whole(0),
    "token_budget": _whole(0), "num_ctx": _whole(1), "image_max_side": _whole(16), "image_max_bytes": _whole(1024),
    "temperature": ("a number of at least 0", _number), "cost_budget": ("a number of at least 0", _number),
    "timeout": ("seconds or a mapping of connect/read/write/pool seconds",
                lambda value: isinstance(value, Mapping) or (_number(value) and value > 0)),
    "stream": ("True or False", lambda value: isinstance(value, bool)),
    "model": _TEXT, "base_url": _TEXT, "system": _TEXT, "tool_choice": _TEXT, "effort": _TEXT,
    "thinking_display": _TEXT, "api_key": _TEXT,
    "keep_alive": ("text or seconds", lambda value: isinstance(value, (str, int)) and not isinstance(value, bool)),
    "prices": ("a mapping of prices", lambda value: isinstance(value, Mapping)),
    "on_event": ("a function", callable),
}


def _normalised(given: Mapping[str, Any]) -> dict[str, Any]:
    """Checked against _KINDS; sequences as tuples (an Options is frozen); None back to the
    default where the default is not None (``max_steps=None`` means 10), so an override can say
    "as usual"."""
    out = {}
    for name, value in given.items():
        if value is None:
            value = _DEFAULTS[name]
        elif name in _KINDS and not _KINDS[name][1](value):
            shown = f"a {type(value).__name__}" if name == "api_key" else repr(value)[:200]  # a key is never shown
            raise OptionError(f"{name} must be {_KINDS[name][0]}, not {shown}")
        elif name in ("capabilities", "messages"):
            value = tuple(value)
        out[name] = value
    return out
