"""One HTTP exchange with a model provider, under a hard deadline.

Socket timeouts restart with every byte, so a server that trickles its status line, its
headers or its body, or sends `100 Continue` forever, would outlast any of them. So each
exchange is watched by one watchdog thread, shared by all of them: at the exchange's deadline
it shuts the connection down, which ends any read in progress at once, and the exchange fails
as cut short. The exchange itself runs in the calling thread, so signals (Ctrl-C, SIGTERM)
reach it as they would any read, and watching costs two lock round trips, not a thread.
What no socket can bound is a DNS lookup that hangs; the preflight, in a thread of its own,
finds an unresolvable host before the first model call.

The reply is read to at most `max_bytes`, and a Content-Encoding is undone (identity is asked
for, but not every server honours it).
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
import zlib
from typing import Any, Callable

from golem.core import cancel
from golem.core.outgoing import clip

__all__ = ["Transport", "TransportFailure", "urllib_transport", "get", "where"]

_CHUNK = 64 * 1024


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # Following a redirect would resend the Authorization header to wherever it points.
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class _Guard:
    """The sockets of one exchange, so another thread can shut them down at the deadline.

    It holds duplicates of the descriptors: shutting a duplicate down ends the connection
    for every descriptor of it (a read in progress returns at once), and a duplicate cannot
    have been closed and reused behind the guard's back.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.fired = False
        self.finished = False
        self.connected = False

    def attach(self, sock: socket.socket) -> None:
        dup = sock.dup()
        with self._lock:
            self.connected = True
            self._sockets.append(dup)
            fired = self.fired
        if fired:
            _shut(dup)

    def fire(self) -> None:
        with self._lock:
            if self.finished:
                return
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def close(self) -> None:
        with self._lock:
            self.finished = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


