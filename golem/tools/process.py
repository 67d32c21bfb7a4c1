"""Running the programs the model asks for: no shell, bounded time, bounded output.

Each command runs in its own session so a timeout can kill the whole process group, not just
the direct child; the pipe is drained with a deadline so a grandchild that keeps it open can
never hang golem; only the head and tail of the output are kept, so `yes` cannot exhaust
memory.
"""

from __future__ import annotations

import os
import select
import selectors
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from golem.core import cancel
from golem.core.errors import ToolError

__all__ = ["Completed", "run", "command_env", "resolve_program", "ENV_ALLOWLIST",
           "become_subreaper", "reap_strays"]

ENV_ALLOWLIST = (
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "PYENV_ROOT", "PYENV_VERSION",
    "VIRTUAL_ENV", "CONDA_PREFIX", "GOPATH", "GOROOT", "GOCACHE", "CARGO_HOME", "RUSTUP_HOME",
    "JAVA_HOME", "NODE_PATH",
)
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL",
                "PRIVATE", "CERT")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

TERM_GRACE = 0.5      # seconds between SIGTERM and SIGKILL
EXIT_GRACE = 0.3      # seconds to keep reading after the child exits, before killing leftovers
DRAIN_LIMIT = 1.0     # seconds to read what is left once the group has been killed
_POLL = 0.05


@dataclass
class Completed:
    """The outcome of one command.

    `exit_code` is None when the program could not be started, negative when a signal ended
    it; `output` is stdout and stderr interleaved, with the middle cut out when `truncated`.
    `lines` counts the whole output's lines; `omitted_lines` the line breaks in the cut.
    """

    argv: list[str]
    exit_code: int | None
    output: str
    timed_out: bool
    elapsed: float
    truncated: bool
    lines: int = 0
    omitted_lines: int = 0
    omitted_bytes: int = 0
    evidence: bytes = b""
    evidence_truncated: bool = False


class _Capture:
    """Keeps the first `head_cap` and the last `tail_cap` bytes of a stream."""

    def __init__(self, cap: int):
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.newlines = 0
        self.last = b"\n"
        self.omitted_lines = self.omitted_bytes = 0

    @property
    def lines(self) -> int:
        return self.newlines + (self.last != b"\n")

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.newlines += chunk.count(b"\n")
        self.last = chunk[-1:] or self.last
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            # Trimming only when twice over keeps appends amortised O(1).
            if len(self.tail) > 2 * self.tail_cap + 65536:
                del self.tail[:len(self.tail) - self.tail_cap]

    def text(self) -> tuple[str, bool]:
        tail = bytes(self.tail[-self.tail_cap:]) if self.tail_cap else b""
        head = bytes(self.head)
        omitted = self.total - len(head) - len(tail)
        if omitted <= 0:
            return (head + tail).decode("utf-8", errors="replace"), False
        head = _cut_head(head)
        tail = _cut_tail(tail)
        omitted = self.total - len(head) - len(tail)
        self.omitted_bytes = omitted
        self.omitted_lines = self.newlines - head.count(b"\n") - tail.count(b"\n")
        marker = f"\n[... {omitted} bytes omitted ...]\n"
        return (head.decode("utf-8", errors="replace") + marker
                + tail.decode("utf-8", errors="replace")), True


class _Whole:
    """Keeps a stream whole up to `cap` bytes, and counts what it did not keep."""

    def __init__(self, cap: int, sink: Callable[[bytes], bool | None] | None = None):
        self.cap = cap
        self.data = bytearray()
        self.total = 0
        self.sink = sink
        self.stop = False       # the sink asked for the run to end

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            kept = chunk[:room]
            self.data += kept
            if self.sink is not None and self.sink(kept):
                self.stop = True


