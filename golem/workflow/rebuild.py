"""The verification copy: the suite is re-run in a tree golem rebuilt, never in the workspace.

`golem fix` rebuilds it from the snapshot (every original file, from the content-addressed
store) plus only the run's allowed changes: changed paths minus protected ones, read from the
workspace; an allowed deletion stays deleted. `golem verify` starts from a `git archive`
export of the base revision instead. Either way a protected change cannot reach the evidence,
and neither can anything the snapshot does not see: `__pycache__`, other caches, new
directory symlinks. Loose bytecode (`*.pyc`, `*.pyo`) and cache directories are purged from
the copy.

Dependency trees the snapshot skips (`.venv`, `venv`, `node_modules`), and the `.git`
directory (version lookups such as setuptools-scm read it), are not copied: each is a symlink
in the copy to the workspace's own directory, and under bubblewrap that directory is bound
read-only, so the suite in the copy can import from it but not change it. golem does not
fingerprint those trees, so a change made inside them during the run is not seen.

A file over the snapshot's size limit has no kept original: it is copied from the workspace
when its content still matches the snapshot's fingerprint, and is a problem otherwise, which
makes the verdict FAILED.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from typing import Callable

from golem.tools import sandbox
from golem.workflow.snapshot import SKIP_DIRS, Changes, Entry, Snapshot
from golem.workflow.suite import SuiteResult, run_suite

DEPENDENCY_DIRS = {".venv", "venv", "node_modules", ".git"}
CACHE_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis",
              ".tox", ".nox", ".jest-cache"}
CACHE_SUFFIXES = (".pyc", ".pyo")


@dataclass
class Copy:
    """A rebuilt tree: where it is, and what is worth knowing about how it was built."""

    root: str
    workspace: str
    problems: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)      # allowed changes taken over
    left_out: list[str] = field(default_factory=list)     # protected changes not taken over
    linked: list[str] = field(default_factory=list)       # dependency trees linked in
    purged: list[str] = field(default_factory=list)       # caches removed from the copy

    def describe(self) -> str:
        """One line for the trace."""
        parts = [f"{len(self.applied)} allowed change(s) applied"]
        if self.left_out:
            parts.append(f"{len(self.left_out)} protected change(s) left out")
        if self.linked:
            parts.append("linked read-only from the workspace: " + ", ".join(self.linked))
        if self.purged:
            parts.append(f"{len(self.purged)} cache path(s) purged")
        if self.problems:
            parts.append("problems: " + "; ".join(self.problems[:3]))
        return "verification copy rebuilt: " + ", ".join(parts)


def target_for(scratch: str, workspace: str) -> str:
    """Where the copy goes: golem's scratch directory, under the workspace's own name."""
    return os.path.join(scratch, "rebuilt", os.path.basename(workspace.rstrip("/")) or "ws")


def _dest(copy: Copy, rel: str) -> str:
    """Where `rel` goes in the copy; OSError if a link on the way would lead out of it."""
    dest = os.path.join(copy.root, *rel.split("/"))
    parent = os.path.dirname(dest)
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    real, root = os.path.realpath(parent), os.path.realpath(copy.root)
    if real != root and not real.startswith(root + os.sep):
        raise OSError(f"a link on the way leads out of the copy ({real})")
    return dest


def _link(copy: Copy, rel: str, target: str) -> None:
    # an absolute link into the workspace points at the same place in the copy instead
    ws = copy.workspace
    if os.path.isabs(target) and (target == ws or target.startswith(ws + "/")):
        target = copy.root + target[len(ws):]
    dest = _dest(copy, rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    os.symlink(target, dest)


def _copy_file(source: str, dest: str, mode: int | None = None) -> str:
    """Copy a regular file without following a link, and return its SHA-256."""
    digest = hashlib.sha256()
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with open(fd, "rb") as src:
        info = os.fstat(src.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{source} is not a regular file")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as out:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
    os.chmod(dest, stat.S_IMODE(info.st_mode) if mode is None else mode)
    return digest.hexdigest()


def _take_over(copy: Copy, rel: str) -> None:
    """Put the workspace's current version of `rel` into the copy (or leave it absent)."""
    source = os.path.join(copy.workspace, *rel.split("/"))
    dest = _dest(copy, rel)
    if os.path.lexists(dest):
        os.unlink(dest)
    try:
        info = os.lstat(source)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        _link(copy, rel, os.readlink(source))
    elif stat.S_ISREG(info.st_mode):
        _copy_file(source, dest)
    elif stat.S_ISDIR(info.st_mode):
        return      # a removed file that became a directory: its files are changes of their own
    else:
        copy.problems.append(f"{rel} is not a regular file")


def _restore(copy: Copy, snap: Snapshot, rel: str, entry: Entry) -> None:
    """Put the snapshot's version of `rel` into the copy."""
    if entry.sha.startswith("link:"):
        _link(copy, rel, entry.sha[len("link:"):])
        return
    dest = _dest(copy, rel)
    if entry.stored:
        _copy_file(os.path.join(snap.directory, "store", entry.sha), dest, entry.mode)
        return
    try:
        same = _copy_file(os.path.join(copy.workspace, *rel.split("/")), dest,
                          entry.mode) == entry.sha
    except OSError:
        same = False
    if not same:
        if os.path.lexists(dest):
            os.unlink(dest)
        copy.problems.append(f"{rel} is too large to have been kept and is no longer as it "
                             "was before the run")


