"""Run directories: where golem keeps what it needs to put a workspace back (`golem undo`).

Each run that may change files (`fix`, `run`) gets a directory under the state directory
(`$GOLEM_STATE_DIR`, else `$XDG_STATE_HOME/golem`, else `~/.local/state/golem`), outside the
workspace: `runs/<id>/snapshot.json` fingerprints every file as it was before the run, and
the content is kept once, under its SHA-256, in `store/`, shared by all runs (a second run of
the same repository adds only what changed; every read is checked against the hash).
`run.json` names the workspace (and its device and inode), the command, and, once the run
ends, the paths it changed and their content at that moment, so `undo` never overwrites work
done after the run without being told to. Old runs are pruned as they pile up
(golem/workflow/retention.py).

`undo` writes through `golem.tools.tree.Writer`: every path is walked from a descriptor of the
workspace without following a link, so a directory the run swapped for a link makes undo
refuse that path and say so, never write where the link leads.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import time

from golem.core.errors import UsageError
from golem.tools import tree
from golem.workflow import retention
# the state directory and the run locks, also read by retention (and known here by their names)
from golem.workflow.state import LOCK, OWNER, _hold, _no_follow, cache_owner, release_all, \
    running, state_dir
from golem.workflow.verifier.snapshot import Changes, Entry, Snapshot, _large, compare, \
    fingerprint


def cache_for(interpreter: str, workspace: str) -> str:
    """golem's bytecode cache for `interpreter` and `workspace` (see scratch.cache_dir);
    the state directory must lie outside the workspace, where no command can write it."""
    state = os.path.realpath(state_dir())
    if state == workspace or state.startswith(workspace + os.sep):
        raise UsageError(f"the state directory {state} is inside the workspace; set "
                         "GOLEM_STATE_DIR to a directory outside it")
    from golem.workflow.verifier.scratch import cache_dir
    path = cache_dir(state, interpreter, workspace)
    # whose cache it is, and when it was last used, beside it (the cache itself must stay as
    # the last baseline left it): pruning removes the caches of forgotten workspaces
    try:
        tree.write_output(path + OWNER, json.dumps(
            {"workspace": workspace, "interpreter": interpreter, "used": time.time()}))
    except OSError:
        pass
    return path


def _own_dir(path: str) -> str:
    """`path`, made (0700) if missing; never a link."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is not a directory (a link or a file is in its place)")
    return path


def _runs_dir() -> str:
    """The directory of run directories."""
    return _own_dir(os.path.join(state_dir(), "runs"))


def store_dir() -> str:
    """The content-addressed store every run's snapshot keeps its files in."""
    return _own_dir(os.path.join(state_dir(), "store"))


def _outside(root: str) -> None:
    state = os.path.realpath(state_dir())
    if state == root or state.startswith(root + os.sep):
        raise UsageError(f"the state directory {state} is inside the workspace; set "
                         "GOLEM_STATE_DIR to a directory outside it")


def new_run(root: str, command: str = "fix") -> tuple[str, str]:
    """A fresh run id and its directory, recorded as belonging to workspace `root`; older
    runs beyond the retention policy are pruned then."""
    _outside(root)
    runs = _runs_dir()
    for _ in range(10):
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
        path = os.path.join(runs, run_id)
        try:
            os.mkdir(path, 0o700)       # never an existing directory, nor a link planted
            _hold(path)
            break
        except FileExistsError:
            continue
    else:
        raise UsageError(f"cannot make a run directory in {runs}")
    _write(path, {"id": run_id, "workspace": root, "started": time.time(), "changed": None,
                  "command": command})
    # the new run counts as the newest of those kept (and, still going, is never pruned)
    retention.prune_quietly()
    return run_id, path


