"""Stopping one attempt among several, from another thread, wherever it is.

Each attempt runs in a thread of its own inside `scope(cancel)`. Setting its `Cancel` ends
what that thread is waiting on: a model call in flight (its sockets are shut down), a retry
wait, a command (its process group is killed); the next check raises `Cancelled`, which the
agent loop turns into the stop `cancelled`. Outside any scope nothing here has an effect.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

from golem.core.errors import Cancelled

_LOCAL = threading.local()


class Cancel:
    """A flag another thread sets, and the actions to run when it is set."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._hooks: dict[int, Callable[[], None]] = {}
        self._next = 0

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        with self._lock:
            self._event.set()
            hooks = list(self._hooks.values())
        for hook in hooks:
            hook()

    def on_set(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run `hook` when the flag is set (now, if it already is); returns the undo."""
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._hooks[key] = hook
            already = self._event.is_set()
        if already:
            hook()
        return lambda: self._hooks.pop(key, None)

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled("cancelled: another attempt finished first")

    def wait(self, seconds: float) -> None:
        """Sleep `seconds`, or raise Cancelled as soon as the flag is set."""
        if self._event.wait(seconds):
            self.check()


def current() -> Cancel | None:
    """The Cancel of the attempt this thread runs, if any."""
    return getattr(_LOCAL, "cancel", None)


@contextlib.contextmanager
def scope(cancel: Cancel) -> Iterator[Cancel]:
    """Run the body as an attempt that `cancel` can stop."""
    previous = current()
    _LOCAL.cancel = cancel
    try:
        yield cancel
    finally:
        _LOCAL.cancel = previous


def check() -> None:
    cancel = current()
    if cancel is not None:
        cancel.check()


def sleep(seconds: float) -> None:
    """time.sleep that a Cancel can cut short."""
    cancel = current()
    if cancel is None:
        time.sleep(seconds)
    else:
        cancel.wait(seconds)


def cancelled() -> bool:
    cancel = current()
    return cancel is not None and cancel.is_set()