def link_dependencies(tree: str, workspace: str) -> list[str]:
    """Symlink each dependency tree of `workspace` (`.venv`, `node_modules`, ...) into the
    same place in `tree`, where its parent directory exists; return their relative paths."""
    linked = []
    for top, dirs, _ in os.walk(workspace):
        rel_top = os.path.relpath(top, workspace)
        for name in sorted(d for d in dirs if d in DEPENDENCY_DIRS):
            rel = name if rel_top == "." else f"{rel_top}/{name}".replace(os.sep, "/")
            dest = os.path.join(tree, *rel.split("/"))
            parent = os.path.dirname(dest)
            if os.path.isdir(parent) and not os.path.islink(parent) \
                    and not os.path.lexists(dest):
                os.symlink(os.path.join(top, name), dest)
                linked.append(rel)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
    return linked


def sources(workspace: str, linked: list[str]) -> tuple[str, ...]:
    """The workspace directories behind linked dependency trees (bound read-only)."""
    return tuple(os.path.join(workspace, *rel.split("/")) for rel in linked)


def _purge(copy: Copy) -> None:
    for top, dirs, files in os.walk(copy.root):
        rel_top = os.path.relpath(top, copy.root)
        prefix = "" if rel_top == "." else rel_top.replace(os.sep, "/") + "/"
        for name in sorted(d for d in dirs if d in CACHE_DIRS):
            path = os.path.join(top, name)
            if os.path.islink(path):
                os.unlink(path)
            else:
                shutil.rmtree(path)
            copy.purged.append(prefix + name)
        dirs[:] = [d for d in dirs if d not in CACHE_DIRS
                   and not os.path.islink(os.path.join(top, d))]
        for name in sorted(f for f in files if f.endswith(CACHE_SUFFIXES)):
            os.unlink(os.path.join(top, name))
            copy.purged.append(prefix + name)


def _safely(copy: Copy, rel: str, action: Callable[[], None]) -> None:
    try:
        action()
    except OSError as exc:
        copy.problems.append(f"{rel}: {exc.strerror or exc}")


def _finish(copy: Copy) -> Copy:
    copy.linked = link_dependencies(copy.root, copy.workspace)
    _purge(copy)
    return copy


def from_snapshot(snap: Snapshot, workspace: str, target: str, changes: Changes,
                  protected: set[str]) -> Copy:
    """Rebuild the tree at `target`: the snapshot, plus the changes not in `protected`."""
    copy = Copy(target, os.path.realpath(workspace))
    os.makedirs(target)
    allowed = set(changes.all) - protected
    copy.applied = sorted(allowed)
    copy.left_out = sorted(set(changes.all) & protected)
    # a directory that held files before the run is rebuilt as a directory even if the run
    # put a link in its place, so nothing is ever written through a link the run made
    parents = {"/".join(parts[:i]) for parts in (rel.split("/") for rel in snap.entries)
               for i in range(1, len(parts))}
    for rel in sorted(snap.dirs):
        source = os.path.join(copy.workspace, *rel.split("/"))
        if os.path.islink(source) and rel not in parents:
            _safely(copy, rel, lambda: _link(copy, rel, os.readlink(source)))
        else:
            _safely(copy, rel, lambda: os.makedirs(_dest(copy, rel), exist_ok=True))
    for rel, entry in sorted(snap.entries.items()):
        if rel not in allowed:
            _safely(copy, rel, lambda: _restore(copy, snap, rel, entry))
    for rel in sorted(allowed):
        _safely(copy, rel, lambda: _take_over(copy, rel))
    return _finish(copy)


def from_export(export: Callable[[str], None], workspace: str, target: str, changes: Changes,
                protected: set[str]) -> Copy:
    """Rebuild the tree at `target`: `export(target)` writes the base revision's files, then
    the changes not in `protected` are taken over from the workspace."""
    copy = Copy(target, os.path.realpath(workspace))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    export(target)
    allowed = set(changes.all) - protected
    copy.applied = sorted(allowed)
    copy.left_out = sorted(set(changes.all) & protected)
    for rel in sorted(allowed):
        _safely(copy, rel, lambda: _take_over(copy, rel))
    return _finish(copy)


def run_in_copy(setup, copy: Copy, label: str = "verification") -> tuple[SuiteResult, object]:
    """Run the suite in `copy` under the run's sandbox and environment; record it as `label`.

    Returns the result and the sandbox wrapper used (repeats run the same way).
    """
    wrap, _ = sandbox.wrapper(setup.options.sandbox, copy.root, setup.scratch,
                              read_only=sources(copy.workspace, copy.linked))
    setup.trace.emit("note", message=copy.describe(), applied=copy.applied,
                     left_out=copy.left_out, linked=copy.linked, purged=copy.purged)
    result = run_suite(setup.command, cwd=copy.root, env=setup.env, scratch=setup.scratch,
                       timeout=setup.options.suite_timeout, wrap=wrap)
    if copy.problems:
        reason = "the verification copy is incomplete: " + "; ".join(copy.problems[:3])
        result.problem = f"{result.problem}; {reason}" if result.problem else reason
    setup.trace.emit(label, summary=result.summary(), verified_in="copy", **result.to_json())
    return result, wrap
