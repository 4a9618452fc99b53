"""What the core offers but a layer above it does: saving and exporting (records) and many runs
at once (batches). ``Session.save``, ``RunResult.export`` and ``Agent.map`` call these slots;
the package's front door (``bettong_nb/__init__.py``) fills them with the records' and batches'
functions, each imported only when first called. ``open_notebook`` is the live notebook the
notebook capability works in: ``%load_ext bettong_nb`` fills it, and empties it on unload. So the core never imports upward, and
``import bettong_nb`` loads neither records nor batches.

    from bettong_nb.core import hooks
    hooks.provide(export=my_export)       # what the front door does, once per process
    hooks.call("export", result, path)
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["SLOTS", "provide", "provided", "call"]

SLOTS = frozenset({"save", "export", "map_prompts", "amap", "map_frame", "dask_map_frame", "open_notebook"})

_provided: dict[str, Callable[..., Any]] = {}


def provide(**functions: Callable[..., Any] | None) -> None:
    """Fill slots by name (None empties one); an unknown name is a programming error, said at once."""
    unknown = set(functions) - SLOTS
    if unknown:
        raise KeyError(f"no hook slot named {', '.join(sorted(unknown))}; slots: {', '.join(sorted(SLOTS))}")
    for name, function in functions.items():
        if function is None:
            _provided.pop(name, None)
        else:
            _provided[name] = function


def provided(slot: str) -> bool:
    return slot in _provided


def call(slot: str, *args: Any, **kwargs: Any) -> Any:
    try:
        function = _provided[slot]
    except KeyError:
        raise RuntimeError(f"nothing provides {slot!r}: import bettong_nb (its front door fills the core's hooks)") from None
    return function(*args, **kwargs)
