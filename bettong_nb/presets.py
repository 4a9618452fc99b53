"""Ready-made agents: a model provider and its options, in one call.

    bettong_nb.deepseek(capabilities=[...])              # key from DEEPSEEK_API_KEY
    bettong_nb.openai(base_url="http://127.0.0.1:8000/v1")
    bettong_nb.anthropic(), bettong_nb.ollama(model="qwen3:8b")
    bettong_nb.offline(root="data")                      # no key, no network: the demo model
    bettong_nb.agent(provider=my_provider)               # any Provider or request -> Response function

Each returns a :class:`bettong_nb.ModelAgent`; its provider is built from the options
(``api_key``, ``base_url``, ``timeout``, ``max_retries``) and read the key at the first request.
``help(bettong_nb.deepseek)`` lists every option a preset takes, with its type and default
(built from :class:`~bettong_nb.core.options.Options`); an option only another provider reads
(``effort`` for ``deepseek()``) is refused.
The factories are picklable (a bound method each), so an agent travels to Dask workers.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .core.agent import ModelAgent
from .core.options import PROVIDER_OPTIONS, refuse_others, takes_options

__all__ = ["agent", "deepseek", "openai", "anthropic", "ollama", "offline"]


@takes_options()
def agent(provider: Any = None, **options: Any) -> ModelAgent:
    """An agent over any provider (a Provider object or a callable request -> Response).
    Without one, the DeepSeek provider is used."""
    if provider is None:
        return deepseek(**options)
    return ModelAgent(provider=provider, **options)


@takes_options("deepseek")
def deepseek(**options: Any) -> ModelAgent:
    """An agent on DeepSeek (key from DEEPSEEK_API_KEY, read at the first request)."""
    from .providers.openai import DEEPSEEK

    refuse_others(options, "deepseek")
    return ModelAgent(DEEPSEEK.provider, **options)


@takes_options("openai")
def openai(**options: Any) -> ModelAgent:
    """An agent on any OpenAI-compatible server: ``base_url`` (or OPENAI_BASE_URL) is its API root,
    ``/v1`` included where it has one; the key comes from OPENAI_API_KEY."""
    from .providers.openai import OPENAI

    refuse_others(options, "openai")
    service = dataclasses.replace(OPENAI, base_url=os.environ.get("OPENAI_BASE_URL") or OPENAI.base_url,
                                  model=os.environ.get("OPENAI_MODEL") or OPENAI.model)
    return ModelAgent(service.provider, **options)


@takes_options("anthropic")
def anthropic(**options: Any) -> ModelAgent:
    """An agent on Anthropic's Messages API (key from ANTHROPIC_API_KEY); ``effort`` is the
    reasoning depth (``output_config.effort``), ``thinking_display`` whether thinking is returned."""
    from .providers.anthropic import AnthropicProvider

    refuse_others(options, "anthropic")
    return ModelAgent(AnthropicProvider.from_options, **options)


@takes_options("ollama")
def ollama(**options: Any) -> ModelAgent:
    """An agent on a local Ollama server (no key; base_url default http://localhost:11434);
    ``num_ctx`` is the context window, ``keep_alive`` how long the model stays loaded."""
    from .providers.ollama import OllamaProvider

    refuse_others(options, "ollama")
    return ModelAgent(OllamaProvider.from_options, **options)


@takes_options("offline", leave_out=("provider", *sorted(PROVIDER_OPTIONS)))
def offline(root: str | os.PathLike | None = None, **options: Any) -> ModelAgent:
    """An agent on the offline demo model: no key, no network. With ``root``, it explores that
    folder through a read-only filesystem capability (so a first ``%%agent --approve`` cell
    shows approval buttons with no key at all)."""
    from .providers.offline import OfflineModel

    refuse_others(options, "offline")
    if root is not None:
        from .capabilities.filesystem import filesystem

        options["capabilities"] = [filesystem(root=root), *(options.get("capabilities") or ())]
    return ModelAgent(provider=OfflineModel(), **options)