def _cut_head(data: bytes) -> bytes:
    """`data` without a UTF-8 sequence left incomplete at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue                      # continuation byte: keep looking for the lead
        if byte < 0x80:
            return data
        need = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if byte < 0xF0 else 4
        return data if back >= need else data[:-back]
    return data


def _cut_tail(data: bytes) -> bytes:
    """`data` without continuation bytes whose lead byte was cut away."""
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class _Popen(subprocess.Popen):
    """Popen that does not leave a child running when it is interrupted while starting it.

    Ctrl-C can arrive after the fork, while Popen waits for the exec; Popen then lets the
    exception go with the child still running and no object to reach it by. Here the child's
    session (its own, so its pid is the group id) is killed and the child reaped first.
    """

    def __init__(self, *args, **kwargs):
        try:
            super().__init__(*args, **kwargs)
        except BaseException:
            pid = getattr(self, "pid", None)
            if pid and self.returncode is None:      # started, and not reaped yet
                _killpg(pid, signal.SIGKILL)
                self.wait()
            raise


_SMALL, _GATHER = 4096, 0.01


def _read_until(sel: selectors.BaseSelector, captures: dict[int, _Capture], until: float,
                proc: subprocess.Popen | None = None, exited: int = -1) -> bool:
    """Read into `captures` (fd -> capture) until every fd is at EOF (True), `until` passes,
    or `proc` exits (False). A descriptor at EOF is unregistered. `exited`, a pidfd of
    `proc`, ends a pause early when the process exits."""
    while True:
        if not sel.get_map():
            return True
        left = until - time.monotonic()
        if left <= 0:
            return False
        if proc is not None and proc.poll() is not None:
            return False
        small = False
        for key, _events in sel.select(min(left, _POLL)):
            try:
                chunk = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                sel.unregister(key.fd)
                continue
            captures[key.fd].add(chunk)
            if proc is not None and getattr(captures[key.fd], "stop", False):
                _killpg(proc.pid, signal.SIGKILL)     # the records say: no need to go on
            small = small or len(chunk) < _SMALL
        if small:
            # a trickle (a record or a dot per test): let it gather rather than wake for
            # every write, unless the process ends; a full pipe is read at once
            if exited >= 0:
                select.select([exited], [], [], _GATHER)
            else:
                time.sleep(_GATHER)


def _pidfd(pid: int) -> int:
    """A descriptor that becomes readable when `pid` exits (Linux 5.3 and later), without
    reaping it; -1 where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1


