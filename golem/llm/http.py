"""POST JSON to a model provider, with retries and a wall-clock deadline.

Every failure becomes `ProviderError` or `OutOfTime`; no message ever carries the request's
credentials: they are blanked out of a reply before any of it is cut to a snippet. One
exchange, with its hard deadline, is `golem.llm.transport`.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import re
import time
from datetime import datetime, timezone
from typing import Any, Callable

from golem.core import cancel
from golem.core.errors import OutOfTime, ProviderError
from golem.core.outgoing import redact
from golem.llm.transport import (Transport, TransportFailure, get, urllib_transport,
                                 where as _where)

_Failure = TransportFailure

__all__ = ["post_json", "get", "error_detail", "error_code", "describe", "RETRY_STATUSES",
           "Transport", "TransportFailure", "urllib_transport"]

# Statuses worth another try (openai-python and anthropic-sdk also retry any 5xx).
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# Error types some servers put inside a 200 body instead of a status code.
_RETRY_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error",
                          "server_error"})
_SNIPPET = 200

_HINTS = {
    401: "check {key}",
    402: "the account is out of credit",
    403: "the request was refused: check the key's permissions or the content",
    404: "check the model name and the base URL",
    413: "the request is too large",
}


def post_json(url: str, body: Any, headers: dict[str, str], *, timeout: float,
              deadline: float | None, max_bytes: int, max_attempts: int, retry_base: float,
              retry_cap: float, retry_after_cap: float,
              on_retry: Callable[[dict], None] | None = None,
              sleep: Callable[[float], None] = cancel.sleep, label: str = "provider",
              key_name: str | None = None,
              transport: Transport | None = None) -> tuple[int, dict[str, str], Any]:
    """POST `body` as JSON and return (status, lower-cased headers, parsed JSON).

    Retries connection failures, timeouts and transient statuses (also an error object with a
    transient code inside a 200) with backoff or the server's Retry-After. Raises OutOfTime
    when no time is left before `deadline` (a time.monotonic() instant) or a wait would pass
    it, and ProviderError when the provider fails for good. `label` starts every message;
    `key_name` (an environment variable) is named when the key is refused. `transport` makes
    the exchange (default: `urllib_transport`); one with a true `instant` attribute (a replay)
    is not waited for between retries.
    """
    secrets = _secrets(headers)
    payload = json.dumps(body).encode()
    attempts = max(1, int(max_attempts))
    for attempt in range(1, attempts + 1):
        budget = timeout
        walled = False      # the wall budget, not `timeout`, bounds this attempt
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OutOfTime(f"{label}: the wall-clock budget ran out before the model "
                                "call")
            budget = min(timeout, left)
            walled = left <= timeout
        try:
            status, reply_headers, raw = (transport or urllib_transport)(
                url, payload, headers, budget, max_bytes)
            return _judge(status, reply_headers, raw, secrets)
        except _Failure as failure:
            text = _scrub(failure.text, secrets)
            if deadline is not None and (time.monotonic() >= deadline
                                         or (failure.cut and walled)):
                # the call was cut short by the wall budget, not failed by the provider
                raise OutOfTime(f"{label}: the wall-clock budget ran out during the model "
                                f"call ({text})") from None
            if not failure.retryable or attempt == attempts:
                message = f"{label}: {text}"
                hint = _HINTS.get(failure.status or 0)
                if hint:
                    message += f" ({hint.format(key=key_name or 'the API key')})"
                if failure.retryable:
                    message += f" (gave up after {attempt} attempts)"
                raise ProviderError(message, status=failure.status,
                                    retryable=failure.retryable,
                                    retry_after=_retry_after(failure.headers,
                                                             retry_after_cap)) from None
            wait = _retry_after(failure.headers, retry_after_cap)
            if wait is None:
                wait = min(retry_base * 2 ** (attempt - 1), retry_cap)
                wait *= 1 - 0.25 * random.random()
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise OutOfTime(f"{label}: {text}; waiting {wait:.1f}s to retry would pass "
                                f"the deadline") from None
            if on_retry is not None:
                on_retry({"status": failure.status, "error": text[:300], "wait": wait,
                          "attempt": attempt, "max_attempts": attempts})
            if not getattr(transport, "instant", False):
                sleep(wait)
    raise AssertionError("unreachable")  # the loop always returns or raises


def describe(status: int, headers: dict[str, str], raw: bytes,
             secrets: list[str] | tuple[str, ...] = ()) -> str | None:
    """What is wrong with one reply, as post_json would say it (the key blanked out), or
    None when it is a good JSON reply."""
    try:
        _judge(status, headers, raw, list(secrets))
    except _Failure as failure:
        return failure.text
    return None


def _parse(text: str, ctype: str) -> tuple[Any, bool]:
    if text.strip() and ("json" in ctype or text.lstrip()[:1] in ("{", "[", '"')):
        try:
            return json.loads(text), True
        except (ValueError, RecursionError):
            pass
    return None, False


def _judge(status: int, headers: dict[str, str], raw: bytes,
           secrets: list[str] | tuple[str, ...] = ()) -> tuple[int, dict[str, str], Any]:
    """Turn one HTTP reply into data or a _Failure saying whether to try again.

    A reply that becomes a message has `secrets` blanked out of it first, before any part of
    it is cut to a snippet.
    """
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    # a byte-order mark is not part of the JSON text (RFC 8259 lets a reader ignore it)
    text = raw.decode("utf-8-sig", errors="replace")
    data, parsed = _parse(text, ctype)
    ok = 200 <= status < 300
    if ok and parsed and not _has_error(data):
        return status, headers, data
    clean = _scrub(text, secrets)
    if clean != text:
        data, parsed = _parse(clean, ctype)
    if ok and parsed:
        code = error_code(data)
        retry = _should_retry(code, headers, data)
        return_status = code if isinstance(code, int) else status
        raise _Failure(f"error in a {status} reply: {error_detail(data, secrets)}",
                       return_status, retry, headers)
    retry = _should_retry(status, headers, data if parsed else None)
    if not clean.strip():
        detail = "empty body"
    elif not parsed and _binary(raw, clean):
        detail = (f"a binary body of {len(raw)} bytes ({ctype or 'no content type'}"
                  + (f", {headers['content-encoding']}" if headers.get("content-encoding")
                     else "") + ")")
    elif not parsed:
        what = ("invalid JSON" if "json" in ctype
                else f"non-JSON body ({ctype or 'no content type'})")
        detail = f"{what}: {_snippet(clean, secrets=secrets)}"
    else:
        detail = error_detail(data, secrets)
        if status == 429 and _quota_exhausted(data):
            detail += " (the quota is used up: check the plan and billing)"
    if ok:
        raise _Failure(f"HTTP {status}: {detail}", status, False, headers)
    if 300 <= status < 400 and headers.get("location"):
        detail = f"redirected to {_where(headers['location'])}; use that as the base URL"
    raise _Failure(f"HTTP {status}: {detail}", status, retry, headers)


def _binary(raw: bytes, text: str) -> bool:
    """True for a body that is not text (compressed, say): no use quoting it."""
    if b"\x00" in raw[:4096]:
        return True
    sample = text[:4096]
    odd = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\r\n"))
    return odd > max(4, len(sample) // 20)


def _should_retry(status: int | str, headers: dict[str, str], data: Any) -> bool:
    """The retry rules of the official SDKs, with `x-should-retry` having the last word."""
    override = headers.get("x-should-retry", "").strip().lower()
    if override in ("true", "false"):
        return override == "true"
    if isinstance(status, str):
        return status in _RETRY_TYPES
    if status == 429 and _quota_exhausted(data):
        return False
    if status == 402:
        return "retry-after" in headers or "retry-after-ms" in headers
    return status in RETRY_STATUSES or status >= 500


def _quota_exhausted(data: Any) -> bool:
    err = _error_object(data)
    return isinstance(err, dict) and "insufficient_quota" in (err.get("code"), err.get("type"))


def _retry_after(headers: dict[str, str], cap: float) -> float | None:
    """Seconds the server asked us to wait, when sane (finite, positive, at most `cap`)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds = _seconds(value.strip(), scale)
        if seconds is not None and math.isfinite(seconds) and 0 < seconds <= cap:
            return seconds
    return None


