"""The verification copy: the suite is graded in a tree golem rebuilt, never in the workspace.

`golem fix` rebuilds it from the snapshot (every original file, from the content-addressed
store) plus only the run's allowed changes, read from the workspace without following a link;
an allowed deletion stays deleted. `golem verify` starts from a `git archive` export of the
base revision instead. Either way a protected change cannot reach the evidence, and neither
can anything the snapshot does not take: caches, version-control directories, FIFOs.
Compiled code the run added or changed (extension modules, bytecode) is left out too: only
source goes in, and the suite builds from it what it needs.

The copy is written below a directory golem made for the verification after every process
of the agent's phase was gone (golem/workflow/verifier/scratch.py), through
`golem.tools.tree.Writer`: nothing is ever written through a link, not even one the copy
itself holds. Dependency trees (`.venv`, `node_modules`, ...) and `.git` are not copied:
each is a link to the workspace's own directory, which was a real directory at the snapshot
and is bound read-only into the verification sandbox; the caller checks first that the run
left them as they were.

A file over the snapshot's size limit has no kept original: it is copied (holes kept) from
the workspace when it still matches its fingerprint, and is a problem otherwise, which makes
the verdict FAILED.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Callable

from golem.tools import tree
from golem.workflow.verifier.snapshot import Changes, Snapshot, _large

# compiled code: never taken from the run into the graded copy
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll", ".pyc", ".pyo")


@dataclass
class Copy:
    """A rebuilt tree: where it is, and what is worth knowing about how it was built."""

    root: str
    workspace: str
    problems: list[str] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)      # allowed changes taken over
    left_out: list[str] = field(default_factory=list)     # protected changes not taken over
    compiled: list[str] = field(default_factory=list)     # compiled changes not taken over
    linked: list[str] = field(default_factory=list)       # dependency trees linked in

    def describe(self) -> str:
        """One line for the trace."""
        parts = [f"{len(self.applied)} allowed change(s) applied"]
        if self.left_out:
            parts.append(f"{len(self.left_out)} change(s) left out")
        if self.compiled:
            parts.append(f"{len(self.compiled)} compiled file(s) left out")
        if self.linked:
            parts.append("linked read-only from the workspace: " + ", ".join(self.linked))
        if self.problems:
            parts.append("problems: " + "; ".join(self.problems[:3]))
        return "verification copy rebuilt: " + ", ".join(parts)

    @property
    def read_only(self) -> tuple[str, ...]:
        """The workspace directories behind the linked trees (bound read-only)."""
        return tuple(os.path.join(self.workspace, *rel.split("/")) for rel in self.linked)


def compiled(rel: str) -> bool:
    """Compiled code: an extension module or bytecode."""
    name = rel.rsplit("/", 1)[-1].lower()
    return name.endswith(COMPILED_SUFFIXES) or ".so." in name


def _link_target(copy: Copy, target: str) -> str:
    # an absolute link into the workspace points at the same place in the copy instead
    ws = copy.workspace
    if os.path.isabs(target) and (target == ws or target.startswith(ws + "/")):
        return copy.root + target[len(ws):]
    return target


def _take_over(copy: Copy, writer: tree.Writer, rel: str) -> None:
    """Put the workspace's current version of `rel` into the copy (or leave it absent)."""
    parts, name = tree.split(rel)
    try:
        dir_fd = tree.open_dir(copy.workspace, parts)
    except FileNotFoundError:
        writer.remove(rel)
        return
    try:
        info = tree.lstat_at(dir_fd, name)
        if info is None:
            writer.remove(rel)
        elif stat.S_ISLNK(info.st_mode):
            writer.symlink(rel, _link_target(copy, os.readlink(name, dir_fd=dir_fd)))
        elif stat.S_ISREG(info.st_mode):
            fd, info = tree.open_file(dir_fd, name)
            try:
                writer.write(rel, mode=info.st_mode, source=fd, size=info.st_size)
            finally:
                os.close(fd)
        # a directory where a file was: its files are changes of their own
    finally:
        os.close(dir_fd)


