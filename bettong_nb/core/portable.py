"""What travels to another process (a Dask worker) is how an object was made: its settings,
never a key, a credential, a connection, a client, a lock or a running server. It is made again
where it lands, and reads its secrets from that process's environment.

    class OllamaProvider:
        def __reduce__(self):
            return rebuild, (type(self), withheld(self._settings))   # the keyword arguments, no secret

An explicit ``api_key=`` is therefore not in the pickle: give the workers the key through their
environment (``LocalCluster(env={"DEEPSEEK_API_KEY": ...})``, or your cluster's worker
environment), as the README's Dask section shows. A URL holding a credential (a password,
``user:pw@``, or a credential-named query value, ``?api_key=``) travels without it; the process
that unpickles it takes the URL from a variable of its own environment that holds a URL with
credentials to the same scheme, host and port (any name: ``LocalCluster(env={"PROXY_URL":
"http://user:pw@proxy/v1"})``), or fails saying so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..safety import secrets

__all__ = ["rebuild", "withheld", "filled"]


@dataclass(frozen=True)
class _FromEnvironment:
    """A URL whose credentials stayed behind: ``shown`` is its scheme, host and port alone."""

    shown: str

    def resolve(self) -> str:
        origin = _origin(self.shown)
        found = sorted({value.strip() for value in os.environ.values()
                        if _origin(value.strip()) == origin and secrets.embedded_credentials(value)})
        if len(found) == 1:
            return found[0]
        how = ("no variable of this process's environment holds it with its credentials" if not found
               else f"{len(found)} variables of this process's environment hold URLs with credentials to that host")
        raise RuntimeError(
            f"a URL to {self.shown} held credentials, which never travel in a pickle or a task graph, and {how}: "
            f"give the workers the URL in their environment, e.g. LocalCluster(env={{'PROXY_URL': '<the URL>'}})")


def _origin(url: str) -> tuple | None:
    try:
        parts = urlsplit(url)
        return (parts.scheme.lower(), parts.hostname, parts.port) if parts.scheme and parts.hostname else None
    except ValueError:
        return None


def withheld(settings: Any) -> Any:
    """``settings`` with every URL that holds a credential replaced by a marker :func:`filled`
    reads from the unpickling process's environment (strings, in mappings, lists and tuples); any
    other string holding one (a token, a held key) is refused with TypeError."""
    if isinstance(settings, str):
        if _origin(settings) and secrets.embedded_credentials(settings):
            scheme, host, port = _origin(settings)
            return _FromEnvironment(f"{scheme}://{host}" + (f":{port}" if port else ""))
        if secrets.holds_credential(settings):
            raise TypeError("a setting holds a credential, which never travels in a pickle or a task graph: "
                            "build the object where it runs, or let it read the credential from the environment")
        return settings
    if isinstance(settings, Mapping):
        return {key: withheld(value) for key, value in settings.items()}
    if isinstance(settings, (list, tuple)):
        return type(settings)(withheld(value) for value in settings)
    return settings


def filled(settings: Any) -> Any:
    """What :func:`withheld` gave, its URLs read from this process's environment."""
    if isinstance(settings, _FromEnvironment):
        return settings.resolve()
    if isinstance(settings, Mapping):
        return {key: filled(value) for key, value in settings.items()}
    if isinstance(settings, (list, tuple)):
        return type(settings)(filled(value) for value in settings)
    return settings


def rebuild(kind: Any, settings: Mapping[str, Any]) -> Any:
    """``kind(**settings)``, withheld URLs read from this process's environment: the unpickling
    side of ``__reduce__``."""
    return kind(**filled(settings))
