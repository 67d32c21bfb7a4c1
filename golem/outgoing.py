"""What every text and number passes through on its way out of golem.

Secrets are replaced first and the text is cut afterwards, never the other way round: a cut
that falls inside a key would leave its head behind, and a head is not recognised as the key
any more. Numbers are made finite, since `Infinity` and `NaN` are not JSON.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

__all__ = ["REDACTED", "MIN_SECRET", "redact", "redact_value", "clip", "finite"]

REDACTED = "[redacted]"
MIN_SECRET = 8      # shorter values would blank out ordinary words


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret value in `text` (secrets shorter than MIN_SECRET are ignored)."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every secret replaced in every string inside it, keys of dicts included.

    Works on the data, not on its JSON text, so a key JSON would escape (a quote, a
    backslash) is still found. Returns `value` itself when there is nothing to redact.
    """
    secrets = [str(s) for s in secrets if s and len(str(s)) >= MIN_SECRET]
    if not secrets:
        return value
    return _walk(value, secrets)


def _walk(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {_walk(k, secrets) if isinstance(k, str) else k: _walk(v, secrets)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, secrets) for v in value]
    return value


def clip(text: str, limit: int, secrets: Iterable[str] = ()) -> str:
    """`text` redacted, then cut to `limit` characters (an ellipsis marks the cut)."""
    text = redact(text, secrets)
    return text if len(text) <= limit else text[:max(0, limit - 3)] + "..."


def finite(value: Any) -> Any:
    """`value` with every float that is not finite replaced by None, at any depth."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
