"""The preflight: one free request that finds a rejected key, a wrong base URL or an unreachable
host before anything is spent.

It is a GET of the provider's key or models endpoint (no tokens, no cost), started beside the
baseline run of the suite. A definite failure ends golem with a usage error (exit 2): found
while the baseline still runs, it stops the baseline at once (`signals.abort_main`); otherwise
the first model call waits for it. A reply that proves nothing (no such endpoint on a local
server, a key that may not list models, a slow answer) lets the run go on, and the trace says
so. Definite failures:

- no connection at all: DNS failure, connection refused, no route, a TLS certificate rejected,
  or no connection within the time allowed;
- HTTP 401 (the key is rejected, or the server wants one) and 407 (a proxy wants one);
- a redirect (the base URL is not where the API lives; golem does not follow redirects);
- a 2xx page that is not JSON (a website, not an API);
- a 404 from the provider's own host, where the endpoint is known to exist.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

from golem.core import signals
from golem.core.errors import Abort, UsageError
from golem.llm.http import describe
from golem.llm.transport import TransportFailure, get, where
from golem.core.outgoing import redact

__all__ = ["Probe", "Preflight", "Checked", "wait"]

TIMEOUT = 10.0              # seconds the preflight may take
_MAX_BYTES = 1 << 20        # a models list is a few KiB; a bigger 2xx reply still counts


@dataclass
class Probe:
    """What one provider's preflight sends: a GET of `url` with `headers`.

    `official` is the host the endpoint is known to exist on (a 404 there means a wrong
    path); `key_name` the variable the key came from; `keyed` whether a key is sent.
    """

    url: str
    headers: dict[str, str]
    official: str
    key_name: str
    keyed: bool


@dataclass
class Result:
    outcome: str            # "ok", "unsure" (carry on) or "failed" (exit 2)
    detail: str
    status: int | None = None


class Preflight:
    """The preflight request, made in a thread from `start()` on; `wait()` collects it."""

    def __init__(self, label: str, probe: Probe, *, timeout: float = TIMEOUT,
                 on_event: Callable[[str, dict], None] | None = None):
        self.label = label
        self.probe = probe
        self.timeout = timeout
        self.on_event = on_event
        self.result: Result | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._waiting = False
        self._cancelled = False
        self._armed = False     # the main thread is where it can take an abort (`arm`)
        self._aborted = False
        self._reported = False
        self._thread = threading.Thread(target=self._run, name="golem-preflight", daemon=True)

    def start(self) -> Preflight:
        self._thread.start()
        return self

    def _run(self) -> None:
        secrets = [v.split(None, 1)[-1] for k, v in self.probe.headers.items()
                   if k.lower() in ("authorization", "x-api-key")]
        try:
            status, headers, raw = get(self.probe.url, self.probe.headers, self.timeout,
                                       _MAX_BYTES)
        except TransportFailure as failure:
            result = self._failed_exchange(failure)
        except Exception as exc:    # a bug here must not stop a run that may work
            result = Result("unsure", f"the preflight itself failed: {type(exc).__name__}")
        else:
            result = self._judge(status, headers, raw, secrets)
        result.detail = redact(result.detail, secrets, "***")     # whatever produced it
        with self._lock:    # held, so that wait() cannot slip in before the abort is sent
            self.result = result
            self._done.set()
            if result.outcome == "failed" and self._armed and not (self._waiting
                                                                   or self._cancelled):
                # the main thread is still in the baseline: stop it now
                self._aborted = signals.abort_main(Abort(self.message()))

    def _failed_exchange(self, failure: TransportFailure) -> Result:
        if failure.status is not None and 200 <= failure.status < 300:
            return Result("ok", f"HTTP {failure.status}", failure.status)   # too big to read
        if failure.status is not None:
            return Result("unsure", failure.text, failure.status)
        if failure.cut and failure.connected:
            return Result("unsure", f"no reply within {self.timeout:.0f}s")
        return Result("failed", f"{failure.text}; check the base URL and the network")

    def _judge(self, status: int, headers: dict[str, str], raw: bytes,
               secrets: list[str]) -> Result:
        probe = self.probe
        problem = describe(status, headers, raw, secrets)
        if 200 <= status < 300:
            if problem is None:
                return Result("ok", f"HTTP {status}", status)
            return Result("failed", f"GET {where(probe.url)} answers with a page that is not "
                          f"the API ({problem}); check the base URL", status)
        if 300 <= status < 400:
            return Result("failed", f"{problem}", status)
        if status == 401:
            if probe.keyed:
                return Result("failed", f"the key in {probe.key_name} was rejected ({problem})",
                              status)
            return Result("failed", f"the server wants a key ({problem}); set "
                          f"{probe.key_name}", status)
        if status == 407:
            return Result("failed", f"a proxy wants credentials ({problem})", status)
        if status == 404 and urlsplit(probe.url).hostname == probe.official:
            return Result("failed", f"{problem}: check the base URL", status)
        return Result("unsure", problem or f"HTTP {status}", status)

    def message(self) -> str:
        """The one line a failed preflight ends golem with."""
        detail = self.result.detail if self.result else "no result"
        url = where(self.probe.url)
        what = "preflight" if url in detail else f"preflight GET {url}"
        return f"{self.label}: {detail} ({what}, before any model call)"

    def arm(self) -> None:
        """From the main thread, once it can take an abort and record the `preflight`
        event: a failure found from now on stops the baseline at once; one found before is
        raised here."""
        with self._lock:
            self._armed = True
            failed = self.result is not None and self.result.outcome == "failed" and not (
                self._waiting or self._cancelled)
        if failed:
            raise Abort(self.message())

    def wait(self, deadline: float | None = None) -> None:
        """Block until the preflight is done (never past `deadline`); UsageError when it
        failed. Later calls return at once."""
        with self._lock:
            self._waiting = True
            if self._aborted:       # the main thread got here before the abort landed
                signals.withdraw()
        limit = self.timeout + 2.0
        if deadline is not None:
            limit = min(limit, max(0.0, deadline - time.monotonic()))
        self._done.wait(limit)
        result = self.result
        if result is None:
            return      # out of time: the budget check stops the run with `wall`
        self.report()
        if result.outcome == "failed":
            raise UsageError(self.message())

    def report(self) -> None:
        """The `preflight` event, once, when there is a result (from the main thread: the
        trace is not written from two threads)."""
        result = self.result
        if result is None or self._reported:
            return
        if self.on_event is not None:
            self.on_event("preflight", {"url": where(self.probe.url), "status": result.status,
                                        "outcome": result.outcome, "detail": result.detail})
        self._reported = True

    def cancel(self) -> None:
        """No model call will come: the result no longer matters."""
        with self._lock:
            self._cancelled = True
            if self._aborted:
                signals.withdraw()


class Checked:
    """A provider whose first model call waits for the preflight (`ready`)."""

    def __init__(self, inner: Any, preflight: Preflight):
        self._inner = inner
        self.name = inner.name
        self.preflight = preflight

    def complete(self, request: Any) -> Any:
        return self._inner.complete(request)

    def ready(self, deadline: float | None = None) -> None:
        self.preflight.wait(deadline)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def wait(provider: Any, deadline: float | None = None) -> None:
    """Wait for `provider`'s preflight, if it has one; UsageError when it failed."""
    ready = getattr(provider, "ready", None)
    if ready is not None:
        ready(deadline)
