"""What the workspace held before the run: every file's fingerprint and a copy of it, and a
manifest of the dependency trees.

Every path is fingerprinted (SHA-256, permission bits, link targets) and copied into a
content-addressed store outside the workspace, except:

- dependency trees: real directories at the top of the workspace named `.venv`, `venv`,
  `node_modules`, `.tox` or `.nox`, or holding a `pyvenv.cfg`. They are too big to copy
  and are linked into the verification copy instead, so golem keeps a manifest of them
  (type, size, mode, modification and change times, link targets of every entry) and the
  verdict is REJECTED when the run changed one. `.git` gets a manifest of what version
  lookups read (`HEAD`, `packed-refs`, `refs/`).
- version-control directories (`.git`, `.hg`, `.svn`) and caches (`__pycache__`,
  `.pytest_cache`, `.mypy_cache`, `.ruff_cache`, `.hypothesis`) at any depth: never copied
  into the verification copy, so nothing in them can reach the graded run.

Files over 32 MiB are fingerprinted by their metadata (size, times, inode) instead of their
content and not copied; a change to one is still seen. Walks are iterative and bounded
(golem/tools/tree.py); a tree over the bounds is a TreeError.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass, field

from golem.tools import tree

DEPENDENCY_NAMES = frozenset({".venv", "venv", "node_modules", ".tox", ".nox"})
VCS_NAMES = frozenset({".git", ".hg", ".svn"})
CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                        ".hypothesis"})
# the bytecode files in these directories of a dependency tree are not in its manifest: a
# graded run reads bytecode only through golem's own cache (the pycache prefix), which holds
# links to installed bytecode whose own times golem records (scratch.cache_state). Anything
# else in them (a source, an extension module, a link, a directory) is, as it is anywhere in
# the tree: `import pkg.__pycache__.mod` imports it like any other module
MANIFEST_SKIP = frozenset({"__pycache__"})
# what of .git decides what git resolves, and what it runs later (hooks, and commands the
# configuration names: core.hooksPath, core.fsmonitor, filter and diff drivers)
GIT_STATE = ("HEAD", "packed-refs", "refs", "config", "hooks", "info")
MAX_COPY = 32 * 1024 * 1024     # larger files are fingerprinted by metadata, not copied
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One path: `sha` is the content hash, "link:" + target for a symbolic link, or
    "large:" + metadata for a file too large to copy."""

    sha: str
    mode: int
    size: int
    stored: bool            # a copy is in the store

    @property
    def is_link(self) -> bool:
        return self.sha.startswith("link:")

    @property
    def link_target(self) -> str:
        return self.sha[len("link:"):]


@dataclass
class Changes:
    added: list[str]
    modified: list[str]
    removed: list[str]

    @property
    def all(self) -> list[str]:
        return sorted(self.added + self.modified + self.removed)

    def without(self, paths: set[str]) -> Changes:
        keep = lambda names: [n for n in names if n not in paths]
        return Changes(keep(self.added), keep(self.modified), keep(self.removed))


def compare(before: dict[str, Entry], after: dict[str, Entry]) -> Changes:
    """What differs between two fingerprints (content, mode or link target)."""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    modified = sorted(p for p in set(before) & set(after)
                      if (before[p].sha, before[p].mode) != (after[p].sha, after[p].mode))
    return Changes(added, modified, removed)


def dependency_trees(root: str) -> list[str]:
    """The dependency trees of the workspace at `root`: real top-level directories (never a
    link) with a dependency name or a `pyvenv.cfg` inside."""
    found = []
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False) or entry.name in VCS_NAMES:
                continue
            if entry.name in DEPENDENCY_NAMES or \
                    os.path.isfile(os.path.join(entry.path, "pyvenv.cfg")):
                found.append(entry.name)
    return found


def _large(info: os.stat_result) -> str:
    return f"large:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}:{info.st_ino}"


def _pruned(deps: frozenset[str]):
    def prune(rel: str, name: str) -> bool:
        if name in VCS_NAMES or name in CACHE_DIRS:
            return True
        return "/" not in rel and name in deps
    return prune


BYTECODE = (".pyc", ".pyo")


def bytecode(root: str, deps: list[str] = ()) -> dict[str, str]:
    """Every bytecode file below `root` (in `__pycache__` or beside its source; version
    control and the dependency trees left out) -> its size, times and inode. Fingerprints
    leave caches out; this is how golem sees bytecode a run wrote where a later Python,
    golem's or the user's, would load it instead of the source. TreeError over the bounds."""
    found = {}
    prune = lambda rel, name: name in VCS_NAMES or ("/" not in rel and name in deps)
    for item in tree.walk(root, prune):
        if item.kind in ("file", "link") and item.name.lower().endswith(BYTECODE):
            info = item.info
            found[item.rel] = (f"{item.kind}:{info.st_size}:{info.st_mtime_ns}:"
                               f"{info.st_ctime_ns}:{info.st_ino}")
    return found


