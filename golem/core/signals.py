"""SIGTERM and SIGHUP end a run the way Ctrl-C does.

CI runners stop a job with SIGTERM and a closed terminal sends SIGHUP; left to their default,
either kills Python on the spot: no `run_end` in the trace, no JSON, the scratch directory left
behind, and a running command (in its own session, so the signal never reached it) carrying
on. While `handled()` is active, either signal raises `errors.Interrupted` in the main thread
instead, so the cleanup written for Ctrl-C runs: the command's process group is killed, the
loop ends the trace, the scratch directory is removed. A second signal while that cleanup
runs is ignored, so the cleanup is not cut short by the SIGTERM a CI runner may repeat.

The same handler lets another thread stop the main thread with an exception of its choosing
(`abort_main`): the preflight uses it to stop a baseline that no longer matters.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import subprocess
import threading
from typing import Any, Iterator

from golem.core.errors import Interrupted

__all__ = ["handled", "abort_main", "withdraw", "kill_strays", "SIGNALS"]

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Handler:
    def __init__(self) -> None:
        # re-entrant: the handler runs in the main thread, which may hold the lock already
        self.lock = threading.RLock()
        self.fired = False
        self.abort: BaseException | None = None
        self.pending = 0        # simulated signals sent by abort_main, not yet handled

    def __call__(self, signum: int, frame: Any) -> None:
        if _spawning(frame):
            # an exception now would leave the child started but unknown to its caller, and
            # so never killed: try again in a moment, once Popen has returned
            timer = threading.Timer(0.02, _thread.interrupt_main, (signum,))
            timer.daemon = True
            timer.start()
            return
        with self.lock:
            if signum == signal.SIGTERM and self.pending:
                self.pending -= 1
                abort, self.abort = self.abort, None
                if abort is not None:
                    raise abort
                return          # withdrawn
            if self.fired:
                return
            self.fired = True
        raise Interrupted(signum)


_current: _Handler | None = None


def _spawning(frame: Any) -> bool:
    """True while `frame` is inside subprocess.Popen starting a child."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename == subprocess.__file__ and code.co_name in ("__init__",
                                                                        "_execute_child"):
            return True
        frame = frame.f_back
    return False


def kill_strays() -> None:
    """Kill the process group of every child of golem that leads its own session.

    Commands run in their own sessions and are killed by the code that started them; this is
    the net below it, for a signal that landed in the few statements between a child's start
    and the cleanup that guards it. Linux only (it reads /proc); elsewhere it does nothing.
    """
    me, mine = os.getpid(), os.getpgrp()
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="latin-1") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid, ppid, group = int(name), int(fields[1]), int(fields[2])
        if ppid == me and group == pid and group != mine:
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Interrupted in the main thread while this is active; the
    previous handlers come back afterwards. Outside the main thread it changes nothing."""
    global _current
    if threading.current_thread() is not threading.main_thread() or _current is not None:
        yield
        return
    handler = _Handler()
    saved = {}
    for number in SIGNALS:
        try:
            saved[number] = signal.signal(number, handler)
        except (OSError, ValueError):
            pass
    _current = handler
    try:
        yield
    finally:
        _current = None
        for number, previous in saved.items():
            signal.signal(number, previous)


def abort_main(exc: BaseException) -> bool:
    """Raise `exc` in the main thread at its next chance (from any thread); False when no
    handler is active, and the main thread has to find out by itself."""
    handler = _current
    if handler is None:
        return False
    with handler.lock:
        if handler.abort is not None:
            return True
        handler.abort = exc
        handler.pending += 1
    _thread.interrupt_main(signal.SIGTERM)      # simulated: nothing is sent to the process
    return True


def withdraw() -> None:
    """Cancel an `abort_main` that has not landed yet."""
    handler = _current
    if handler is not None:
        with handler.lock:
            handler.abort = None
