"""What golem placed in a tree before a graded run, and whether the run left it so.

A graded run (the baseline, the verification, the new-tests pass, each -repeat) may write
new files in the tree it runs in (caches, output files), but it must not change the files
golem put there: code that rewrites a later test module, or the code under test, during the
run and puts it back afterwards would make evidence of a suite that was never on disk when
golem looked. So before each run golem records every file, link and directory of the tree
(`start`), and after the run, once every process of it is gone, looks again (`Watch.finish`):

- a file or link: its inode, size, permission bits, modification and change times. The
  change time moves with every write, rename, link or attribute change, and nobody but the
  kernel sets it, so a file rewritten and put back byte for byte, or moved away and back,
  is seen; a file replaced by another is a different inode.
- a directory: its inode, and (Linux, inotify) whether it was moved or removed during the
  run, which its files' times would not show. Its times are not compared: a new entry
  changes them, and new entries are allowed.

The answer is the paths that changed, vanished or were replaced. Cost: one stat per entry
before and after, one watch per directory; nothing is read or hashed.
"""

from __future__ import annotations

import os
import stat
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from golem.tools import tree
from golem.workflow.verifier.snapshot import CACHE_DIRS, VCS_NAMES

# inotify(7): events golem asks for on every directory, and the ones the kernel adds
_MOVE_SELF, _DELETE_SELF = 0x800, 0x400
_Q_OVERFLOW, _IGNORED = 0x4000, 0x8000
_ONLYDIR, _DONT_FOLLOW = 0x01000000, 0x02000000
_EVENT = struct.Struct("iIII")
_LIBC: list = []


def _libc():
    if not _LIBC:
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.inotify_init1, libc.inotify_add_watch     # present on Linux only
            _LIBC.append(libc)
        except (OSError, AttributeError, ImportError):
            _LIBC.append(None)
    return _LIBC[0]


