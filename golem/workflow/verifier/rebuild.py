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
itself holds.

What a copy of the workspace is made of is described once, by a `Layout`, for every copy
golem makes (the verification copy of `fix`, an attempt's private copy and its verification
copy, `pick`'s copies, `verify`'s export). Dependency trees (`.venv`, `node_modules`, ...)
and a `.git` directory are not copied: each is a link to the real workspace's own directory,
which was a real directory at the snapshot and is bound read-only into the sandbox; the
caller checks first that the run left them as they were. A copy of a copy links them from
the real workspace too, never through the links of the copy it was made from. A `.git` file
(a worktree, or a submodule checked out on its own) is written into the copy naming the real
git directory by its absolute path, which is bound read-only with its common directory. A
change a run made to the top-level `.git` never reaches a copy: the copy's is the layout's.

Where the file system has reflinks (Btrfs, XFS, bcachefs), a kept original goes into a copy
as a clone of the store's file (`tree.clone_fd`), checked against its hash first: the copy
shares the data until a run writes it, so a copy costs what the run changed; elsewhere (ext4,
tmpfs) it is written whole. A kept original missing from the store is a problem of the copy.

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


@dataclass(frozen=True)
class Layout:
    """How a copy of the real workspace `workspace` is made: the files are copied; the
    top-level directories in `trees` (dependency trees, a `.git` directory) are linked to
    the workspace's own, read-only; with `gitdir` (the workspace's `.git` is a file: a
    worktree), the copy's `.git` is a file naming that directory, and `outside` (it and its
    common directory) is bound read-only."""

    workspace: str
    trees: tuple[str, ...] = ()
    gitdir: str | None = None
    outside: tuple[str, ...] = ()

    @classmethod
    def of(cls, root: str, deps: list[str] | tuple[str, ...]) -> Layout:
        """The layout of the workspace at `root`, whose dependency trees are `deps`."""
        root = os.path.realpath(root)
        trees, gitdir, outside = list(deps), None, []
        dot_git = os.path.join(root, ".git")
        try:
            info = os.lstat(dot_git)
        except OSError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            trees.append(".git")
        elif info is not None and stat.S_ISREG(info.st_mode):
            gitdir = _gitdir(dot_git)
            if gitdir is not None:
                outside = [gitdir] + [d for d in [_commondir(gitdir)] if d and d != gitdir]
                outside = [d for d in outside if not (d + "/").startswith(root + "/")]
        return cls(root, tuple(trees), gitdir, tuple(outside))

    @property
    def managed(self) -> tuple[str, ...]:
        """Top-level names a copy gets from the layout, never from the tree it is copied
        from or the run's changes."""
        return self.trees + ((".git",) if self.gitdir else ())

    @property
    def read_only(self) -> tuple[str, ...]:
        """Every real directory a copy reaches through the layout (bound read-only)."""
        return tuple(os.path.join(self.workspace, name) for name in self.trees) + self.outside

    def foreign(self, rel: str) -> bool:
        """`rel` is the layout's, not the tree's: in a linked tree, or the `.git` file."""
        return rel.split("/", 1)[0] in self.trees or (self.gitdir is not None and rel == ".git")


