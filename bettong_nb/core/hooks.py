"""What the core offers but a layer above it does: saving and exporting (records) and many runs
at once (batches). ``Session.save``, ``RunResult.export`` and ``Agent.map`` call these slots;
the package's front door (``bettong_nb/__init__.py``) fills them with the records' and batches'
functions, each imported only when first called. So the core never imports upward, and
``import bettong_nb`` loads neither records nor batches.

    from bettong_nb.core import hooks
    hooks.provide(export=my_export)       # what the front door does, once per process
    hooks.call("export", result, path)
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["SLOTS", "provide", "call"]

SLOTS = frozenset({"save", "export", "map_prompts", "amap", "map_frame", "dask_map_frame"})

_provided: dict[str, Callable[..., Any]] = {}


def provide(**functions: Callable[..., Any]) -> None:
    """Fill slots by name; an unknown name is a programming error, said at once."""
    unknown = set(functions) - SLOTS
    if unknown:
        raise KeyError(f"no hook slot named {', '.join(sorted(unknown))}; slots: {', '.join(sorted(SLOTS))}")
    _provided.update(functions)


def call(slot: str, *args: Any, **kwargs: Any) -> Any:
    try:
        function = _provided[slot]
    except KeyError:
        raise RuntimeError(f"nothing provides {slot!r}: import bettong_nb (its front door fills the core's hooks)") from None
    return function(*args, **kwargs)
