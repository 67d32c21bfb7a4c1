"""Run directories: where golem keeps what it needs to put a workspace back (`golem undo`).

Each run that may change files gets a directory under the state directory
(`$GOLEM_STATE_DIR`, else `$XDG_STATE_HOME/golem`, else `~/.local/state/golem`), outside the
workspace: `runs/<id>/snapshot.json` and `store/` hold every file as it was before the run;
`run.json` names the workspace and, once the run ends, the paths it changed and their content
at that moment, so `undo` never overwrites work done after the run without being told to.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time

from golem.errors import UsageError
from golem.workflow.snapshot import Changes, Entry, Snapshot, compare, fingerprint


def state_dir() -> str:
    base = os.environ.get("GOLEM_STATE_DIR")
    if not base:
        xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                               ".local", "state")
        base = os.path.join(xdg, "golem")
    return base


def new_run(root: str) -> tuple[str, str]:
    """A fresh run id and its directory, recorded as belonging to workspace `root`."""
    run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)
    path = os.path.join(state_dir(), "runs", run_id)
    os.makedirs(path, mode=0o700)
    _write(path, {"id": run_id, "workspace": root, "started": time.time(), "changed": None})
    return run_id, path


def _write(path: str, manifest: dict) -> None:
    tmp = os.path.join(path, "run.json.part")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=1)
    os.replace(tmp, os.path.join(path, "run.json"))


def _read(path: str) -> dict:
    try:
        with open(os.path.join(path, "run.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        raise UsageError(f"run directory {path} is missing or damaged") from None


def finish_run(path: str, changes: Changes, after: dict[str, Entry]) -> None:
    """Record which paths the run changed and what they held when it ended."""
    manifest = _read(path)
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


def undo(path: str, force: bool = False) -> tuple[list[str], list[str]]:
    """Put back every path the run changed. Returns (restored, skipped-because-edited-since)."""
    manifest = _read(path)
    if manifest.get("undone"):
        raise UsageError(f"run {manifest['id']} was already undone")
    root = manifest["workspace"]
    snap = Snapshot.load(path)
    now = fingerprint(root)
    changed = manifest.get("changed")
    if changed is None:
        # the run was killed before it could record what it changed: take every difference
        changed = {p: (vars(now[p]) if p in now else None)
                   for p in compare(snap.entries, now).all}
    restored, skipped = [], []
    for rel, at_end in sorted(changed.items()):
        current = now.get(rel)
        expected = Entry(**at_end) if at_end else None
        if not force and (current and (current.sha, current.mode)) != \
                (expected and (expected.sha, expected.mode)):
            skipped.append(rel)
            continue
        _restore(root, rel, snap.entries.get(rel), snap)
        restored.append(rel)
        if rel not in snap.entries and snap.dirs:
            _prune(root, rel, snap.dirs)
    if skipped:
        manifest["kept"] = skipped     # the run stays open for `undo -force`
    else:
        manifest["undone"] = time.time()
    _write(path, manifest)
    return restored, skipped


def _prune(root: str, rel: str, existed: set[str]) -> None:
    """Remove the now-empty directories above `rel` that the run created."""
    parent = rel.rpartition("/")[0]
    while parent and parent not in existed:
        try:
            os.rmdir(os.path.join(root, *parent.split("/")))
        except OSError:
            return      # not empty (or gone): keep it
        parent = parent.rpartition("/")[0]


def _restore(root: str, rel: str, original: Entry | None, snap: Snapshot) -> None:
    full = os.path.join(root, *rel.split("/"))
    if original is None:
        if os.path.lexists(full):
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
        return
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if original.sha.startswith("link:"):
        if os.path.lexists(full):
            os.unlink(full)
        os.symlink(original.sha[5:], full)
        return
    data = snap.original(rel)
    if data is None:
        raise UsageError(f"{rel} was too large to keep a copy of; restore it by hand")
    tmp = f"{full}.golem-undo-{secrets.token_hex(4)}"
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, original.mode)
    if os.path.lexists(full) and os.path.isdir(full) and not os.path.islink(full):
        shutil.rmtree(full)
    os.replace(tmp, full)