def planted_bytecode(before: dict[str, str], after: dict[str, str]) -> Changes:
    """Bytecode the run added or changed, as changes (a removed one is no threat)."""
    added = sorted(p for p in after if p not in before)
    modified = sorted(p for p in after if p in before and after[p] != before[p])
    return Changes(added, modified, [])


@dataclass
class Fingerprint:
    entries: dict[str, Entry] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)


def fingerprint(root: str, store: str | None = None, deps: list[str] = ()) -> Fingerprint:
    """Hash every file below `root` (see the module docstring for what is left out); with
    `store`, copy each one there under its hash. TreeError when the tree is over the bounds."""
    found = Fingerprint()
    prune = _pruned(frozenset(deps))
    store_fd = os.open(store, os.O_RDONLY | os.O_DIRECTORY) if store else -1
    try:
        for item in tree.walk(root, prune):
            kind = item.kind
            if kind == "dir":
                if not prune(item.rel, item.name):
                    found.dirs.add(item.rel)
                continue
            if kind == "link":
                try:
                    target = os.readlink(item.name, dir_fd=item.dir_fd)
                except OSError:
                    continue
                found.entries[item.rel] = Entry("link:" + target, 0, 0, False)
                continue
            if kind != "file":
                continue        # FIFOs, sockets, devices: never copied anywhere
            mode = stat.S_IMODE(item.info.st_mode)
            if item.info.st_size > MAX_COPY:
                found.entries[item.rel] = Entry(_large(item.info), mode, item.info.st_size,
                                                False)
                continue
            try:
                sha, size = _hash(item.dir_fd, item.name, store_fd)
            except OSError:
                continue        # gone or swapped while golem looked: not part of the tree
            found.entries[item.rel] = Entry(sha, mode, size, store_fd >= 0)
    finally:
        if store_fd >= 0:
            os.close(store_fd)
    return found