def _seconds(value: str, scale: float) -> float | None:
    try:
        return float(value) * scale
    except ValueError:
        pass
    if scale != 1.0:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()


def _error_object(data: Any) -> Any:
    """The error inside a reply body, whatever its shape, or None."""
    if isinstance(data, list):  # Gemini wraps the error object in an array
        data = next((item for item in data if isinstance(item, dict)), None)
    if isinstance(data, dict):
        if data.get("error") is not None:
            return data["error"]
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return choices[0].get("error")
    return None


def _has_error(data: Any) -> bool:
    return _error_object(data) not in (None, "", {})


def error_code(data: Any) -> int | str | None:
    """The status-like code of the error in a reply body: an int, an error type, or None."""
    err = _error_object(data)
    if not isinstance(err, dict):
        return None if err is None else ""
    code = err.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if isinstance(code, str) and code.isdigit():
        return int(code)
    return str(err.get("type") or code or "")


def error_detail(data: Any, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """A one-line, readable description of the error in a reply body of any known shape,
    with `secrets` blanked out before anything is cut."""
    err = _error_object(data)
    if err is None:
        err = data
    if isinstance(err, str):
        return _snippet(err, secrets=secrets)
    if not isinstance(err, dict):
        return _snippet(json.dumps(err), secrets=secrets)
    parts = [str(err.get("message") or err.get("type") or "unknown error")]
    code = err.get("code")
    kind = err.get("type")
    if isinstance(code, str) and code:
        parts.append(f"[{code}]")
    elif isinstance(kind, str) and kind and kind != parts[0]:
        parts.append(f"[{kind}]")
    meta = err.get("metadata")
    if isinstance(meta, dict):
        if meta.get("provider_name"):
            parts.append(f"(upstream {meta['provider_name']})")
        if meta.get("raw"):
            raw = meta["raw"] if isinstance(meta["raw"], str) else json.dumps(meta["raw"])
            parts.append(f"upstream said: {_snippet(raw, secrets=secrets)}")
    return _snippet(" ".join(parts), 500, secrets)


def _snippet(text: str, limit: int = _SNIPPET,
             secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Text without markup, blank runs collapsed, cut to `limit` characters; `secrets` are
    blanked out first, so a cut can never leave part of one behind."""
    text = _scrub(text, secrets)
    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", text)
    text = re.sub(r"<[^>]*>", " ", text)
    # once more: taking the markup out can join pieces of a key the page kept apart
    text = _scrub(" ".join(text.split()), secrets)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _secrets(headers: dict[str, str]) -> list[str]:
    """Credential values from the request headers, to be blanked out of any message."""
    found = []
    for name, value in headers.items():
        if name.lower() in ("authorization", "x-api-key", "api-key", "x-goog-api-key"):
            value = str(value)
            found.append(value)
            token = value.split(None, 1)[-1]
            if len(token) >= 4:
                found.append(token)
    return sorted(set(found), key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    """`text` with the key blanked in any form (golem.core.outgoing.redact): whole, in part, split,
    base64- or percent-encoded."""
    return redact(text, secrets, "***")
