"""Record a run's HTTP exchanges with the provider, and replay them with no network and no key.

Both work below the provider, as transports for `post_json`, so the provider and the agent run
the same code online and offline: a replay parses the same replies, retries the same failures
and runs the tools for real. A recording is JSONL, one exchange a line:

    {"request": {"path": "/v1/chat/completions", "body": {...}},
     "response": {"status": 200, "headers": {"content-type": "application/json"}, "body": {...}}}

A reply that is not JSON is kept as `"text"` instead of `"body"`; an attempt that got no reply
(refused, timed out) as `{"failure": "...", "retryable": true}`. Request headers are never kept,
and the key's value is redacted wherever else it appears.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import urlsplit

from golem.core.errors import ProviderError, UsageError
from golem.llm.http import Transport, TransportFailure, urllib_transport
from golem.core.outgoing import cleaned, redact

__all__ = ["Recorder", "Replayer", "differences", "first_difference", "transport_for"]

# Reply headers that steer golem (content type, retry policy, redirects); nothing else is kept.
SAFE_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-should-retry", "location")
_CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
_MISSING = object()


class Recorder:
    """A transport that makes the real exchange and appends it to `path` (emptied first)."""

    instant = False

    def __init__(self, path: str, secrets: Iterable[str] = (),
                 inner: Transport = urllib_transport, provider: str | None = None):
        self.path = path
        self.provider = provider        # kept with each exchange, so a replay needs no flag
        self.secrets = [str(s) for s in secrets if s]
        self._inner = inner
        try:
            # opened once, never through a link, and kept: the run cannot redirect it later
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            why = "it is a symbolic link" if exc.errno == 40 else exc.strerror
            raise UsageError(f"cannot write recording {path}: {why}") from None
        self._fd = fd

    def __del__(self) -> None:
        try:
            os.close(self._fd)
        except (AttributeError, OSError):
            pass

    def __call__(self, url: str, payload: bytes, headers: dict[str, str], budget: float,
                 max_bytes: int) -> tuple[int, dict[str, str], bytes]:
        request = {"path": urlsplit(url).path, "body": _decode(payload)}
        if self.provider:
            request["provider"] = self.provider
        secrets = self.secrets + _header_secrets(headers)
        try:
            status, reply_headers, raw = self._inner(url, payload, headers, budget, max_bytes)
        except TransportFailure as failure:
            self._append({"request": request,
                          "response": {"failure": failure.text, "status": failure.status,
                                       "retryable": failure.retryable}}, secrets)
            raise
        kept = {k: v for k, v in reply_headers.items() if k in SAFE_HEADERS}
        self._append({"request": request,
                      "response": {"status": status, "headers": kept, **_reply_body(raw)}},
                     secrets)
        return status, reply_headers, raw

    def _append(self, exchange: dict[str, Any], secrets: list[str]) -> None:
        # redacted in the data first (a key JSON would escape is still found), then the text
        line = redact(json.dumps(cleaned(exchange, secrets), ensure_ascii=False),
                      secrets)
        # Written whole per exchange, so a crashed run still leaves every one before the crash.
        data = (line + "\n").encode("utf-8", errors="backslashreplace")
        while data:
            data = data[os.write(self._fd, data):]


class Replayer:
    """A transport that serves the exchanges recorded in `path`, in order, with no network.

    A request body that differs from the recorded one is reported (the first difference, as a
    path like `messages[5].content`) through `on_event("replay_mismatch", ...)` and `warn`,
    or raised as ProviderError when `strict`. Asking for more than was recorded is an error.
    """

    instant = True      # post_json does not wait between retries of a replay

    def __init__(self, path: str, strict: bool = False,
                 on_event: Callable[[str, dict], None] | None = None,
                 warn: Callable[[str], None] | None = None):
        self.path = path
        self.strict = strict
        self.on_event = on_event
        self.warn = warn or _warn
        self.exchanges = _load(path)
        self.used = 0
        self._reported: set[str] = set()

    def __call__(self, url: str, payload: bytes, headers: dict[str, str], budget: float,
                 max_bytes: int) -> tuple[int, dict[str, str], bytes]:
        if self.used >= len(self.exchanges):
            raise ProviderError(f"replay: {self.path} holds {len(self.exchanges)} exchange(s) "
                                "and all were used; this run asked the provider for more than "
                                "the recorded one did")
        exchange = self.exchanges[self.used]
        self.used += 1
        # Bodies only: the URL may differ (a recording made through -base-url, say).
        for where, recorded, sent in differences(exchange["request"].get("body"),
                                                 _decode(payload)):
            key = json.dumps([where, recorded, sent], default=repr)
            if self.strict or key not in self._reported:
                # A difference in history shows up again in every later request: say it once.
                self._reported.add(key)
                self._mismatch(where or "the request body", recorded, sent)
                break
        return _serve(exchange["response"], max_bytes)

    def _mismatch(self, where: str, recorded: Any, sent: Any) -> None:
        text = f"replay: request {self.used} differs from the recording at {where}"
        if self.strict:
            raise ProviderError(text + " (-replay-strict)")
        recorded, sent = _excerpts(recorded, sent)
        if self.on_event is not None:
            self.on_event("replay_mismatch", {"request": self.used, "at": where,
                                              "recorded": recorded, "sent": sent})
        self.warn(f"golem: warning: {text} (recorded {recorded!r}, sent {sent!r}); "
                  "serving the recorded reply anyway")


def transport_for(config: Any) -> Transport | None:
    """The transport a ProviderConfig asks for: a Replayer, a Recorder, or None (the network)."""
    if config.record and config.replay:
        raise UsageError("-record and -replay cannot be used together")
    if config.replay:
        def on_event(kind: str, info: dict) -> None:
            if config.on_event is not None:  # looked up late: the CLI may set it afterwards
                config.on_event(kind, info)
        return Replayer(config.replay, strict=config.replay_strict, on_event=on_event)
    if config.record:
        return Recorder(config.record, secrets=[config.api_key] if config.api_key else [],
                        provider=config.name)
    return None


def recorded_identity(path: str) -> tuple[str | None, str | None]:
    """(provider, model) the recording at `path` was made with, so a replay asks for the same
    ones without being told: the provider as recorded (older recordings: from the endpoint
    and the model's form), the model from the first request; None where it does not say."""
    try:
        first = _load(path)[0]["request"]
    except (UsageError, IndexError):
        return None, None
    body = first.get("body") if isinstance(first.get("body"), dict) else {}
    model = body.get("model") if isinstance(body.get("model"), str) and body["model"] else None
    provider = first.get("provider") if isinstance(first.get("provider"), str) else None
    if provider is None:
        where = str(first.get("path", ""))
        if where.endswith("/messages"):
            provider = "anthropic"
        elif where.endswith("/chat/completions"):
            provider = "openrouter" if model and "/" in model else "openai"
    return provider, model


# numbers that change from one run of the same conversation to the next (how long the tests
# took, temporary names, run ids, addresses): masked before requests are compared
_VOLATILE = re.compile(
    r"\b\d+(?:\.\d+)?\s?(?:s|ms|us|sec|secs|seconds?)\b"       # durations
    r"|\b\d{8}-\d{6}-[0-9a-f]{6}\b"                               # run ids
    r"|\b0x[0-9a-fA-F]{4,}\b"                                     # addresses
    r"|(?<=[/_-])(?:tmp|golem-[a-z]+-)[A-Za-z0-9_]{6,}"               # temporary names
    r"|(?<=/tmp/)[A-Za-z0-9_.-]{8,}")


def masked(text: str) -> str:
    """`text` with its volatile numbers and names replaced by `#`."""
    return _VOLATILE.sub("#", text)


def first_difference(recorded: Any, sent: Any) -> tuple[str, Any, Any] | None:
    """The first place two JSON values differ: (path like `messages[5].content`, recorded
    value, sent value), with a missing value as `(absent)`; None when they are equal."""
    return next(differences(recorded, sent), None)


def differences(recorded: Any, sent: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every place two JSON values differ, in document order (see first_difference)."""
    if type(recorded) is not type(sent):
        yield path, recorded, sent
    elif isinstance(recorded, dict):
        for key in [*recorded, *(k for k in sent if k not in recorded)]:
            left, right = recorded.get(key, _MISSING), sent.get(key, _MISSING)
            step = f"{path}.{key}" if path else str(key)
            if left is _MISSING or right is _MISSING:
                yield step, _shown(left), _shown(right)
            else:
                yield from differences(left, right, step)
    elif isinstance(recorded, list):
        for index, (left, right) in enumerate(zip(recorded, sent)):
            yield from differences(left, right, f"{path}[{index}]")
        for index in range(min(len(recorded), len(sent)), max(len(recorded), len(sent))):
            yield (f"{path}[{index}]",
                   _shown(recorded[index] if index < len(recorded) else _MISSING),
                   _shown(sent[index] if index < len(sent) else _MISSING))
    elif recorded != sent and not (isinstance(recorded, str)
                                   and masked(recorded) == masked(sent)):
        yield path, recorded, sent


def _load(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read recording {path}: {exc.strerror}") from None
    exchanges = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            exchange = json.loads(line)
        except ValueError:
            exchange = None
        if not (isinstance(exchange, dict) and isinstance(exchange.get("request"), dict)
                and isinstance(exchange.get("response"), dict)):
            raise UsageError(f"{path}:{number}: not a recorded exchange "
                             "(a file written with -record)")
        exchanges.append(exchange)
    return exchanges


def _serve(response: dict[str, Any], max_bytes: int) -> tuple[int, dict[str, str], bytes]:
    """A recorded reply as the network would have given it (or its recorded failure)."""
    status = response.get("status")
    status = status if isinstance(status, int) else None
    if "failure" in response:
        raise TransportFailure(str(response["failure"]), status,
                               bool(response.get("retryable")))
    headers = response.get("headers")
    headers = {str(k).lower(): str(v) for k, v in headers.items()} \
        if isinstance(headers, dict) else {}
    if "body" in response:
        raw = json.dumps(response["body"]).encode()
    else:
        raw = str(response.get("text") or "").encode()
    if len(raw) > max_bytes:
        raise TransportFailure(f"response larger than {max_bytes} bytes", status, False)
    return status or 200, headers, raw


def _decode(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", errors="replace")


def _reply_body(raw: bytes) -> dict[str, Any]:
    text = raw.decode("utf-8", errors="replace")
    try:
        return {"body": json.loads(text)} if text.strip() else {"text": ""}
    except ValueError:
        return {"text": text}


def _header_secrets(headers: dict[str, str]) -> list[str]:
    found = []
    for name, value in headers.items():
        if name.lower() in _CREDENTIAL_HEADERS:
            found.append(str(value))
            found.append(str(value).split(None, 1)[-1])   # the token after "Bearer"
    return sorted(set(found), key=len, reverse=True)


def _shown(value: Any) -> Any:
    return "(absent)" if value is _MISSING else value


def _excerpts(recorded: Any, sent: Any, limit: int = 80) -> tuple[str, str]:
    """Short texts of two differing values, from just before where they part ways."""
    left, right = (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                   for v in (recorded, sent))
    same = 0
    while same < min(len(left), len(right)) and left[same] == right[same]:
        same += 1
    start = max(0, same - 20)

    def cut(text: str) -> str:
        piece = text[start:start + limit]
        return ("..." if start else "") + piece + ("..." if start + limit < len(text) else "")
    return cut(left), cut(right)


def _warn(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # a closed stderr must not end the run
