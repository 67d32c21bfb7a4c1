"""The runs golem keeps: listing them (`golem runs`) and pruning them.

The policy comes from the user's settings (golem/config.py): `keep-runs` (default 20) and
`keep-size` (default 1 GiB). Pruning removes the oldest runs beyond `keep-runs`, then the
oldest while everything kept takes more than `keep-size` (the newest run always stays), and
then every stored file no kept run refers to. It runs by itself before each new run and on
`golem runs -prune`.

Another golem may be running at the same time: a run that has not ended and began less than
a day ago is never pruned, and a stored file written or reused in the last hour is never
removed (a snapshot being taken refers to it before its list is saved).
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field

from golem.tools import tree
from golem.workflow import runs

IN_PROGRESS = 24 * 3600     # seconds an unended run is taken to be still running
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

    @property
    def in_progress(self) -> bool:
        return self.ended is None and time.time() - self.started < IN_PROGRESS


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
    run = Run(os.path.basename(path), path, own_bytes=_size_of(path))
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
    path = os.path.join(runs.state_dir(), "runs")
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
    blobs: dict[str, int] = {}
    for run in found:
        blobs.update(run.blobs)
    return sum(run.own_bytes for run in found) + sum(blobs.values())


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
        path = os.path.join(runs.state_dir(), "runs", run_id)
        done.freed += _size_of(path)
        tree.remove_tree(path)
    done.stored, freed = _collect(set().union(*(set(r.blobs) for r in list_runs())))
    done.freed += freed
    return done


def _collect(referenced: set[str]) -> tuple[int, int]:
    """Remove stored files no run refers to (and abandoned partial copies), older than GRACE."""
    path = os.path.join(runs.state_dir(), "store")
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
            if info is None or not stat.S_ISREG(info.st_mode) or now - info.st_mtime < GRACE:
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
