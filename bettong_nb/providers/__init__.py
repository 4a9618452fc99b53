"""Providers: one module per wire format, each translating the neutral seam
(:mod:`bettong_nb.provider`: Request, Response, Provider) to a vendor's API. The agents built on
them are ``bettong_nb.deepseek()``, ``openai()``, ``anthropic()``, ``ollama()`` and ``offline()``."""

from __future__ import annotations

import importlib
from typing import Any

from ..core.provider import (CallableProvider, Provider, ProviderError, Request, Response, SystemBlock,
    refused, text, tool_uses, truncated, unfence)

__all__ = ["Request", "Response", "SystemBlock", "Provider", "ProviderError", "CallableProvider",
           "text", "tool_uses", "refused", "truncated", "unfence",
           "OpenAIProvider", "AnthropicProvider", "OllamaProvider", "OfflineModel", "Scripted", "Recording", "Replay"]

_LAZY = {"OpenAIProvider": "openai", "AnthropicProvider": "anthropic", "OllamaProvider": "ollama",
         "OfflineModel": "offline", "Scripted": "scripted", "Recording": "replay", "Replay": "replay"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'bettong_nb.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
