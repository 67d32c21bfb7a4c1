"""Directory trees golem walks and writes without trusting them.

Everything here works from directory descriptors, one component at a time, with
`O_NOFOLLOW`: a symbolic link is reported or recreated as a link, never followed, and a
directory swapped for a link while golem works is refused instead of written through. Walks
are iterative (a tree 10,000 levels deep cannot exhaust Python's stack) and bounded in depth
and entries; removal is iterative too and holds a bounded number of descriptors however deep
the tree is. Copies of large files skip holes, so a sparse file costs what it holds.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from typing import Callable, Iterator

from golem.core.errors import GolemError

MAX_DEPTH = 200             # directory levels below the root a walk follows
MAX_ENTRIES = 1_000_000     # files, links and directories a walk visits
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_FD_DEPTH = 64              # descriptors removal holds before it moves a subtree up
_CHUNK = 1 << 20


class TreeError(GolemError):
    """A tree golem cannot walk or write as asked: too deep, too big, or changed under it."""


@dataclass(frozen=True)
class Item:
    """One entry a walk found: its path relative to the root (with `/`) and its lstat."""

    rel: str
    info: os.stat_result
    dir_fd: int             # the open parent directory, valid only until the walk moves on
    name: str

    @property
    def kind(self) -> str:
        mode = self.info.st_mode
        if stat.S_ISLNK(mode):
            return "link"
        if stat.S_ISDIR(mode):
            return "dir"
        if stat.S_ISREG(mode):
            return "file"
        return "other"


def _scan(fd: int) -> list[tuple[str, os.stat_result]]:
    with os.scandir(fd) as entries:
        found = []
        for entry in entries:
            try:
                found.append((entry.name, entry.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue        # gone between the listing and the stat
    return sorted(found)


def walk(root: str | int, prune: Callable[[str, str], bool] = lambda rel, name: False, *,
         max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> Iterator[Item]:
    """Every entry below `root` (a path, or an open directory descriptor), depth first in
    name order, directories before their contents; links are reported, never followed.

    `prune(rel, name)` true for a directory: it is reported but not entered. TreeError when
    the tree is deeper than `max_depth` or holds more than `max_entries` entries.
    """
    top = os.open(root, _DIR) if isinstance(root, str) else os.dup(root)
    stack: list[tuple[int, str, list, int]] = [(top, "", [], 0)]
    try:
        stack[0] = (top, "", _scan(top), 0)
        seen = 0
        while stack:
            fd, prefix, entries, at = stack[-1]
            if at == len(entries):
                stack.pop()
                os.close(fd)
                continue
            stack[-1] = (fd, prefix, entries, at + 1)
            name, info = entries[at]
            rel = prefix + name
            seen += 1
            if seen > max_entries:
                raise TreeError(f"more than {max_entries:,} entries (at {rel!r})")
            item = Item(rel, info, fd, name)
            yield item
            if item.kind != "dir" or prune(rel, name):
                continue
            if len(stack) >= max_depth:
                raise TreeError(f"deeper than {max_depth} levels (at {rel[:200]!r}...)")
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError, OSError):
                continue        # gone, or swapped for something else: not entered
            try:
                stack.append((child, rel + "/", _scan(child), 0))
            except BaseException:
                os.close(child)
                raise
    finally:
        for fd, *_ in stack:
            os.close(fd)


def open_dir(root: str | int, parts: list[str], create: bool = False) -> int:
    """A descriptor of the real directory root/parts; every component must be a real
    directory, never a link. `create` makes missing ones. FileNotFoundError when one is
    missing (and not created); TreeError when one is a link or not a directory."""
    fd = os.open(root, _DIR) if isinstance(root, str) else os.dup(root)
    try:
        for index, part in enumerate(parts):
            if part in ("", ".", ".."):
                raise TreeError(f"bad path component {part!r}")
            if create and lstat_at(fd, part) is None:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                new = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError:
                where = "/".join(parts[:index + 1])
                raise TreeError(f"{where} is no longer a real directory (a link or a file "
                                "took its place)") from None
            os.close(fd)
            fd = new
        return fd
    except BaseException:
        os.close(fd)
        raise


def split(rel: str) -> tuple[list[str], str]:
    """`a/b/c` -> (["a", "b"], "c"), refusing absolute paths and `..`."""
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise TreeError(f"bad relative path {rel!r}")
    return parts[:-1], parts[-1]


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_file(dir_fd: int, name: str) -> tuple[int, os.stat_result]:
    """A read descriptor of the regular file `name` (never through a link, never blocking on
    a FIFO) and its fstat; OSError for anything else."""
    fd = os.open(name, _READ, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{name} is not a regular file")
        os.set_blocking(fd, True)
        return fd, info
    except BaseException:
        os.close(fd)
        raise


def clone_fd(src: int, dst: int) -> bool:
    """Make the empty file `dst` share `src`'s data where the file system can (a reflink:
    Btrfs, XFS, bcachefs; the data is copied only when one of them is written). False where
    it cannot (ext4, tmpfs, another file system, not Linux): the caller copies."""
    if _FICLONE is None:
        return False
    try:
        _FICLONE(dst, src)
    except OSError:
        return False
    return True


def _ficlone():
    try:
        import fcntl
    except ImportError:
        return None
    if not sys.platform.startswith("linux"):
        return None
    request = getattr(fcntl, "FICLONE", 0x40049409)       # _IOW(0x94, 9, int)
    return lambda dst, src: fcntl.ioctl(dst, request, src)


_FICLONE = _ficlone()


def copy_fd(src: int, dst: int, size: int) -> None:
    """Copy `size` bytes from `src` to `dst`, skipping holes (the copy stays sparse); a
    reflink where the file system has them and `src` holds exactly `size` bytes."""
    if size and os.fstat(src).st_size == size and clone_fd(src, dst):
        return
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
            end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break                   # only a hole is left
            start, end = offset, size   # no SEEK_DATA here: copy every byte
        while start < end:
            chunk = os.pread(src, min(end - start, _CHUNK), start)
            if not chunk:
                end = start
                break
            os.pwrite(dst, chunk, start)
            start += len(chunk)
        if end <= offset:
            break
        offset = end
    os.ftruncate(dst, size)


def read_limited(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove `name` in `dir_fd`, whatever it is; a directory with everything below it.

    Iterative and bounded in descriptors: a directory more than `_FD_DEPTH` levels down is
    renamed up into `dir_fd` and removed from there, so depth costs time, never the stack.
    """
    info = lstat_at(dir_fd, name)
    if info is None:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    pending = [name]
    while pending:
        _remove_dir(dir_fd, pending.pop(), pending)


