"""What travels to another process (a Dask worker) is how an object was made: its settings,
never a key, a connection, a client, a lock or a running server. It is made again where it
lands, and reads its key from that process's environment.

    class OllamaProvider:
        def __reduce__(self):
            return rebuild, (type(self), self._settings)     # the keyword arguments, no key

An explicit ``api_key=`` is therefore not in the pickle: give the workers the key through their
environment (``LocalCluster(env={"DEEPSEEK_API_KEY": ...})``, or your cluster's worker
environment), as the README's Dask section shows.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["rebuild"]


def rebuild(kind: type, settings: Mapping[str, Any]) -> Any:
    """``kind(**settings)``: the unpickling side of ``__reduce__``."""
    return kind(**settings)