def _restore(copy: Copy, writer: tree.Writer, snap: Snapshot, rel: str) -> None:
    """Put the snapshot's version of `rel` into the copy."""
    entry = snap.entries[rel]
    if entry.is_link:
        writer.symlink(rel, _link_target(copy, entry.link_target))
        return
    if entry.stored:
        writer.write(rel, snap.original(rel), entry.mode)     # hash-checked
        return
    # too large to have been kept: the workspace's file, if it is still the same one
    parts, name = tree.split(rel)
    try:
        dir_fd = tree.open_dir(copy.workspace, parts)
        try:
            src, info = tree.open_file(dir_fd, name)
        finally:
            os.close(dir_fd)
    except (OSError, tree.TreeError):
        src, info = -1, None
    try:
        if info is None or _large(info) != entry.sha:
            copy.problems.append(f"{rel} is too large to have been kept and is no longer as "
                                 "it was before the run")
            return
        writer.write(rel, mode=entry.mode, source=src, size=info.st_size)
        if _large(os.fstat(src)) != entry.sha:
            writer.remove(rel)
            copy.problems.append(f"{rel} changed while it was copied")
    finally:
        if src >= 0:
            os.close(src)


def _safely(copy: Copy, rel: str, action: Callable[[], None]) -> None:
    try:
        action()
    except (OSError, tree.TreeError) as exc:
        copy.problems.append(f"{rel}: {getattr(exc, 'strerror', None) or exc}")


def _link_trees(copy: Copy, writer: tree.Writer, names: list[str]) -> None:
    for name in names:
        source = os.path.join(copy.workspace, name)
        info = os.lstat(source) if os.path.lexists(source) else None
        if info is None or not stat.S_ISDIR(info.st_mode):
            copy.problems.append(f"{name} is no longer a real directory in the workspace")
            continue
        if writer.lstat(name) is not None:
            continue        # the tree itself holds something of that name: keep it
        _safely(copy, name, lambda: writer.symlink(name, source))
        copy.linked.append(name)


def _split_allowed(copy: Copy, changes: Changes, exclude: set[str]) -> set[str]:
    allowed = set(changes.all) - exclude
    copy.compiled = sorted(p for p in allowed if compiled(p) and p not in changes.removed)
    allowed -= set(copy.compiled)
    copy.applied = sorted(allowed)
    copy.left_out = sorted(set(changes.all) & exclude)
    return allowed


def from_snapshot(snap: Snapshot, workspace: str, target: str, changes: Changes,
                  exclude: set[str], trees: list[str]) -> Copy:
    """Rebuild the tree at `target`: the snapshot, plus the changes not in `exclude`, with
    the dependency trees `trees` linked in."""
    copy = Copy(target, os.path.realpath(workspace))
    os.mkdir(target, 0o755)
    allowed = _split_allowed(copy, changes, exclude)
    with tree.Writer(target) as writer:
        for rel in sorted(snap.dirs, key=lambda r: r.count("/")):
            _safely(copy, rel, lambda: writer.mkdir(rel))
        for rel in sorted(snap.entries):
            if rel not in allowed:
                _safely(copy, rel, lambda: _restore(copy, writer, snap, rel))
        kept = {rel for rel in snap.entries if rel not in allowed}
        for rel in sorted(allowed):
            entry_dir = rel + "/"
            if rel in snap.dirs and any(k.startswith(entry_dir) for k in kept):
                copy.problems.append(f"{rel}: the run put something else in place of a "
                                     "directory that holds files it did not change")
                continue
            _safely(copy, rel, lambda: _take_over(copy, writer, rel))
        _link_trees(copy, writer, trees)
    return copy


def from_export(export: Callable[[str], None], workspace: str, target: str, changes: Changes,
                exclude: set[str], trees: list[str]) -> Copy:
    """Rebuild the tree at `target`: `export(target)` writes the base revision's files, then
    the changes not in `exclude` are taken over from the workspace."""
    copy = Copy(target, os.path.realpath(workspace))
    export(target)
    allowed = _split_allowed(copy, changes, exclude)
    with tree.Writer(target) as writer:
        for rel in sorted(allowed):
            _safely(copy, rel, lambda: _take_over(copy, writer, rel))
        _link_trees(copy, writer, trees)
    return copy
