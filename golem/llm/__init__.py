"""The provider seam: golem talks to every model through `Provider.complete`.

A provider is anything with a `name` and a `complete(request) -> response` method; providers
match the protocol by shape. The registry maps a provider name to a factory that takes a
`ProviderConfig`; an unknown name is a `UsageError` listing the real ones.
"""

from __future__ import annotations

from typing import Callable

from golem.core.errors import UsageError
from golem.llm.base import KEYS, Provider, ProviderConfig, Secret
from golem.llm.types import Message, Request, Response, ToolCall, ToolSpec, Usage

__all__ = ["KEYS", "Message", "Provider", "ProviderConfig", "Request", "Response", "Secret",
           "ToolCall", "ToolSpec", "Usage", "make_provider", "provider_names"]


def _openrouter(config: ProviderConfig) -> Provider:
    from golem.llm.openai import OpenAICompatible
    return OpenAICompatible(config, default_base="https://openrouter.ai/api/v1",
                            name="openrouter")


def _openai(config: ProviderConfig) -> Provider:
    from golem.llm.openai import OpenAICompatible
    return OpenAICompatible(config, default_base="https://api.openai.com/v1", name="openai")


def _anthropic(config: ProviderConfig) -> Provider:
    from golem.llm.anthropic import Anthropic
    return Anthropic(config)


def _demo(config: ProviderConfig) -> Provider:
    from golem.llm.demo import DemoProvider
    return DemoProvider(config)


PROVIDERS: dict[str, Callable[[ProviderConfig], Provider]] = {
    "openrouter": _openrouter,
    "openai": _openai,
    "anthropic": _anthropic,
    "demo": _demo,
}

def provider_names() -> list[str]:
    return sorted(PROVIDERS)


def make_provider(config: ProviderConfig) -> Provider:
    """Build the provider named in `config`, or raise UsageError naming the real ones."""
    try:
        factory = PROVIDERS[config.name]
    except KeyError:
        raise UsageError(f"unknown provider {config.name!r}; choose one of: "
                         + ", ".join(provider_names())) from None
    if config.transport is None and (config.record or config.replay):
        from golem.llm.recording import transport_for
        config.transport = transport_for(config)
    return factory(config)
