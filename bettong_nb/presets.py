"""Ready-made agents: a model provider and its options, in one call.

    bettong_nb.deepseek(capabilities=[...])              # key from DEEPSEEK_API_KEY
    bettong_nb.openai(base_url="http://127.0.0.1:8000/v1")
    bettong_nb.anthropic(), bettong_nb.ollama(model="qwen3:8b")
    bettong_nb.offline(root="data")                      # no key, no network: the demo model
    bettong_nb.agent(provider=my_provider)               # any Provider or request -> Response function

Each returns a :class:`bettong_nb.ModelAgent`; its provider is built from the options
(``api_key``, ``base_url``, ``timeout``, ``max_retries``) and read the key at the first request.
The factories are picklable (a bound method each), so an agent travels to Dask workers.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .core.agent import ModelAgent

__all__ = ["agent", "deepseek", "openai", "anthropic", "ollama", "offline"]


def agent(provider: Any = None, **options: Any) -> ModelAgent:
    """An agent over any provider (a Provider object or a callable request -> Response).
    Without one, the DeepSeek provider is used."""
    if provider is None:
        return deepseek(**options)
    return ModelAgent(provider=provider, **options)


def deepseek(**options: Any) -> ModelAgent:
    """An agent on DeepSeek (key from DEEPSEEK_API_KEY, read at the first request)."""
    from .providers.openai import DEEPSEEK

    return ModelAgent(DEEPSEEK.provider, **options)


def openai(**options: Any) -> ModelAgent:
    """An agent on any OpenAI-compatible server: ``base_url`` (or OPENAI_BASE_URL) is its API root,
    ``/v1`` included where it has one; the key comes from OPENAI_API_KEY."""
    from .providers.openai import OPENAI

    service = dataclasses.replace(OPENAI, base_url=os.environ.get("OPENAI_BASE_URL") or OPENAI.base_url,
                                  model=os.environ.get("OPENAI_MODEL") or OPENAI.model)
    return ModelAgent(service.provider, **options)


def anthropic(**options: Any) -> ModelAgent:
    """An agent on Anthropic's Messages API (key from ANTHROPIC_API_KEY)."""
    from .providers.anthropic import AnthropicProvider

    return ModelAgent(AnthropicProvider.from_options, **options)


def ollama(**options: Any) -> ModelAgent:
    """An agent on a local Ollama server (no key; base_url default http://localhost:11434)."""
    from .providers.ollama import OllamaProvider

    return ModelAgent(OllamaProvider.from_options, **options)


def offline(root: str | os.PathLike | None = None, **options: Any) -> ModelAgent:
    """An agent on the offline demo model: no key, no network. With ``root``, it explores that
    folder through a read-only filesystem capability (so a first ``%%agent --approve`` cell
    shows approval buttons with no key at all)."""
    from .providers.offline import OfflineModel

    if root is not None:
        from .capabilities.filesystem import filesystem

        options["capabilities"] = [filesystem(root=root), *(options.get("capabilities") or ())]
    return ModelAgent(provider=OfflineModel(), **options)
