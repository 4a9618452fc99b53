"""The error every remote service raises: a model provider or a search source.

    try:
        agent.run("...")
    except bettong_nb.ProviderError as err:
        err.status, err.retryable, err.retry_after

Messages name the service and say what it answered; they never carry a key (the HTTP layer
redacts them before the error is made).
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["ServiceError"]


class ServiceError(RuntimeError):
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