class _Watchdog:
    """One daemon thread that fires each watched guard at its deadline, unless it finished.

    Finished guards are dropped lazily, when their deadline comes up; the thread is woken
    only when a new deadline is earlier than every one it knows.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, _Guard]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, guard: _Guard, at: float) -> None:
        with self._cond:
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (at, next(self._order), guard))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="golem-watchdog",
                                                daemon=True)
                self._thread.start()
            elif earliest is None or at < earliest:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                at, _, guard = self._heap[0]
                left = at - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
            guard.fire()


_WATCHDOG = _Watchdog()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass    # already closed by the other side


def _guarded(http_class: Any, guard: _Guard) -> Callable[..., Any]:
    """A factory for `http_class` connections whose sockets `guard` can shut down."""
    def build(host: str, **kwargs: Any) -> Any:
        conn = http_class(host, **kwargs)
        create = conn._create_connection

        def connect(*args: Any, **kw: Any) -> socket.socket:
            sock = create(*args, **kw)
            guard.attach(sock)      # before TLS, so a stalled handshake is covered too
            return sock
        conn._create_connection = connect
        return conn
    return build


class _Guarding:
    def do_open(self, http_class, req, **kwargs):
        guard = getattr(req, "guard", None)
        if guard is not None:
            http_class = _guarded(http_class, guard)
        return super().do_open(http_class, req, **kwargs)


class _HTTPHandler(_Guarding, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_Guarding, urllib.request.HTTPSHandler):
    pass


_OPENER = urllib.request.build_opener(_NoRedirect, _HTTPHandler, _HTTPSHandler)


class TransportFailure(Exception):
    """One failed attempt (a network error, a timeout, a body too big): what to say, and
    whether another try may help.

    `cut` is true when the hard deadline ended the exchange; `connected` when a connection
    to the server was made at all.
    """

    def __init__(self, text: str, status: int | None, retryable: bool,
                 headers: dict[str, str] | None = None, *, cut: bool = False,
                 connected: bool = True):
        super().__init__(text)
        self.text = text
        self.status = status
        self.retryable = retryable
        self.headers = headers or {}
        self.cut = cut
        self.connected = connected


_Failure = TransportFailure
# One HTTP exchange: (url, JSON payload, headers, seconds allowed, byte cap) -> (status,
# lower-cased headers, raw body). `urllib_transport` is the real one; recording.py wraps it.
Transport = Callable[[str, bytes, dict[str, str], float, int], tuple[int, dict[str, str], bytes]]


def urllib_transport(url: str, payload: bytes, headers: dict[str, str], budget: float,
                     max_bytes: int) -> tuple[int, dict[str, str], bytes]:
    """Make one real POST; return (status, lower-cased headers, body) or raise _Failure.

    Nothing about it, from the connection to the last byte of the body, takes longer than
    `budget` seconds (but a DNS lookup that hangs).
    """
    return _exchange("POST", url, payload, headers, budget, max_bytes)


def get(url: str, headers: dict[str, str], budget: float,
        max_bytes: int) -> tuple[int, dict[str, str], bytes]:
    """One GET under the same hard deadline as `urllib_transport` (for the preflight)."""
    return _exchange("GET", url, None, headers, budget, max_bytes)


def _exchange(method: str, url: str, payload: bytes | None, headers: dict[str, str],
              budget: float, max_bytes: int) -> tuple[int, dict[str, str], bytes]:
    stopper = cancel.current()
    if stopper is not None:
        stopper.check()
    guard = _Guard()
    _WATCHDOG.watch(guard, time.monotonic() + max(0.0, budget))
    forget = stopper.on_set(guard.fire) if stopper is not None else None
    try:
        result = _attempt(method, url, payload, headers, budget, max_bytes, guard)
    except _Failure as failure:
        if not guard.fired:
            failure.connected = guard.connected
            raise
        result = None
    finally:
        guard.close()
        if forget is not None:
            forget()
    if guard.fired and stopper is not None:
        stopper.check()     # shut down because another attempt won, not at the deadline
    if guard.fired:     # a body read to the end may still have been cut by the shutdown
        raise _Failure(f"no reply from {where(url)} within {budget:.1f}s", None, True,
                       cut=True, connected=guard.connected)
    return result


def _attempt(method: str, url: str, payload: bytes | None, headers: dict[str, str],
             budget: float, max_bytes: int,
             guard: _Guard) -> tuple[int, dict[str, str], bytes]:
    base = {"Accept-Encoding": "identity"}
    if payload is not None:
        base["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=payload, method=method, headers={**base, **headers})
    req.guard = guard
    started = time.monotonic()
    try:
        try:
            resp = _OPENER.open(req, timeout=max(0.001, budget))
        except urllib.error.HTTPError as err:
            resp = err
        with resp:
            status = resp.status if resp.status is not None else resp.code
            reply_headers = {k.lower(): v for k, v in resp.headers.items()}
            raw = _read(resp, max_bytes, started + budget)
    except _Failure:
        raise
    except ssl.SSLCertVerificationError as err:
        raise _Failure(f"TLS certificate rejected for {where(url)}: {err.verify_message}",
                       None, False) from None
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError,
            ValueError) as err:
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        # a socket timeout is the time allowed running out, as much as the guard firing
        raise _Failure(_network_text(err, url, budget), None, True,
                       cut=isinstance(reason, TimeoutError)) from None
    return status, reply_headers, _decoded(raw, reply_headers, status, max_bytes)


def _decoded(raw: bytes, headers: dict[str, str], status: int, max_bytes: int) -> bytes:
    """The body with any Content-Encoding undone (identity is asked for, but not always
    honoured), still no larger than max_bytes."""
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
    for coding in reversed([c for c in codings if c and c != "identity"]):
        if coding in ("gzip", "x-gzip"):
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":   # zlib-wrapped as the RFC says, or raw as some servers do
            inflater = zlib.decompressobj(zlib.MAX_WBITS if raw[:1] == b"\x78"
                                          else -zlib.MAX_WBITS)
        else:
            raise _Failure(f"the reply is {coding}-compressed, which golem cannot read "
                           "(it asks for identity)", status, False)
        try:
            raw = inflater.decompress(raw, max_bytes + 1)
        except zlib.error as err:
            raise _Failure(f"the reply claims {coding} compression but does not decode: "
                           f"{err}", status, False) from None
        if len(raw) > max_bytes or inflater.unconsumed_tail:
            raise _Failure(f"response larger than {max_bytes} bytes once decompressed",
                           status, False)
    return raw


def _read(resp: Any, max_bytes: int, until: float) -> bytes:
    """Read at most max_bytes; a body that is bigger, or slower than `until`, fails."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read(min(_CHUNK, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise _Failure(f"response larger than {max_bytes} bytes", resp.status, False)
        # Each recv has its own timeout; this bounds a server that trickles bytes.
        if time.monotonic() > until:
            raise TimeoutError("the reply took too long to arrive")


def _network_text(err: BaseException, url: str, budget: float) -> str:
    reason = err.reason if isinstance(err, urllib.error.URLError) else err
    if isinstance(reason, TimeoutError):
        return f"no reply from {where(url)} within {budget:.1f}s"
    if isinstance(reason, ConnectionRefusedError):
        return f"connection refused by {where(url)}"
    if isinstance(reason, (http.client.RemoteDisconnected, ConnectionResetError)):
        return f"connection to {where(url)} closed without a reply"
    detail = str(reason) or type(reason).__name__
    return f"cannot reach {where(url)}: {clip(detail, 200)}"


def where(url: str) -> str:
    # The query string may carry a key on some services; never show it.
    return url.split("?", 1)[0]
