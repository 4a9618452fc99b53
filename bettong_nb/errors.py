"""Errors that are the user's to fix: a remote service's answer, a missing key, an unknown option.

    try:
        agent.run("...")
    except bettong_nb.ProviderError as err:
        err.status, err.retryable, err.retry_after

Messages name the service and say what it answered; they never carry a key (the HTTP layer
redacts them before the error is made). In IPython they show as one line (``ProviderError: No
DeepSeek API key: ...``), not a traceback through the library: the traceback is for bugs.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["UserError", "ServiceError", "OptionError"]


class UserError(Exception):
    """Base of the errors the user fixes (a key, an option, a URL, a cassette); IPython shows
    them as one line, ``Type: message``."""

    def _render_traceback_(self) -> list[str]:  # IPython's hook for an exception's own display
        return [f"{type(self).__name__}: {self}"]


class OptionError(UserError, TypeError):
    """An option that does not exist or does not fit the others (``TypeError``, as Python says of
    an unknown keyword)."""


class ServiceError(UserError, RuntimeError):
    """A request to a remote service failed. ``service`` names it; ``status`` is the HTTP status
    when there was one; ``retryable`` says whether the same request may succeed later, and
    ``retry_after`` how many seconds the server asked us to wait."""

    def __init__(self, message: str, *, service: str, status: int | None = None, body_excerpt: str | None = None,
                 retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.service = service
        self.status = status
        self.body_excerpt = body_excerpt
        self.retryable = retryable
        self.retry_after = retry_after

    def redact(self, extra: Iterable[str | None] = ()) -> "ServiceError":
        """Scrub the message and the body excerpt of credentials (and of ``extra`` values)."""
        from .secrets import redact

        self.args = tuple(redact(arg, extra=extra)[0] if isinstance(arg, str) else arg for arg in self.args)
        if self.body_excerpt is not None:
            self.body_excerpt = redact(self.body_excerpt, extra=extra)[0]
        return self
