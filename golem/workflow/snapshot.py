"""A snapshot of the workspace before a run: every file's SHA-256, mode, and a copy of it.

The copies live in a content-addressed store outside the workspace (one copy per distinct
content), so golem can tell exactly what a run changed, write a patch of it, and put the
workspace back as it was (`golem undo`), whatever changed the files: a tool or a command.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass

SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache",
             ".pytest_cache", ".ruff_cache", ".eggs", ".hg", ".svn"}
MAX_COPY = 32 * 1024 * 1024     # larger files are fingerprinted but not copied


@dataclass(frozen=True)
class Entry:
    sha: str                # content hash, or "link:" + target for a symlink
    mode: int
    size: int
    stored: bool            # a copy is in the store


def _walk(root: str):
    for top, dirs, files in os.walk(root):
        # *.egg-info is kept: its entry_points.txt can load a test-runner plugin
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            full = os.path.join(top, name)
            yield os.path.relpath(full, root).replace(os.sep, "/"), full


def _directories(root: str) -> set[str]:
    found = set()
    for top, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in dirs:
            found.add(os.path.relpath(os.path.join(top, name), root).replace(os.sep, "/"))
    return found


def fingerprint(root: str, store: str | None = None) -> dict[str, Entry]:
    """Hash every file below `root` (skipping VCS and caches); copy each into `store` if given."""
    entries: dict[str, Entry] = {}
    for rel, full in _walk(root):
        info = os.lstat(full)
        if stat.S_ISLNK(info.st_mode):
            entries[rel] = Entry("link:" + os.readlink(full), 0, 0, False)
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        digest = hashlib.sha256()
        copy = store is not None and info.st_size <= MAX_COPY
        chunks = []
        try:
            with open(full, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
                    if copy:
                        chunks.append(chunk)
        except OSError:
            continue
        sha = digest.hexdigest()
        if copy:
            target = os.path.join(store, sha)
            if not os.path.exists(target):
                tmp = target + ".part"
                with open(tmp, "wb") as out:
                    out.writelines(chunks)
                os.replace(tmp, target)
        entries[rel] = Entry(sha, stat.S_IMODE(info.st_mode), info.st_size, copy)
    return entries


@dataclass
class Changes:
    added: list[str]
    modified: list[str]
    removed: list[str]

    @property
    def all(self) -> list[str]:
        return sorted(self.added + self.modified + self.removed)


def compare(before: dict[str, Entry], after: dict[str, Entry]) -> Changes:
    """What differs between two fingerprints (content, mode or link target)."""
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    modified = sorted(p for p in set(before) & set(after)
                      if (before[p].sha, before[p].mode) != (after[p].sha, after[p].mode))
    return Changes(added, modified, removed)


class Snapshot:
    """A fingerprint plus the store holding the original content, saved under `directory`."""

    def __init__(self, directory: str, entries: dict[str, Entry], dirs: set[str] | None = None):
        self.directory = directory
        self.entries = entries
        self.dirs = dirs or set()      # directories that existed, so undo can remove new ones

    @classmethod
    def take(cls, root: str, directory: str) -> Snapshot:
        store = os.path.join(directory, "store")
        os.makedirs(store, exist_ok=True)
        snap = cls(directory, fingerprint(root, store), _directories(root))
        with open(os.path.join(directory, "dirs.json"), "w", encoding="utf-8") as handle:
            json.dump(sorted(snap.dirs), handle)
        with open(os.path.join(directory, "snapshot.json"), "w", encoding="utf-8") as handle:
            json.dump({p: vars(e) for p, e in snap.entries.items()}, handle)
        return snap

    @classmethod
    def load(cls, directory: str) -> Snapshot:
        with open(os.path.join(directory, "snapshot.json"), encoding="utf-8") as handle:
            raw = json.load(handle)
        dirs: set[str] = set()
        if os.path.exists(os.path.join(directory, "dirs.json")):
            with open(os.path.join(directory, "dirs.json"), encoding="utf-8") as handle:
                dirs = set(json.load(handle))
        return cls(directory, {p: Entry(**e) for p, e in raw.items()}, dirs)

    def original(self, rel: str) -> bytes | None:
        """The file's content before the run, or None if it did not exist (or was not kept)."""
        entry = self.entries.get(rel)
        if entry is None or not entry.stored:
            return None
        with open(os.path.join(self.directory, "store", entry.sha), "rb") as handle:
            return handle.read()