class _Moves:
    """Directories moved or removed while watched (inotify). `ok` is False where golem
    cannot watch at all (not Linux, or no inotify instance left: nothing the run controls),
    `short` where it ran out of watches part of the way (a tree with that many directories
    is something the run could have made)."""

    def __init__(self):
        self.fd, self.names, self.ok, self.short = -1, {}, False, None
        libc = _libc()
        if libc is None:
            return
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd >= 0:
            self.fd, self.ok, self._libc = fd, True, libc

    def add(self, path: str, rel: str) -> None:
        if not self.ok:
            return
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path),
                                          _MOVE_SELF | _DELETE_SELF | _ONLYDIR | _DONT_FOLLOW)
        if wd < 0:
            if self.short is None:
                self.short = f"{rel}: {os.strerror(_errno())}"
            return
        self.names[wd] = rel

    def events(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        if self.fd < 0:
            return found
        try:
            while True:
                try:
                    data = os.read(self.fd, 65536)
                except BlockingIOError:
                    break
                if not data:
                    break
                at = 0
                while at + _EVENT.size <= len(data):
                    wd, mask, _, length = _EVENT.unpack_from(data, at)
                    at += _EVENT.size + length
                    if mask & _Q_OVERFLOW:
                        found.append((".", "too many events to follow"))
                    elif mask & (_MOVE_SELF | _DELETE_SELF):
                        what = "moved" if mask & _MOVE_SELF else "removed"
                        found.append((self.names.get(wd, "?"), f"directory {what}"))
        finally:
            _close_later(self.fd)
            self.fd = -1
        return found


def _close_later(fd: int) -> None:
    """Close an inotify descriptor on a thread of its own: the kernel takes its watches down
    on close and waits for its readers to be done (10 ms and more here), which the verdict
    need not wait for; the events were read before."""
    threading.Thread(target=os.close, args=(fd,), name="golem-inotify-close",
                     daemon=True).start()


def _errno() -> int:
    import ctypes
    return ctypes.get_errno()


def _signature(info: os.stat_result) -> tuple:
    if stat.S_ISDIR(info.st_mode):
        return ("dir", info.st_dev, info.st_ino)
    return ("link" if stat.S_ISLNK(info.st_mode) else "file", info.st_dev, info.st_ino,
            info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass
class Watch:
    """A tree as golem placed it, before a run: rel path -> signature."""

    roots: dict[str, str]                       # rel prefix ("" for the tree) -> real path
    state: dict[str, tuple] = field(default_factory=dict)
    moves: _Moves | None = None
    prune: Callable[[str, str], bool] = lambda rel, name: False

    def _full(self, rel: str) -> str:
        for prefix, path in self.roots.items():
            if prefix and (rel == prefix or rel.startswith(prefix + "/")):
                return os.path.join(path, rel[len(prefix) + 1:]) if rel != prefix else path
        return os.path.join(self.roots[""], rel)

    def close(self) -> None:
        if self.moves is not None and self.moves.fd >= 0:
            _close_later(self.moves.fd)
            self.moves.fd = -1

    def finish(self, added: bool = False) -> list[tuple[str, str]]:
        """(path, what happened to it) for every entry the run changed, removed or
        replaced, and with `added` every one it made, sorted; call once every process of
        the run is gone."""
        found = dict(self.moves.events() if self.moves else [])
        if added:
            try:
                for prefix, path in self.roots.items():
                    skip = self.prune if not prefix else _in_tree
                    for item in tree.walk(path, skip):
                        rel = f"{prefix}/{item.rel}" if prefix else item.rel
                        if rel not in self.state:
                            found[rel] = "added"
            except (OSError, tree.TreeError):
                found["."] = "cannot be walked"
        for rel, before in self.state.items():
            try:
                info = os.lstat(self._full(rel))
            except OSError:
                found.setdefault(rel, "removed")
                continue
            now = _signature(info)
            if now == before:
                continue
            if now[:3] != before[:3]:
                found.setdefault(rel, "replaced")
            else:
                found.setdefault(rel, "changed")
        return sorted(found.items())

    @property
    def watched(self) -> bool:
        """Directory moves were watched (else only their files' signatures tell)."""
        return bool(self.moves and self.moves.ok)

    @property
    def short(self) -> str | None:
        """Why some directories could not be watched, when golem ran out of watches."""
        return self.moves.short if self.moves and self.moves.ok else None


def _in_tree(rel: str, name: str) -> bool:
    return name == "__pycache__"       # bytecode is never read from a dependency tree's


def pruned(deps) -> Callable[[str, str], bool]:
    """Not entered: version control and caches anywhere, dependency trees `deps` at the
    top (recorded, if at all, as roots of their own)."""
    deps = frozenset(deps)
    return lambda rel, name: name in VCS_NAMES or name in CACHE_DIRS or (
        "/" not in rel and name in deps)


def start(root: str, prune: Callable[[str, str], bool] = lambda rel, name: False,
          extra: dict[str, str] | None = None, clock: str | None = None) -> Watch:
    """Record the tree at `root` (directories `prune` says are not entered), and the real
    directories `extra` (rel prefix -> path) as if they were in it. `clock` is a directory
    golem may write: before returning, golem waits (a few ms at most) until a file written
    now gets a later change time than any recorded, so a write in the same clock tick as
    the copy was made cannot pass for no write."""
    watch = Watch({"": root, **(extra or {})}, moves=_Moves(), prune=prune)
    try:
        _record(watch, prune, clock)
    except BaseException:
        watch.close()
        raise
    return watch


def _record(watch: Watch, prune: Callable[[str, str], bool], clock: str | None) -> None:
    newest = 0
    for prefix, path in watch.roots.items():
        skip = prune if not prefix else _in_tree
        top = os.lstat(path)
        if prefix and not stat.S_ISDIR(top.st_mode):
            continue            # only a real directory is ever linked in
        if prefix:
            watch.state[prefix] = _signature(top)
        watch.moves.add(path, prefix or ".")
        for item in tree.walk(path, skip):
            if item.kind == "dir" and skip(item.rel, item.name):
                continue
            rel = f"{prefix}/{item.rel}" if prefix else item.rel
            sig = _signature(item.info)
            watch.state[rel] = sig
            if sig[0] == "dir":
                watch.moves.add(os.path.join(path, item.rel), rel)
            else:
                newest = max(newest, item.info.st_ctime_ns)
    if clock is not None:
        _past(newest, clock)


def _past(newest: int, where: str) -> None:
    marker = os.path.join(where, ".golem-clock")
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        for _ in range(1000):
            os.write(fd, b".")
            if os.fstat(fd).st_ctime_ns > newest:
                return
            time.sleep(0.001)
    finally:
        os.close(fd)
        os.unlink(marker)