def _remove_dir(base: int, top: str, pending: list[str]) -> None:
    try:
        chain = [(_open_for_removal(base, top), top)]
    except FileNotFoundError:
        return
    try:
        while chain:
            fd = chain[-1][0]
            with os.scandir(fd) as entries:
                names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            sub = None
            for entry_name, is_dir in names:
                if is_dir:
                    sub = sub or entry_name
                    continue
                _unlink(fd, entry_name)
            if sub is None:             # empty now: remove it from its parent
                fd, own = chain.pop()
                os.close(fd)
                os.rmdir(own, dir_fd=chain[-1][0] if chain else base)
            elif len(chain) >= _FD_DEPTH:
                parked = f".golem-rm-{secrets.token_hex(8)}"
                os.rename(sub, parked, src_dir_fd=fd, dst_dir_fd=base)
                pending.append(parked)
            else:
                chain.append((_open_for_removal(fd, sub), sub))
    finally:
        for fd, _ in chain:
            os.close(fd)


def _open_for_removal(parent: int, name: str) -> int:
    """A descriptor of the directory `name`, made readable and writable first if a command
    took those rights away (the owner may always give them back)."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)
        fd = os.open(name, _DIR, dir_fd=parent)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) & stat.S_IRWXU != stat.S_IRWXU:
            os.fchmod(fd, stat.S_IRWXU)
    except OSError:
        pass
    return fd


def _unlink(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def remove_tree(path: str) -> None:
    """Remove `path` and everything below it, never following a link; no error if absent."""
    parent, name = os.path.split(os.path.abspath(path))
    try:
        fd = os.open(parent, _DIR)
    except FileNotFoundError:
        return
    try:
        remove_at(fd, name)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


class Writer:
    """Writes below one real directory, never through a link.

    Every path is walked from a descriptor of the root with `O_NOFOLLOW`; a component that
    is no longer a real directory is refused (TreeError), so a tree changed under golem can
    make it fail, never write elsewhere. Files are written to a fresh temporary name
    (`O_EXCL`) and renamed into place.
    """

    def __init__(self, root: str):
        self.root = root
        self.fd = os.open(root, _DIR)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def parent(self, rel: str, create: bool = False) -> tuple[int, str]:
        """(descriptor of rel's directory, final name); the caller closes the descriptor."""
        parts, name = split(rel)
        return open_dir(self.fd, parts, create), name

    def lstat(self, rel: str) -> os.stat_result | None:
        try:
            fd, name = self.parent(rel)
        except (FileNotFoundError, TreeError):
            return None
        try:
            return lstat_at(fd, name)
        finally:
            os.close(fd)

    def write(self, rel: str, data: bytes | None = None, mode: int = 0o644, *,
              source: int | None = None, size: int = 0, clone: int | None = None) -> None:
        """Create or replace the file `rel` with `data` (or `size` bytes of descriptor
        `source`, holes kept); whatever was at `rel` (a link, a directory) is replaced.
        `clone`: a descriptor of a file holding exactly `data`, shared where the file
        system can (clone_fd) instead of written."""
        fd, name = self.parent(rel, create=True)
        tmp = f".{name[:100]}.golem-{secrets.token_hex(6)}"
        out = -1
        try:
            out = os.open(tmp, _CREATE, 0o600, dir_fd=fd)
            if source is not None:
                copy_fd(source, out, size)
            elif clone is not None and data and clone_fd(clone, out):
                pass
            else:
                view = memoryview(data or b"")
                while view:
                    view = view[os.write(out, view):]
            os.fchmod(out, stat.S_IMODE(mode))
            closing, out = out, -1      # never closed twice (see write_output)
            os.close(closing)
            old = lstat_at(fd, name)
            if old is not None and stat.S_ISDIR(old.st_mode):
                remove_at(fd, name)
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            if out >= 0:
                os.close(out)
            try:
                os.unlink(tmp, dir_fd=fd)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)

    def symlink(self, rel: str, target: str) -> None:
        """Make `rel` a symbolic link to `target` (replacing what was there)."""
        fd, name = self.parent(rel, create=True)
        try:
            if lstat_at(fd, name) is not None:
                remove_at(fd, name)
            os.symlink(target, name, dir_fd=fd)
        finally:
            os.close(fd)

    def mkdir(self, rel: str) -> None:
        fd, name = self.parent(rel, create=True)
        try:
            info = lstat_at(fd, name)
            if info is not None and not stat.S_ISDIR(info.st_mode):
                remove_at(fd, name)
                info = None
            if info is None:
                os.mkdir(name, 0o777, dir_fd=fd)
        finally:
            os.close(fd)

    def remove(self, rel: str) -> None:
        """Remove `rel` (a directory with all below it); nothing if it is already gone."""
        try:
            fd, name = self.parent(rel)
        except FileNotFoundError:
            return
        try:
            remove_at(fd, name)
        finally:
            os.close(fd)

    def rmdir_if_empty(self, rel: str) -> bool:
        try:
            fd, name = self.parent(rel)
        except (FileNotFoundError, TreeError):
            return False
        try:
            os.rmdir(name, dir_fd=fd)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)


