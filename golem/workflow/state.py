"""The state directory golem keeps outside every workspace, and who holds what in it: where it
is, each run's lock (held while the run goes), and whose bytecode cache is whose. Run
directories (golem/workflow/runs.py) and their pruning (golem/workflow/retention.py) both
read these."""

from __future__ import annotations

import fcntl
import json
import os
import threading


def state_dir() -> str:
    base = os.environ.get("GOLEM_STATE_DIR")
    if not base:
        xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                               ".local", "state")
        base = os.path.join(xdg, "golem")
    return base


OWNER = ".owner"     # beside the cache, as its ".state" is


def cache_owner(path: str) -> tuple[str, float] | None:
    """(workspace, last use) of the bytecode cache at `path`; None when it does not say."""
    try:
        with open(path + OWNER, encoding="utf-8", opener=_no_follow) as handle:
            owner = json.load(handle)
        return str(owner["workspace"]), float(owner["used"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


# run id -> descriptor of its `lock`, held (flock) by the process doing the run until the
# command ends: a run whose lock nobody holds has ended, however it ended (a kill included)
_HELD: dict[str, int] = {}
_HELD_LOCK = threading.Lock()
LOCK = "lock"


def _hold(path: str) -> None:
    fd = os.open(os.path.join(path, LOCK), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                 | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with _HELD_LOCK:
        _HELD[os.path.basename(path)] = fd


def release_all() -> None:
    """Let go of the runs this process holds (at the end of a command): from then on they
    show as ended, and undo and pruning may touch them."""
    with _HELD_LOCK:
        held = list(_HELD.values())
        _HELD.clear()
    for fd in held:
        os.close(fd)


def running(path: str) -> bool | None:
    """Whether some process still does the run in `path` (True), none does (False), or the
    run predates the lock and only its age can tell (None)."""
    try:
        fd = os.open(os.path.join(path, LOCK), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError:
        return True         # not a lock golem made: never take it for a finished run
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
