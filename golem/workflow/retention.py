"""The runs golem keeps: listing them (`golem runs`) and pruning them.

The policy comes from the user's settings (golem/config/__init__.py): `keep-runs` (default 20) and
`keep-size` (default 1 GiB). Pruning removes the oldest runs beyond `keep-runs`, then the
oldest while everything kept takes more than `keep-size` (the newest run always stays), and
then every stored file no kept run refers to. It runs by itself before each new run and on
`golem runs -prune`.

Pruning also removes golem's bytecode caches (`pycache/`) of workspaces no kept run worked
in, so `golem runs` counts, and `-prune` frees, everything golem keeps.

Another golem may be running at the same time: a run is going while its process holds the
run's lock (golem/workflow/state.py), and such a run is never pruned; a run whose process is
gone without ending it (killed, or interrupted before it recorded an end) is shown as
interrupted and pruned like any other. While some run is going, a stored file or a cache
written or used in the last hour is kept (a snapshot being taken refers to its files before
its list is saved); when none is, nothing unreferenced is kept.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field

from golem.tools import tree
from golem.workflow import state

IN_PROGRESS = 24 * 3600     # seconds an unended run without a lock is taken to be going
GRACE = 3600                # seconds a fresh stored file is safe from pruning


@dataclass
class Run:
    """One kept run, as `golem runs` shows it."""

    id: str
    path: str
    workspace: str = "?"
    started: float = 0.0
    ended: float | None = None
    command: str = "?"
    verdict: str | None = None
    undone: bool = False
    own_bytes: int = 0                          # run.json, snapshot.json, a private store
    blobs: dict[str, int] = field(default_factory=dict)     # stored hash -> size
    damaged: bool = False
    going: bool | None = None   # its process holds its lock; None: a run older than locks

    @property
    def in_progress(self) -> bool:
        if self.going is not None:
            return self.going
        return self.ended is None and time.time() - self.started < IN_PROGRESS

    @property
    def interrupted(self) -> bool:
        """Never ended, and no process does it any more."""
        return self.ended is None and not self.in_progress


def _size_of(path: str) -> int:
    total = 0
    try:
        for item in tree.walk(path):
            if item.kind == "file":
                total += item.info.st_size
    except (OSError, tree.TreeError):
        pass
    return total


def _load(path: str) -> Run:
    run = Run(os.path.basename(path), path, own_bytes=_size_of(path),
              going=state.running(path))
    try:
        with open(os.path.join(path, "run.json"), encoding="utf-8") as handle:
            manifest = json.load(handle)
        run.workspace = str(manifest.get("workspace", "?"))
        run.started = float(manifest.get("started") or 0.0)
        run.ended = manifest.get("ended")
        run.command = str(manifest.get("command") or "fix")
        run.verdict = manifest.get("verdict") or manifest.get("stop")
        run.undone = bool(manifest.get("undone"))
    except (OSError, ValueError, TypeError, AttributeError):
        run.damaged = True
        try:
            run.started = os.lstat(path).st_mtime
        except OSError:
            pass
    try:
        with open(os.path.join(path, "snapshot.json"), encoding="utf-8",
                  errors="surrogateescape") as handle:
            snapshot = json.load(handle)
        if snapshot.get("shared_store"):
            run.blobs = {e["sha"]: int(e.get("size") or 0)
                         for e in snapshot.get("entries", {}).values() if e.get("stored")}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        pass
    return run


def list_runs() -> list[Run]:
    """Every run in the state directory, newest first."""
    path = os.path.join(state.state_dir(), "runs")
    try:
        names = os.listdir(path)
    except OSError:
        return []
    found = []
    for name in names:
        full = os.path.join(path, name)
        if not name.startswith(".") and stat.S_ISDIR(os.lstat(full).st_mode):
            found.append(_load(full))
    return sorted(found, key=lambda r: (r.started, r.id), reverse=True)


def sizes(found: list[Run]) -> dict[str, int]:
    """run id -> bytes that removing the run alone would free (its files, and the stored
    content no other run refers to)."""
    users: dict[str, int] = {}
    for run in found:
        for sha in run.blobs:
            users[sha] = users.get(sha, 0) + 1
    return {run.id: run.own_bytes + sum(n for sha, n in run.blobs.items() if users[sha] == 1)
            for run in found}


def total_bytes(found: list[Run]) -> int:
    """What the runs `found` take: their own files and the stored content they refer to."""
    blobs: dict[str, int] = {}
    for run in found:
        blobs.update(run.blobs)
    return sum(run.own_bytes for run in found) + sum(blobs.values())


@dataclass
class Footprint:
    """Everything golem keeps in the state directory, in bytes."""

    runs: int = 0           # the run directories
    store: int = 0          # the content store, all of it
    unreferenced: int = 0   # of which no kept run refers to
    pycache: int = 0        # the bytecode caches

    @property
    def total(self) -> int:
        return self.runs + self.store + self.pycache


def footprint(found: list[Run]) -> Footprint:
    referenced = set().union(*(set(r.blobs) for r in found)) if found else set()
    kept = Footprint(runs=sum(r.own_bytes for r in found))
    for name, info in _entries(os.path.join(state.state_dir(), "store")):
        if stat.S_ISREG(info.st_mode):
            kept.store += info.st_size
            if name not in referenced:
                kept.unreferenced += info.st_size
    kept.pycache = _size_of(os.path.join(state.state_dir(), "pycache"))
    return kept


def _entries(path: str) -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of what directory `path` holds; nothing when it is missing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        found = []
        for name in os.listdir(fd):
            info = tree.lstat_at(fd, name)
            if info is not None:
                found.append((name, info))
        return found
    finally:
        os.close(fd)


def policy() -> tuple[int, int]:
    """(keep-runs, keep-size) from the user's settings (0: no limit)."""
    from golem import config
    settings = config.resolve({}, None, ["keep-runs", "keep-size"])
    return settings["keep-runs"], settings["keep-size"]