def read_file(root: str | int, rel: str, limit: int) -> tuple[bytes, os.stat_result] | None:
    """Up to `limit` bytes of the regular file root/rel (no link followed anywhere on the
    way) and its fstat; None when it is missing or not a regular file."""
    try:
        parts, name = split(rel)
        dir_fd = open_dir(root, parts)
    except (OSError, TreeError):
        return None
    try:
        fd, info = open_file(dir_fd, name)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        return read_limited(fd, limit), info
    finally:
        os.close(fd)


def write_output(path: str, text: str) -> None:
    """Write one of golem's own output files (a patch, a result) atomically: a fresh
    temporary file beside it (`O_EXCL`, `O_NOFOLLOW`), renamed over it. A link at the
    final name is replaced, never written through."""
    directory, name = os.path.split(os.path.abspath(path))
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    tmp = f".{name[:100]}.golem-{secrets.token_hex(6)}"
    out = -1
    try:
        out = os.open(tmp, _CREATE, 0o644, dir_fd=fd)
        view = memoryview(text.encode("utf-8", errors="surrogateescape"))
        while view:
            view = view[os.write(out, view):]
        os.fsync(out)
        # forgotten before it is closed: an exception raised by a signal handler just after
        # the close must not make the cleanup close it (or a descriptor reusing it) again
        closing, out = out, -1
        os.close(closing)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        if out >= 0:
            os.close(out)
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)


def open_append(path: str):
    """A text stream appending to `path`, refusing a symbolic link at the final name."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    return os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")
