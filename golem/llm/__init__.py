"""The provider seam: golem talks to every model through `Provider.complete`.

A provider is anything with a `name` and a `complete(request) -> response` method; providers
match the protocol by shape. The registry maps a provider name to a factory that takes a
`ProviderConfig`; an unknown name is a `UsageError` listing the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from golem.errors import UsageError
from golem.llm.types import Message, Request, Response, ToolCall, ToolSpec, Usage

__all__ = ["Message", "Provider", "ProviderConfig", "Request", "Response", "ToolCall",
           "ToolSpec", "Usage", "make_provider", "provider_names"]


class Provider(Protocol):
    """What the agent loop needs from a model service."""

    name: str

    def complete(self, request: Request) -> Response:
        """Return the model's next message, or raise ProviderError / OutOfTime."""
        ...


class Secret(str):
    """A string that never shows itself in repr() or formatting of containers."""

    def __repr__(self) -> str:
        return "Secret('***')"


@dataclass
class ProviderConfig:
    """How to reach one provider. Built by the CLI from flags and the environment."""

    name: str
    model: str
    api_key: Secret | None = field(default=None, repr=False)
    base_url: str | None = None
    timeout: float = 300.0          # seconds for one HTTP call
    max_attempts: int = 6           # first try plus retries
    max_response_bytes: int = 8 * 1024 * 1024
    max_tokens: int | None = None
    on_retry: Callable[[dict], None] | None = field(default=None, repr=False)
    retry_base: float = 0.5         # first backoff wait in seconds, doubled per retry
    retry_cap: float = 8.0          # longest backoff wait
    retry_after_cap: float = 60.0   # longest server-requested wait we honour


def _openrouter(config: ProviderConfig) -> Provider:
    from golem.llm.openai import OpenAICompatible
    return OpenAICompatible(config, default_base="https://openrouter.ai/api/v1",
                            name="openrouter")


def _openai(config: ProviderConfig) -> Provider:
    from golem.llm.openai import OpenAICompatible
    return OpenAICompatible(config, default_base="https://api.openai.com/v1", name="openai")


def _demo(config: ProviderConfig) -> Provider:
    from golem.demo import DemoProvider
    return DemoProvider(config)


PROVIDERS: dict[str, Callable[[ProviderConfig], Provider]] = {
    "openrouter": _openrouter,
    "openai": _openai,
    "demo": _demo,
}

# Which environment variable holds each provider's key, and whether it is required.
KEYS: dict[str, tuple[str, bool]] = {
    "openrouter": ("OPENROUTER_API_KEY", True),
    "openai": ("OPENAI_API_KEY", False),
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
    return factory(config)
