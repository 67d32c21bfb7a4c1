"""What a model call costs, on every provider.

OpenRouter reports each reply's cost itself (`usage.cost`); Anthropic and OpenAI report only
tokens. golem prices those from a table shipped in the package (prices.json: dollars per
million tokens for input, output, cache reads and cache writes, with the date the prices were
checked), or from `-price IN,OUT[,CACHE_READ]`, which wins over both. A local server (the
`openai` provider at a loopback or private address) is free unless priced, or unless the
table knows the model (then the server is a proxy to the vendor, which bills). When no
price is known the cost stays unknown, and the run says at the start that `-cost` cannot
hold.

`Priced` wraps a provider and fills in each reply's cost, so the one budget check in the
loop (golem/agent/budget.py) holds on every provider. `cost_source` says where the dollars
came from: `provider`, `table`, `flag` or `unknown`.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from golem.llm.types import MAX_COST, Response

SOURCES = ("provider", "table", "flag", "unknown")
# a dated snapshot of a model is priced as the model: claude-sonnet-4-5-20250929, gpt-4.1-2025-04-14
_SNAPSHOT = re.compile(r"^(?P<base>.+?)(?:-\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$")


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, prompt: int, completion: int, cached: int = 0, written: int = 0) -> float:
        """Dollars for one reply: `prompt` holds every input token, `cached` and `written`
        of them read from and written to the provider's prompt cache."""
        cached = min(cached, prompt)
        written = min(written, prompt - cached)
        fresh = prompt - cached - written
        dollars = (fresh * self.input + cached * self.cache_read + written * self.cache_write
                   + completion * self.output) / 1_000_000
        return min(dollars, MAX_COST)

    def describe(self) -> str:
        return (f"${self.input:g} in, ${self.output:g} out, ${self.cache_read:g} cache read "
                "per million tokens")


FREE = Price(0.0, 0.0, 0.0, 0.0)


def parse_price(text: str) -> Price:
    """`IN,OUT[,CACHE_READ]` in dollars per million tokens; ValueError says what is wrong.
    Cache writes cost what input does; cache reads too when CACHE_READ is left out."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"give IN,OUT or IN,OUT,CACHE_READ in dollars per million tokens, "
                         f"like 3,15 or 3,15,0.3 (got {text!r})")
    numbers = []
    for part in parts:
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a number of dollars") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{part!r}: a price is a finite number of dollars, 0 or more")
        numbers.append(value)
    return Price(numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else numbers[0],
                 numbers[0])


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The shipped price table (golem/llm/prices.json), read once."""
    data = resources.files("golem.llm").joinpath("prices.json").read_text(encoding="utf-8")
    return json.loads(data)


def checked() -> str:
    """The date the shipped prices were checked against the vendors' pages."""
    return table()["checked"]


def lookup(vendor: str, model: str) -> Price | None:
    """The table's price of `model` at `vendor` (`anthropic` or `openai`), or None."""
    models = table()["models"].get(vendor, {})
    for name in (model, _SNAPSHOT.sub(r"\g<base>", model)):
        if name in models:
            return Price(*models[name])
    return None


def _vendor_model(provider: str, model: str) -> tuple[str, str] | None:
    """Which table entry a provider's model id names: OpenRouter ids carry the vendor
    (`anthropic/claude-sonnet-4.5`, `openai/gpt-4.1`)."""
    if provider in ("anthropic", "openai"):
        return provider, model
    if provider == "openrouter" and "/" in model:
        vendor, _, name = model.partition("/")
        name = name.split(":", 1)[0]
        if vendor == "anthropic":
            name = name.replace(".", "-")       # OpenRouter writes claude-sonnet-4.5
        return vendor, name
    return None


def is_local(url: str | None) -> bool:
    """True for a server on this machine or a private network (loopback, RFC 1918, link-local,
    `localhost`, `*.local`)."""
    if not url:
        return False
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


@dataclass(frozen=True)
class Pricing:
    """How a run's replies are priced: `price` (None: only what the provider reports),
    `source` the cost_source a reply without its own cost gets, and a line for the console."""

    price: Price | None
    source: str
    note: str


def choose(provider: str, model: str, base_url: str | None, flag: Price | None,
           flag_origin: str = "-price") -> Pricing:
    """The pricing for `model` on `provider` at `base_url`; `flag` is -price (or the price
    setting of a configuration file, named by `flag_origin`)."""
    if flag is not None:
        return Pricing(flag, "flag", f"price: {flag.describe()} ({flag_origin})")
    named = _vendor_model(provider, model)
    if provider == "openrouter" and model.endswith(":free"):
        return Pricing(FREE, "table", "price: a :free model on OpenRouter costs nothing")
    price = lookup(*named) if named else None
    # a model the table knows, behind a local address, is a proxy to the vendor: it bills
    if provider == "openai" and is_local(base_url) and price is None:
        return Pricing(FREE, "table", f"price: the server at {base_url} is local, so its "
                       "tokens count as free (give -price IN,OUT if it bills you)")
    if provider == "openrouter":
        fallback = f"; golem's table ({checked()}) when a reply has none" if price else ""
        return Pricing(price, "provider", f"price: as OpenRouter reports it{fallback}")
    if provider == "demo":
        return Pricing(FREE, "provider", "price: the demo model is free")
    if price is not None:
        return Pricing(price, "table", f"price: {model} at {price.describe()} (golem's price "
                       f"table, checked {checked()})")
    return Pricing(None, "unknown", "")


def no_price_warning(provider: str, model: str, budget: float) -> str:
    """What golem says at the start when it cannot put a dollar figure on the run."""
    held = f"the ${budget:.2f} cost budget cannot be enforced" if budget else \
        "the run's cost cannot be counted"
    return (f"no price is known for {model!r} on {provider}: {held}; give -price IN,OUT "
            "(dollars per million tokens) or set price in your golem config")


class Priced:
    """A provider whose replies all carry a cost: the -price flag's, the provider's own, or
    the table's; `cost_source` says which (the least certain one seen wins)."""

    def __init__(self, inner: Any, pricing: Pricing):
        self._inner = inner
        self.name = inner.name
        self.pricing = pricing
        self._seen: set[str] = set()

    def complete(self, request: Any) -> Response:
        response = self._inner.complete(request)
        usage = response.usage
        if self.pricing.source == "flag":
            source = "flag"
        elif usage.cost is not None:
            source = "provider"
        elif self.pricing.price is not None:
            source = "table"
        else:
            source = "unknown"
        if source in ("flag", "table"):
            usage.cost = self.pricing.price.cost(usage.prompt, usage.completion, usage.cached,
                                                 usage.written)
        self._seen.add(source)
        return response

    @property
    def cost_source(self) -> str:
        """`provider`, `table`, `flag` or `unknown` for the replies so far (before any: what
        they will get)."""
        for source in ("unknown", "table", "provider", "flag"):
            if source in self._seen:
                return source
        return self.pricing.source

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)
