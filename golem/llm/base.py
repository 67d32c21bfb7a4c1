"""What golem's providers share: the `Provider` protocol, how to reach one (`ProviderConfig`,
the key as a `Secret`), and which environment variable holds each provider's key. The
registry in `golem.llm` builds providers from these; the providers import them from here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from golem.llm.types import Request, Response


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
    record: str | None = None       # append every HTTP exchange to this JSONL file
    replay: str | None = None       # serve HTTP replies from this recording instead
    replay_strict: bool = False     # a request that differs from the recording is an error
    # How providers make HTTP exchanges (None: the network); make_provider sets it for
    # record and replay, so provider code is the same online and offline.
    transport: Callable[..., tuple] | None = field(default=None, repr=False)
    on_event: Callable[[str, dict], None] | None = field(default=None, repr=False)
    seed: int | None = None         # sent where the provider takes one (attempts differ)
    attempt: int = 0                # which attempt of several this provider serves (1-based)


# Which environment variable holds each provider's key, and whether it is required.
KEYS: dict[str, tuple[str, bool]] = {
    "openrouter": ("OPENROUTER_API_KEY", True),
    "openai": ("OPENAI_API_KEY", False),
    "anthropic": ("ANTHROPIC_API_KEY", True),
}