def _gitdir(path: str) -> str | None:
    """The git directory a `.git` file names (`gitdir: DIR`), absolute; None if none."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            where = line[len("gitdir:"):].strip()
            full = os.path.realpath(os.path.join(os.path.dirname(path), where))
            # only a git directory is ever bound into a sandbox, never any directory named
            return full if os.path.isfile(os.path.join(full, "HEAD")) else None
    return None


def _commondir(gitdir: str) -> str | None:
    """A worktree's git directory names the repository's own in `commondir`."""
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8",
                  errors="replace") as handle:
            where = handle.read(4096).strip()
    except OSError:
        return None
    full = os.path.realpath(os.path.join(gitdir, where))
    return full if os.path.isdir(os.path.join(full, "objects")) else None


def layout_for(workspace: str, trees) -> Layout:
    """`trees` as a Layout: a Layout stays as it is; a list of names is linked from
    `workspace` itself."""
    if isinstance(trees, Layout):
        return trees
    return Layout(os.path.realpath(workspace), tuple(trees))


@dataclass
class Copy:
    """A rebuilt tree: where it is, and what is worth knowing about how it was built.
    `workspace` is the tree changes are taken from; the layout says what is linked."""

    root: str
    workspace: str
    layout: Layout | None = None
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
        """The real directories behind the linked trees and the `.git` file (bound
        read-only)."""
        layout = self.layout or Layout(self.workspace)
        found = tuple(os.path.join(layout.workspace, name) for name in self.linked
                      if name in layout.trees)
        return found + (layout.outside if layout.gitdir and ".git" in self.linked else ())


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
        fd = snap.open_original(rel)
        try:
            data = snap.checked(rel, fd)            # hash-checked, then shared or written
            if data is None:
                raise OSError(f"the kept copy of {rel} is missing from golem's store")
            writer.write(rel, data, entry.mode, clone=fd)
        finally:
            if fd is not None:
                os.close(fd)
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


def _link_trees(copy: Copy, writer: tree.Writer, layout: Layout) -> None:
    """Link the layout's trees from the real workspace; write its `.git` file."""
    for name in layout.trees:
        source = os.path.join(layout.workspace, name)
        info = os.lstat(source) if os.path.lexists(source) else None
        if info is None or not stat.S_ISDIR(info.st_mode):
            copy.problems.append(f"{name} is no longer a real directory in the workspace")
            continue
        if writer.lstat(name) is not None:
            continue        # the tree itself holds something of that name: keep it
        _safely(copy, name, lambda: writer.symlink(name, source))
        copy.linked.append(name)
    if layout.gitdir:
        text = f"gitdir: {layout.gitdir}\n".encode("utf-8", "surrogateescape")
        _safely(copy, ".git", lambda: writer.write(".git", text, 0o644))
        copy.linked.append(".git")


def _split_allowed(copy: Copy, changes: Changes, exclude: set[str]) -> set[str]:
    exclude = exclude | {p for p in changes.all if copy.layout and copy.layout.foreign(p)}
    allowed = set(changes.all) - exclude
    copy.compiled = sorted(p for p in allowed if compiled(p) and p not in changes.removed)
    allowed -= set(copy.compiled)
    copy.applied = sorted(allowed)
    copy.left_out = sorted(set(changes.all) & exclude)
    return allowed


def from_snapshot(snap: Snapshot, workspace: str, target: str, changes: Changes,
                  exclude: set[str], trees: Layout | list[str]) -> Copy:
    """Rebuild the tree at `target`: the snapshot, plus the changes to `workspace` not in
    `exclude`, made as the layout `trees` says (a list of names: those trees of
    `workspace` linked in)."""
    layout = layout_for(workspace, trees)
    copy = Copy(target, os.path.realpath(workspace), layout)
    os.mkdir(target, 0o755)
    allowed = _split_allowed(copy, changes, exclude)
    managed = set(layout.managed)
    with tree.Writer(target) as writer:
        for rel in sorted(snap.dirs, key=lambda r: r.count("/")):
            _safely(copy, rel, lambda: writer.mkdir(rel))
        for rel in sorted(snap.entries):
            if rel not in allowed and rel not in managed:
                _safely(copy, rel, lambda: _restore(copy, writer, snap, rel))
        kept = {rel for rel in snap.entries if rel not in allowed}
        for rel in sorted(allowed):
            entry_dir = rel + "/"
            if rel in snap.dirs and any(k.startswith(entry_dir) for k in kept):
                copy.problems.append(f"{rel}: the run put something else in place of a "
                                     "directory that holds files it did not change")
                continue
            _safely(copy, rel, lambda: _take_over(copy, writer, rel))
        _link_trees(copy, writer, layout)
    return copy


def from_export(export: Callable[[str], None], workspace: str, target: str, changes: Changes,
                exclude: set[str], trees: Layout | list[str]) -> Copy:
    """Rebuild the tree at `target`: `export(target)` writes the base revision's files, then
    the changes not in `exclude` are taken over from the workspace; the rest as the layout
    `trees` says (as for `from_snapshot`)."""
    layout = layout_for(workspace, trees)
    copy = Copy(target, os.path.realpath(workspace), layout)
    export(target)
    allowed = _split_allowed(copy, changes, exclude)
    with tree.Writer(target) as writer:
        for rel in sorted(allowed):
            _safely(copy, rel, lambda: _take_over(copy, writer, rel))
        _link_trees(copy, writer, layout)
    return copy