def record_result(run_id: str | None, **fields) -> None:
    """Add the run's outcome (verdict, stop) to its run.json; nothing when it is gone."""
    if not run_id:
        return
    path = os.path.join(state_dir(), "runs", os.path.basename(run_id))
    try:
        manifest = _read(path)
    except UsageError:
        return
    manifest.update(fields)
    try:
        _write(path, manifest)
    except OSError:
        pass


def _write(path: str, manifest: dict) -> None:
    tree.write_output(os.path.join(path, "run.json"), json.dumps(manifest, indent=1))


def _read(path: str) -> dict:
    try:
        with open(os.path.join(path, "run.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        raise UsageError(f"run directory {path} is missing or damaged") from None


def record_root(path: str, root_id: tuple[int, int] | None) -> None:
    """Remember which directory (device, inode) the workspace was."""
    manifest = _read(path)
    manifest["root_id"] = list(root_id) if root_id else None
    _write(path, manifest)


def finish_run(path: str, changes: Changes | None, after: dict[str, Entry] | None) -> None:
    """Record which paths the run changed and what they held when it ended (None: golem
    could not tell, and undo compares with the snapshot instead)."""
    manifest = _read(path)
    if changes is not None and after is not None:
        manifest["changed"] = {p: (vars(after[p]) if p in after else None) for p in changes.all}
    manifest["ended"] = time.time()
    _write(path, manifest)


def find_run(root: str, run_id: str | None) -> str:
    """The directory of run `run_id`, or of the newest finished run in workspace `root`."""
    runs = os.path.join(state_dir(), "runs")
    if run_id:
        path = os.path.join(runs, os.path.basename(run_id))
        if not os.path.isdir(path):
            raise UsageError(f"no run {run_id!r} in {runs}")
        return path
    names = sorted(os.listdir(runs), reverse=True) if os.path.isdir(runs) else []
    for name in names:
        path = os.path.join(runs, name)
        try:
            manifest = _read(path)
        except UsageError:
            continue
        if manifest.get("workspace") == root and not manifest.get("undone") and \
                os.path.exists(os.path.join(path, "snapshot.json")):
            return path
    raise UsageError(f"no run to undo for workspace {root}")


def _current(writer: tree.Writer, rel: str) -> tuple[str, int] | None:
    """(sha, mode) of what `rel` holds now, as the snapshot would fingerprint it."""
    info = writer.lstat(rel)
    if info is None:
        return None
    if stat.S_ISLNK(info.st_mode):
        fd, name = writer.parent(rel)
        try:
            return "link:" + os.readlink(name, dir_fd=fd), 0
        finally:
            os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        return ("dir" if stat.S_ISDIR(info.st_mode) else "other"), 0
    mode = stat.S_IMODE(info.st_mode)
    if info.st_size > 32 * 1024 * 1024:
        return _large(info), mode
    found = tree.read_file(writer.fd, rel, 32 * 1024 * 1024 + 1)
    if found is None:
        return None
    return hashlib.sha256(found[0]).hexdigest(), mode


def entries_now(root: str, paths: list[str]) -> dict[str, Entry]:
    """What `paths` of the workspace hold now, as the snapshot's entries would say it (for
    files fingerprints leave out, such as bytecode)."""
    found = {}
    with tree.Writer(root) as writer:
        for rel in paths:
            try:
                now = _current(writer, rel)
            except (OSError, tree.TreeError):
                continue
            if now is not None:
                found[rel] = Entry(now[0], now[1], 0, False)
    return found


def _changed_now(root: str, snap: Snapshot, writer: tree.Writer) -> dict[str, dict | None]:
    """What differs from the snapshot now, when the run never recorded it. Without a walk
    (the tree may be too deep for one), every snapshot path is looked at by itself."""
    try:
        now = fingerprint(root, deps=snap.deps).entries
        return {p: (vars(now[p]) if p in now else None) for p in compare(snap.entries, now).all}
    except (tree.TreeError, OSError):
        pass
    changed: dict[str, dict | None] = {}
    for rel, entry in snap.entries.items():
        try:
            current = _current(writer, rel)
        except (OSError, tree.TreeError):
            current = ("?", 0)
        if current != (entry.sha, entry.mode):
            changed[rel] = None if current is None else {"sha": current[0], "mode": current[1],
                                                         "size": 0, "stored": False}
    return changed


def undo(path: str, force: bool = False) -> tuple[list[str], list[str]]:
    """Put back every path the run changed. Returns (restored, kept): kept paths changed
    after the run (put back with `force`), or could not be restored safely (said why)."""
    manifest = _read(path)
    if manifest.get("undone"):
        raise UsageError(f"run {manifest['id']} was already undone")
    if running(path):
        raise UsageError(f"run {manifest['id']} is still going; undo it once it has ended "
                         "(or stop it first)")
    root = manifest["workspace"]
    if not os.path.exists(os.path.join(path, "snapshot.json")):
        raise UsageError(f"run {manifest['id']} ended before it took its snapshot: it changed "
                         "nothing golem could put back")
    snap = Snapshot.load(path, os.path.join(state_dir(), "store"))
    try:
        info = os.lstat(root)
    except OSError:
        raise UsageError(f"the workspace {root} is gone") from None
    expected = manifest.get("root_id") or (list(snap.root_id) if snap.root_id else None)
    if not stat.S_ISDIR(info.st_mode) or (expected and [info.st_dev, info.st_ino] != expected):
        raise UsageError(f"{root} is no longer the directory the run worked in (it was "
                         "replaced or is a link now); nothing was put back")
    restored, kept, refused = [], [], []
    with tree.Writer(root) as writer:
        changed = manifest.get("changed")
        if changed is None:
            # the run was killed before it recorded what it changed: take every difference
            changed = _changed_now(root, snap, writer)
        for rel, at_end in sorted(changed.items()):
            try:
                current = _current(writer, rel)
            except (OSError, tree.TreeError) as exc:
                refused.append((rel, str(exc)))
                continue
            wanted = (at_end["sha"], at_end["mode"]) if at_end else None
            original = snap.entries.get(rel)
            if current == ((original.sha, original.mode) if original else None):
                continue    # already as before the run (put back by hand, or an earlier undo)
            if not force and current != wanted and manifest.get("changed") is not None:
                kept.append(rel)
                continue
            try:
                _restore(writer, rel, snap.entries.get(rel), snap)
            except (OSError, tree.TreeError, UsageError) as exc:
                refused.append((rel, getattr(exc, "strerror", None) or str(exc)))
                continue
            restored.append(rel)
            if rel not in snap.entries:
                _prune(writer, rel, snap.dirs)
    if refused:
        manifest["refused"] = [{"path": p, "why": w} for p, w in refused]
    if kept or refused:
        manifest["kept"] = kept + [p for p, _ in refused]     # the run stays open
    else:
        manifest["undone"] = time.time()
    _write(path, manifest)
    if refused:
        rel, why = refused[0]
        raise UsageError(f"undo refused {len(refused)} path(s), first {rel}: {why}; "
                         f"{len(restored)} put back, nothing written outside {root}")
    return restored, kept


def _prune(writer: tree.Writer, rel: str, existed: set[str]) -> None:
    """Remove the now-empty directories above `rel` that the run created."""
    parent = rel.rpartition("/")[0]
    while parent and parent not in existed:
        if not writer.rmdir_if_empty(parent):
            return      # not empty (or gone): keep it
        parent = parent.rpartition("/")[0]


def _restore(writer: tree.Writer, rel: str, original: Entry | None, snap: Snapshot) -> None:
    if original is None:
        writer.remove(rel)
        return
    if original.is_link:
        writer.symlink(rel, original.link_target)
        return
    data = snap.original(rel)       # hash-checked: OSError if the kept copy was changed
    if data is None:
        raise UsageError(f"{rel} was too large to keep a copy of; restore it by hand")
    writer.write(rel, data, original.mode)