@dataclass
class Pruned:
    runs: list[str] = field(default_factory=list)
    stored: int = 0             # stored files removed
    freed: int = 0              # bytes


def prune(keep_runs: int, keep_size: int) -> Pruned:
    """Apply the retention policy now; see the module docstring."""
    found = list_runs()
    done = Pruned()
    kept = []
    for index, run in enumerate(found):
        beyond = keep_runs and index >= keep_runs and not run.in_progress
        (kept if not beyond else done.runs).append(run if not beyond else run.id)
    if keep_size:
        while len(kept) > 1 and total_bytes(kept) > keep_size:
            oldest = next((r for r in reversed(kept) if not r.in_progress), None)
            if oldest is None or oldest is kept[0]:
                break
            kept.remove(oldest)
            done.runs.append(oldest.id)
    for run_id in done.runs:
        path = os.path.join(state.state_dir(), "runs", run_id)
        done.freed += _size_of(path)
        tree.remove_tree(path)
    left = list_runs()
    # while a run is going, what it wrote in the last hour may not be referenced yet
    grace = GRACE if any(r.in_progress for r in left) else 0
    done.stored, freed = _collect(set().union(*(set(r.blobs) for r in left)), grace)
    done.freed += freed
    done.freed += _collect_caches({r.workspace for r in left}, grace)
    return done


def _collect_caches(workspaces: set[str], grace: float) -> int:
    """Remove the bytecode caches of workspaces no kept run worked in; bytes freed."""
    path = os.path.join(state.state_dir(), "pycache")
    freed = 0
    now = time.time()
    for name, info in _entries(path):
        cache = os.path.join(path, name)
        owner = state.cache_owner(cache)
        if not stat.S_ISDIR(info.st_mode) or (owner and owner[0] in workspaces):
            continue
        used = owner[1] if owner else info.st_mtime
        if now - used < grace:
            continue
        freed += _size_of(cache)
        try:
            tree.remove_tree(cache)
        except (OSError, tree.TreeError):
            continue
        for suffix in (".state", state.OWNER):       # what golem keeps beside a cache
            try:
                freed += os.lstat(cache + suffix).st_size
                os.unlink(cache + suffix)
            except OSError:
                pass
    return freed


def _collect(referenced: set[str], grace: float) -> tuple[int, int]:
    """Remove stored files no run refers to (and abandoned partial copies), older than
    `grace` seconds."""
    path = os.path.join(state.state_dir(), "store")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0, 0
    removed = freed = 0
    now = time.time()
    try:
        for name in os.listdir(fd):
            if name in referenced:
                continue
            info = tree.lstat_at(fd, name)
            if info is None or not stat.S_ISREG(info.st_mode) or now - info.st_mtime < grace:
                continue
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                continue
            removed += 1
            freed += info.st_size
    finally:
        os.close(fd)
    return removed, freed


def prune_quietly() -> None:
    """The automatic pruning before a new run: a failure here never stops the run."""
    try:
        keep_runs, keep_size = policy()
        if keep_runs or keep_size:
            prune(keep_runs, keep_size)
    except Exception:   # noqa: BLE001 -- housekeeping must not cost the user a run
        pass
