"""Providers: the neutral Request/Response seam and one module per wire format."""

from __future__ import annotations

import importlib
from typing import Any

from .base import (CallableProvider, Provider, ProviderError, Request, Response, SystemBlock, refused,
                   text, tool_uses, truncated, unfence)

__all__ = ["Request", "Response", "SystemBlock", "Provider", "ProviderError", "CallableProvider",
           "text", "tool_uses", "refused", "truncated", "unfence",
           "OpenAIProvider", "AnthropicProvider", "OllamaProvider", "Scripted", "Recording", "Replay"]

_LAZY = {"OpenAIProvider": "openai", "AnthropicProvider": "anthropic", "OllamaProvider": "ollama",
         "Scripted": "scripted", "Recording": "replay", "Replay": "replay"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'bettong_nb.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