def run(argv: list[str], *, cwd: str, env: dict[str, str], timeout: float, cap: int = 32_000,
        wrap: Callable[[list[str]], list[str]] | None = None,
        evidence: int = 0, seal: bytes = b"",
        records: Callable[[bytes], bool | None] | None = None) -> Completed:
    """Run `argv` without a shell and return what happened; never raises for a bad program.

    stdin is /dev/null; stdout and stderr share one pipe. On timeout the whole process group
    gets SIGTERM, then SIGKILL, and the output so far is kept. `wrap` rewrites the argv just
    before spawning (an OS sandbox wrapper). With `evidence` (a byte cap), the command also
    gets a second pipe, named in its environment as GOLEM_EVIDENCE_FD, and what it writes
    there comes back whole (up to the cap) in `Completed.evidence`, and is handed to `records`
    piece by piece as it arrives (what the cap keeps of it); `records` answering True ends
    the run's process group at once. With `seal` (a key, up to
    a pipe's buffer), a third pipe holding it is named as GOLEM_SEAL_FD.
    """
    argv = list(argv)
    spawn = wrap(list(argv)) if wrap is not None else argv
    capture = _Capture(cap)
    record_capture = _Whole(evidence, records) if evidence else None
    timed_out = False
    start = time.monotonic()
    records_fd = -1
    pass_fds: tuple[int, ...] = ()
    if evidence:
        records_fd, write_end = os.pipe()
        env = {**env, "GOLEM_EVIDENCE_FD": str(write_end)}
        pass_fds = (write_end,)
    if seal:
        key_read, key_write = os.pipe()
        try:
            os.write(key_write, seal)
        finally:
            os.close(key_write)
        env = {**env, "GOLEM_SEAL_FD": str(key_read)}
        pass_fds += (key_read,)
    try:
        with _SPAWN:    # registered before any reap_strays can look: it is no stray
            proc = _Popen(spawn, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True, close_fds=True, pass_fds=pass_fds)
            with _LOCK:
                _LEADERS.add(proc.pid)
    except BaseException as exc:
        if records_fd >= 0:
            os.close(records_fd)
        if not isinstance(exc, (OSError, ValueError)):
            raise
        reason = getattr(exc, "strerror", None) or str(exc)
        name = argv[0] if argv else ""
        return Completed(argv, None, f"cannot start {name!r}: {reason}", False,
                         time.monotonic() - start, False)
    finally:
        for fd in pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
    stopper = cancel.current()
    forget = stopper.on_set(lambda: _killpg(proc.pid, signal.SIGKILL)) if stopper else None
    exited = _pidfd(proc.pid)
    try:
        # everything after the spawn is in here: the finally ends the group whatever is raised
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        captures = {fd: capture}
        os.set_blocking(fd, False)
        if record_capture is not None:
            os.set_blocking(records_fd, False)
            captures[records_fd] = record_capture
        with selectors.DefaultSelector() as sel:
            for each in captures:
                sel.register(each, selectors.EVENT_READ)
            deadline = start + timeout
            eof = _read_until(sel, captures, deadline, proc, exited)
            if not eof and proc.poll() is not None:
                # The child is gone; its output may still be in flight, or a grandchild may
                # hold the pipe open forever. Read a little longer, then stop waiting for it.
                eof = _read_until(sel, captures, min(deadline, time.monotonic() + EXIT_GRACE),
                                  exited=exited)
            if proc.poll() is None:
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
            if timed_out:
                _killpg(proc.pid, signal.SIGTERM)
                grace_end = time.monotonic() + TERM_GRACE
                if not eof:
                    eof = _read_until(sel, captures, grace_end, proc, exited)
                try:
                    proc.wait(max(0.0, grace_end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
            # Whatever is left of the group (stragglers, background grandchildren) goes too.
            _killpg(proc.pid, signal.SIGKILL)
            if not eof:
                _read_until(sel, captures, time.monotonic() + DRAIN_LIMIT, exited=exited)
    finally:
        proc.stdout.close()
        if records_fd >= 0:
            os.close(records_fd)
        if exited >= 0:
            os.close(exited)
        # On Ctrl-C the group, in its own session, got no SIGINT: end all of it. The leader
        # is not reaped yet, so its pid (the group id) cannot have been reused.
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if forget is not None:
            forget()
        with _LOCK:
            _LEADERS.discard(proc.pid)
        reap_strays()
    if stopper is not None:
        stopper.check()     # killed because another attempt won: not a result
    output, truncated = capture.text()
    done = Completed(argv, proc.returncode, output, timed_out, time.monotonic() - start,
                     truncated, capture.lines, capture.omitted_lines, capture.omitted_bytes)
    if record_capture is not None:
        done.evidence = bytes(record_capture.data)
        done.evidence_truncated = record_capture.total > len(record_capture.data)
    return done


# Process groups of the commands running now; a process re-parented to golem in any other
# group (it left its command's group with setsid or setpgid) is a stray.
_LEADERS: set[int] = set()
_LOCK = threading.Lock()
# held from a command's spawn until its group is registered, and by reap_strays: a command
# another thread is starting is never taken for a stray
_SPAWN = threading.Lock()
_SUBREAPER = [False]


def become_subreaper() -> bool:
    """Make golem the parent of every orphaned descendant (Linux `PR_SET_CHILD_SUBREAPER`),
    so a process that escapes its command's group comes back to golem, which ends it. True
    when that took effect."""
    if _SUBREAPER[0]:
        return True
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        _SUBREAPER[0] = libc.prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        _SUBREAPER[0] = False
    return _SUBREAPER[0]


def _children() -> list[tuple[int, int]]:
    """(pid, process group) of golem's own child processes."""
    me, found = os.getpid(), []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and int(fields[1]) == me:
            found.append((int(name), int(fields[2])))
    return found


def reap_strays(rounds: int = 50) -> int:
    """End every process that left a finished command's group and came back to golem (see
    `become_subreaper`), and whatever it started; returns how many were ended."""
    if not _SUBREAPER[0]:
        return 0
    with _SPAWN:
        return _reap(rounds)


def _reap(rounds: int) -> int:
    own_group, ended = os.getpgrp(), 0
    for _ in range(rounds):
        with _LOCK:
            live = set(_LEADERS)
        strays = [(pid, group) for pid, group in _children()
                  if group != own_group and group not in live and pid not in live]
        if not strays:
            return ended
        for pid, group in strays:
            _killpg(group, signal.SIGKILL)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid, _ in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            ended += 1
    return ended


def command_env(home: str, tmpdir: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for model-requested commands: an allowlist, with secrets removed.

    Any variable whose name looks like a credential is dropped, even one given in `extra`.
    """
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(HOME=home, TMPDIR=tmpdir, PYTHONDONTWRITEBYTECODE="1")
    env.update(extra or {})
    return {name: value for name, value in env.items()
            if not any(word in name.upper() for word in SECRET_WORDS)}


def resolve_program(name: str, allowed: Iterable[str], path: str) -> str:
    """The absolute path of an allowed program found on `path`, else ToolError."""
    allowed = sorted(set(allowed))
    if not isinstance(name, str) or not name or "/" in name or "\0" in name:
        raise ToolError(f"{name!r} is not a bare program name; give just the name, like "
                        f"{allowed[0] if allowed else 'pytest'!r}, not a path")
    if name not in allowed:
        raise ToolError(f"{name!r} is not an allowed program; allowed: "
                        + (", ".join(allowed) or "none"))
    found = shutil.which(name, path=path)
    if found is None:
        raise ToolError(f"{name!r} is allowed but not installed on PATH")
    return os.path.abspath(found)