def _hash(dir_fd: int, name: str, store_fd: int) -> tuple[str, int]:
    """The SHA-256 and size of one file, streamed; copied into the store when given (shared
    with the file where the file system can: then what is hashed is what the store holds)."""
    fd, _ = tree.open_file(dir_fd, name)
    digest = hashlib.sha256()
    tmp, out, size, made = f".part-{secrets.token_hex(8)}", -1, 0, False
    try:
        source, cloned = fd, False
        if store_fd >= 0:
            out = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                          dir_fd=store_fd)
            made = True
            if tree.clone_fd(fd, out):
                source, cloned = out, True
        while True:
            chunk = os.read(source, _CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
            if size > MAX_COPY:
                raise OSError("grew past the copy limit while it was read")
            if out >= 0 and not cloned:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
        sha = digest.hexdigest()
        if made:
            # forgotten before it is closed, so an exception a signal handler raises just
            # after the close cannot close it twice
            closing, out = out, -1
            os.close(closing)
            if tree.lstat_at(store_fd, sha) is None:
                os.rename(tmp, sha, src_dir_fd=store_fd, dst_dir_fd=store_fd)
            else:
                os.unlink(tmp, dir_fd=store_fd)
                try:    # a store shared between runs: fresh again, so no pruning takes it
                    os.utime(sha, dir_fd=store_fd, follow_symlinks=False)
                except OSError:
                    pass
        return sha, size
    except BaseException:
        if out >= 0:
            os.close(out)
        if made:
            try:
                os.unlink(tmp, dir_fd=store_fd)
            except OSError:
                pass
        raise
    finally:
        os.close(fd)


def manifest(root: str, deps: list[str]) -> dict[str, str]:
    """path -> signature of every entry in the dependency trees `deps` of `root`, and of
    `.git`'s refs, to tell afterwards whether the run changed any of them."""
    found: dict[str, str] = {}
    for name in deps:
        found[name] = "dir"
        try:
            fd = tree.open_dir(root, [name])
        except (OSError, tree.TreeError):
            found[name] = "missing"
            continue
        try:
            for item in tree.walk(fd):
                if item.name in MANIFEST_SKIP and item.kind == "dir":
                    continue    # its times change with the bytecode written inside
                if item.kind == "file" and item.name.endswith(".pyc") \
                        and item.rel.rpartition("/")[0].rpartition("/")[2] in MANIFEST_SKIP:
                    continue    # bytecode Python wrote: never read from here (see above)
                info = item.info
                sig = f"{item.kind}:{stat.S_IMODE(info.st_mode):o}:{info.st_size}:" \
                      f"{info.st_mtime_ns}:{info.st_ctime_ns}"
                if item.kind == "link":
                    try:
                        sig += ":" + os.readlink(item.name, dir_fd=item.dir_fd)
                    except OSError:
                        sig += ":?"
                found[f"{name}/{item.rel}"] = sig
        finally:
            os.close(fd)
    found.update(_git_state(root))
    return found


def _git_state(root: str) -> dict[str, str]:
    try:
        fd = tree.open_dir(root, [".git"])
    except (OSError, tree.TreeError):
        return {}
    found = {}
    try:
        for name in GIT_STATE:
            info = tree.lstat_at(fd, name)
            if info is None:
                continue
            items = [(name, fd, info)] if not stat.S_ISDIR(info.st_mode) else []
            if stat.S_ISDIR(info.st_mode):
                sub = tree.open_dir(fd, [name])
                try:
                    for item in tree.walk(sub):
                        if item.kind == "file":
                            found[f".git/{name}/{item.rel}"] = _small_hash(item.dir_fd,
                                                                           item.name)
                        elif item.kind == "link":     # a hook may be a link too
                            found[f".git/{name}/{item.rel}"] = "link"
                finally:
                    os.close(sub)
            for label, dir_fd, _ in items:
                found[f".git/{label}"] = _small_hash(dir_fd, label)
    finally:
        os.close(fd)
    return found


def _small_hash(dir_fd: int, name: str) -> str:
    try:
        fd, _ = tree.open_file(dir_fd, name)
    except OSError:
        return "unreadable"
    try:
        return hashlib.sha256(tree.read_limited(fd, 1 << 20)).hexdigest()
    finally:
        os.close(fd)


def manifest_changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """tree -> what changed in it first (`added x`, `removed y`, `changed z`)."""
    found: dict[str, str] = {}
    for path in sorted(set(before) | set(after)):
        top = ".git" if path.startswith(".git/") else path.split("/", 1)[0]
        if top in found:
            continue
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        verb = "added" if old is None else "removed" if new is None else "changed"
        found[top] = f"{verb} {path}"
    return found


class Snapshot:
    """A fingerprint plus the store holding the original content, saved under `directory`.

    `deps` are the dependency trees (linked into copies, never fingerprinted) and
    `manifest` their signatures; `root_id` is (device, inode) of the workspace itself.
    """

    def __init__(self, directory: str, entries: dict[str, Entry], dirs: set[str] | None = None,
                 deps: list[str] = (), manifest: dict[str, str] | None = None,
                 root_id: tuple[int, int] | None = None, store: str | None = None):
        self.directory = directory
        self._store = store             # a store shared between runs, else directory/store
        self.entries = entries
        self.dirs = dirs or set()      # directories that existed, so undo can remove new ones
        self.deps = list(deps)
        self.manifest = manifest or {}
        self.root_id = root_id

    @property
    def store(self) -> str:
        return self._store or os.path.join(self.directory, "store")

    @classmethod
    def take(cls, root: str, directory: str, store: str | None = None) -> Snapshot:
        """Fingerprint `root` and keep its files in `store` (default: `directory`/store; a
        store shared between runs keeps each content once, under its hash)."""
        shared = store is not None
        store = store or os.path.join(directory, "store")
        os.makedirs(store, mode=0o700, exist_ok=True)
        deps = dependency_trees(root)
        found = fingerprint(root, store, deps)
        info = os.stat(root)
        snap = cls(directory, found.entries, found.dirs, deps, manifest(root, deps),
                   (info.st_dev, info.st_ino), store if shared else None)
        record = {"entries": {p: vars(e) for p, e in snap.entries.items()},
                  "dirs": sorted(snap.dirs), "deps": deps, "root_id": list(snap.root_id),
                  "shared_store": shared}
        tree.write_output(os.path.join(directory, "snapshot.json"), json.dumps(record))
        return snap

    @classmethod
    def load(cls, directory: str, store: str | None = None) -> Snapshot:
        """The snapshot saved in `directory`; `store` is where a shared store is."""
        with open(os.path.join(directory, "snapshot.json"), encoding="utf-8",
                  errors="surrogateescape") as handle:
            raw = json.load(handle)
        root_id = tuple(raw["root_id"]) if raw.get("root_id") else None
        return cls(directory, {p: Entry(**e) for p, e in raw["entries"].items()},
                   set(raw.get("dirs", ())), raw.get("deps", ()), None, root_id,
                   store if raw.get("shared_store") else None)

    def open_original(self, rel: str) -> int | None:
        """A read descriptor of the file's content before the run, or None."""
        entry = self.entries.get(rel)
        if entry is None or not entry.stored:
            return None
        try:
            return os.open(os.path.join(self.store, entry.sha),
                           os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None

    def original(self, rel: str, limit: int = MAX_COPY) -> bytes | None:
        """The file's content before the run, or None if it did not exist or was not kept.
        The kept copy is checked against its hash: a copy changed since (anything that could
        write the state directory) is an OSError, never content."""
        fd = self.open_original(rel)
        if fd is None:
            return None
        try:
            data = self.checked(rel, fd)
        finally:
            os.close(fd)
        return data[:limit] if data is not None else None

    def checked(self, rel: str, fd: int | None) -> bytes | None:
        """The whole content of the kept copy of `rel` open at `fd`, checked against its
        hash (OSError when it was changed after the snapshot); None without one."""
        if fd is None:
            return None
        data = tree.read_limited(fd, MAX_COPY + 1)
        if hashlib.sha256(data).hexdigest() != self.entries[rel].sha:
            raise OSError(f"the kept copy of {rel} was changed after the snapshot")
        return data
