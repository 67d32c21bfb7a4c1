"""The workspace: the one directory tree the model's file tools may touch.

Paths come from an untrusted model, so every operation walks the path one component at a
time from a directory fd of the root (like Go's `os.Root`): each step is an `openat` with
`O_NOFOLLOW`, symbolic links are read and spliced in by hand, and `..` re-walks from the root
instead of trusting the kernel's `..`. The file finally opened is opened relative to the fd of
its parent from that same walk, so renaming a directory or swapping it for a link while golem
works can never make it read or write a file outside the root.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import secrets
import stat
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from golem.core.errors import ToolError, UsageError
from golem.tools import tree

__all__ = ["DEFAULT_SKIP", "Workspace"]

DEFAULT_SKIP = frozenset({
    ".git", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", "dist", "build", ".eggs", "*.egg-info",
})

MAX_LINKS = 8

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_RELATIVE_HINT = "use a path relative to the workspace root"


@dataclass
class _Target:
    """Where a walk ended: an open fd of the deepest existing directory and what lies below.

    `missing` are directory names below `fd` that do not exist yet; `name` is the final
    component inside the directory they lead to, or None when the path names that directory.
    """

    fd: int
    parts: list[str]
    missing: list[str] = field(default_factory=list)
    name: str | None = None

    @property
    def relpath(self) -> str:
        tail = [self.name] if self.name is not None else []
        return "/".join(self.parts + self.missing + tail) or "."


def _split(path: str) -> tuple[list[str], bool]:
    """The components of an untrusted path and whether it ends with a slash."""
    if not isinstance(path, str) or path == "":
        raise ToolError(f"path is empty; {_RELATIVE_HINT} (\".\" is the root)")
    if "\0" in path:
        raise ToolError(f"path {path!r} contains a NUL byte; {_RELATIVE_HINT}")
    if path.startswith("/"):
        raise ToolError(f"path {path!r} is absolute; {_RELATIVE_HINT}")
    trailing = path.endswith("/") or path.endswith("/.")
    return [p for p in path.split("/") if p not in ("", ".")], trailing


def _changed(path: str) -> ToolError:
    return ToolError(f"path {path!r} changed while golem was using it; try again")


def _refuse_git(relpath: str) -> None:
    if relpath.split("/", 1)[0] == ".git":
        raise ToolError(f"{relpath!r} is git's internal state; golem never writes inside .git, "
                        "edit the working tree instead")


def _read_up_to(fd: int, chunks: list[bytes], left: int) -> bytes:
    """`chunks` joined with up to `left` more bytes read from `fd`."""
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Workspace:
    """Confined file access below one root directory."""

    def __init__(self, root: str, on_change: Callable[[str], None] | None = None):
        if not os.path.isdir(root):
            raise UsageError(f"workspace directory not found: {root}")
        self.root = os.path.realpath(root)
        self.on_change = on_change

    # -- the walk ---------------------------------------------------------------------------

    def _open_root(self) -> int:
        return os.open(self.root, _DIR_FLAGS)

    def _open_parts(self, parts: list[str], path: str) -> int:
        """An fd of the real directory root/parts, refusing any component that is a link."""
        fd = self._open_root()
        try:
            for part in parts:
                new = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = new
        except OSError:
            os.close(fd)
            raise _changed(path) from None
        return fd

    def _walk(self, path: str, *, follow_final: bool) -> _Target:
        """Resolve `path` inside the root; the caller must close the returned target's fd."""
        pending, trailing = _split(path)
        follow_final = follow_final or trailing
        fd = self._open_root()
        parts: list[str] = []       # real directories from the root to fd
        missing: list[str] = []     # directories below fd that do not exist
        links = 0
        try:
            while pending:
                name = pending.pop(0)
                last = not pending
                if name == "..":
                    if missing:
                        missing.pop()
                    elif not parts:
                        raise ToolError(f"path {path!r} is outside the workspace; {_RELATIVE_HINT}")
                    else:
                        parts.pop()
                        os.close(fd)
                        fd = -1
                        fd = self._open_parts(parts, path)
                    continue
                if missing:
                    if last:
                        return _Target(fd, parts, missing, name)
                    missing.append(name)
                    continue
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return _Target(fd, parts, [], name)
                    missing.append(name)
                    continue
                except OSError as exc:
                    raise ToolError(f"cannot use path {path!r}: {exc.strerror}") from None
                if stat.S_ISLNK(st.st_mode) and (follow_final or not last):
                    links += 1
                    if links > MAX_LINKS:
                        raise ToolError(f"path {path!r}: too many levels of symbolic links")
                    link = "/".join(parts + [name])
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError:
                        raise _changed(path) from None
                    if not target:
                        raise ToolError(f"path {path!r}: symbolic link {link!r} is empty")
                    if target.startswith("/"):
                        # An absolute link is allowed only when it points into the root.
                        if target != self.root and not target.startswith(self.root + "/"):
                            raise ToolError(f"path {path!r} leads outside the workspace through "
                                            f"symbolic link {link!r}; {_RELATIVE_HINT}")
                        target = target[len(self.root):]
                        parts = []
                        os.close(fd)
                        fd = -1
                        fd = self._open_root()
                    spliced, slash = _split(target.lstrip("/") or ".")
                    trailing = trailing or (slash and last)
                    pending = spliced + pending
                    continue
                if stat.S_ISDIR(st.st_mode) and not last:
                    try:
                        new = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        raise _changed(path) from None
                    os.close(fd)
                    fd = new
                    parts.append(name)
                    continue
                if last:
                    if trailing and not stat.S_ISDIR(st.st_mode):
                        raise ToolError(f"path {path!r} ends with '/' but "
                                        f"{'/'.join(parts + [name])!r} is not a directory")
                    return _Target(fd, parts, [], name)
                raise ToolError(f"path {path!r}: {'/'.join(parts + [name])!r} is not a directory")
            return _Target(fd, parts, missing, None)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise

    # -- queries ----------------------------------------------------------------------------

    def resolve(self, path: str) -> str:
        """The normalised path relative to the root ("." for the root itself).

        Links are followed while they stay inside the root; anything leading outside raises
        ToolError. A missing final component or missing directories are allowed.
        """
        target = self._walk(path, follow_final=True)
        os.close(target.fd)
        return target.relpath

    def _lstat(self, path: str) -> os.stat_result | None:
        target = self._walk(path, follow_final=True)
        try:
            if target.missing:
                return None
            return os.fstat(target.fd) if target.name is None else self._stat(target)
        finally:
            os.close(target.fd)

    def exists(self, path: str) -> bool:
        """Whether `path` names something; False when missing, ToolError when outside."""
        return self._lstat(path) is not None

    def is_dir(self, path: str) -> bool:
        """Whether `path` names a directory; False when missing, ToolError when outside."""
        st = self._lstat(path)
        return st is not None and stat.S_ISDIR(st.st_mode)

    # -- reading ----------------------------------------------------------------------------

    def read_bytes(self, path: str, limit: int) -> tuple[bytes, int]:
        """At most `limit` bytes of a regular file, and the file's total size."""
        target = self._walk(path, follow_final=True)
        fd = -1
        try:
            try:
                if target.missing:
                    raise FileNotFoundError
                if target.name is None:
                    raise IsADirectoryError
                fd = os.open(target.name, _READ_FLAGS, dir_fd=target.fd)
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError
            except FileNotFoundError:
                raise ToolError(f"file {path!r} does not exist; list_files shows what does") from None
            except IsADirectoryError:
                raise ToolError(f"{path!r} is a directory; use list_files to see inside it") from None
            except OSError as exc:
                raise ToolError(f"cannot read {path!r}: {exc.strerror}") from None
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{path!r} is not a regular file (a FIFO, device or socket); "
                                "golem reads only regular files")
            return _read_up_to(fd, [], max(0, limit)), st.st_size
        finally:
            if fd >= 0:
                os.close(fd)
            os.close(target.fd)

    def read_many(self, paths: Iterable[str], limit: int,
                  visit: Callable[[str, bytes, int], bool | None]) -> None:
        """`visit(path, data, size)` for each readable regular file of `paths`, as read_bytes
        would read it, until `visit` returns False; paths that cannot be read are skipped.

        Each directory is opened from the root one component at a time with O_NOFOLLOW and
        kept open while the paths that follow stay in it, so a sorted list costs one walk per
        directory rather than one per file. A path through a link takes read_bytes's walk.
        """
        current, dir_fd = None, -1
        try:
            for path in paths:
                head, _, name = path.rpartition("/")
                if head != current:
                    if dir_fd >= 0:
                        os.close(dir_fd)
                    current, dir_fd = head, -1
                    parts = head.split("/") if head else []
                    if not any(p in ("", ".", "..") for p in parts):
                        try:
                            dir_fd = self._open_parts(parts, path)
                        except ToolError:
                            dir_fd = -1     # a link or a race: the full walk decides
                got = (self._read_at(dir_fd, name, limit)
                       if dir_fd >= 0 and name not in ("", ".", "..") else None)
                if got is None:
                    try:
                        got = self.read_bytes(path, limit)
                    except ToolError:
                        continue
                if got and visit(path, *got) is False:
                    return
        finally:
            if dir_fd >= 0:
                os.close(dir_fd)

    @staticmethod
    def _read_at(dir_fd: int, name: str, limit: int) -> tuple[bytes, int] | tuple[()] | None:
        """The file `name` in `dir_fd` (no link followed): its bytes and size, () when it
        cannot be read, None when it is a link that read_bytes must resolve."""
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            return None if exc.errno == errno.ELOOP else ()
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return ()
            size = st.st_size
            if size < limit:
                data = os.read(fd, size + 1)    # one read: the usual case
                if len(data) <= size:
                    return data, size
                return _read_up_to(fd, [data], limit - len(data)), size
            return _read_up_to(fd, [], limit), size
        except OSError:
            return ()
        finally:
            os.close(fd)

    def list_dir(self, path: str) -> list[tuple[str, bool]]:
        """Sorted (name, is_dir) pairs of a directory; links are never reported as dirs."""
        target = self._walk(path, follow_final=True)
        fd = -1
        try:
            if target.missing:
                raise ToolError(f"directory {path!r} does not exist")
            if target.name is None:
                fd = os.dup(target.fd)
            else:
                try:
                    fd = os.open(target.name, _DIR_FLAGS, dir_fd=target.fd)
                except FileNotFoundError:
                    raise ToolError(f"directory {path!r} does not exist") from None
                except NotADirectoryError:
                    raise ToolError(f"{path!r} is a file, not a directory; "
                                    "read it with read_file") from None
                except OSError as exc:
                    raise ToolError(f"cannot list {path!r}: {exc.strerror}") from None
            with os.scandir(fd) as it:
                return sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
        finally:
            if fd >= 0:
                os.close(fd)
            os.close(target.fd)

    def walk(self, path: str = ".", skip: frozenset[str] | set[str] = DEFAULT_SKIP) -> Iterator[str]:
        """Root-relative paths of the regular files below `path`, depth first, sorted.

        Links are not followed; directories whose name is in `skip`, or matches an entry of
        it that holds a `*` (like "*.egg-info"), are pruned.
        """
        top = self.resolve(path)
        if not self.is_dir(top):
            raise ToolError(f"{path!r} is not a directory; walk needs a directory")
        parts = [] if top == "." else top.split("/")
        patterns = [p for p in skip if "*" in p]

        def pruned(name: str) -> bool:
            return name in skip or any(fnmatch.fnmatchcase(name, p) for p in patterns)

        return self._walk_tree(parts, path, pruned)

    def _walk_tree(self, parts: list[str], path: str,
                   pruned: Callable[[str], bool]) -> Iterator[str]:
        # No fd stays open across a yield, so an abandoned generator leaks nothing.
        try:
            fd = self._open_parts(parts, path)
        except ToolError:
            return
        prefix = "/".join(parts) + "/" if parts else ""
        try:
            found = [(item.rel, item.kind) for item in
                     tree.walk(fd, lambda rel, name: pruned(name))]
        except tree.TreeError as exc:
            raise ToolError(f"cannot list {path!r}: the tree is {exc}") from None
        finally:
            os.close(fd)
        for rel, kind in found:
            if kind == "file":
                yield prefix + rel

    # -- writing ----------------------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes) -> bool:
        """Atomically replace or create a file with `data`; True if it was created.

        Missing parent directories are made; the old file's permission bits are kept.
        Never writes through a symbolic link and never inside `.git`.
        """
        components, trailing = _split(path)
        _refuse_git("/".join(components))
        if trailing:
            raise ToolError(f"path {path!r} ends with '/'; give the path of a file")
        target = self._walk(path, follow_final=False)
        try:
            if target.name is None:
                raise ToolError(f"{path!r} is a directory; give the path of a file")
            relpath = target.relpath
            _refuse_git(relpath)   # links and ".." can lead into .git too
            old = None if target.missing else self._stat(target)
            if old is not None:
                if stat.S_ISLNK(old.st_mode):
                    dest = self.resolve(path)
                    raise ToolError(f"{path!r} is a symbolic link; golem does not write through "
                                    f"links, write to its target {dest!r} instead")
                if stat.S_ISDIR(old.st_mode):
                    raise ToolError(f"{path!r} is a directory; give the path of a file")
                if not stat.S_ISREG(old.st_mode):
                    raise ToolError(f"{path!r} is not a regular file; golem writes only "
                                    "regular files")
            if self.on_change is not None:
                self.on_change(relpath)
            self._make_dirs(target, path)
            self._replace(target.fd, target.name, data,
                          None if old is None else stat.S_IMODE(old.st_mode))
            return old is None
        finally:
            os.close(target.fd)

    @staticmethod
    def _stat(target: _Target) -> os.stat_result | None:
        try:
            return os.stat(target.name, dir_fd=target.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _make_dirs(self, target: _Target, path: str) -> None:
        """Create `target.missing` below `target.fd`, moving the fd down as it goes."""
        while target.missing:
            name = target.missing.pop(0)
            try:
                os.mkdir(name, 0o777, dir_fd=target.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise ToolError(f"cannot create directory for {path!r}: {exc.strerror}") from None
            try:
                new = os.open(name, _DIR_FLAGS, dir_fd=target.fd)
            except OSError:
                raise ToolError(f"path {path!r}: {'/'.join(target.parts + [name])!r} "
                                "is not a directory") from None
            os.close(target.fd)
            target.fd = new
            target.parts.append(name)

    @staticmethod
    def _replace(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
        tmp = f".{name[:200]}.golem-{secrets.token_hex(6)}.tmp"
        fd = -1
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o666 if mode is None else 0o600, dir_fd=dir_fd)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mode is not None:
                os.fchmod(fd, mode)     # exactly the old bits, whatever the umask says
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as exc:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise ToolError(f"cannot write {name!r}: {exc.strerror}") from None
            raise
