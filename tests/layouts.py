"""Real workspaces as users have them, built once here for every test that needs one.

Each builder makes a project in `tmp/name` from `files`, committed with git where the layout
is a git layout, and returns the directory golem is pointed at:

    plain           a directory, no version control
    git             a git checkout, committed
    git+venv        a git checkout with a `.venv` inside that `.gitignore` names
    git+venv-seen   the same `.venv`, not ignored (an untracked directory git reports)
    worktree+venv   a `git worktree` of a repository (its `.git` is a file), a `.venv` inside
    submodule+venv  a git checkout with a submodule (a library the tests import) and a `.venv`
    node_modules    a git checkout with an ignored `node_modules` tree
    venv-outside    a git checkout whose virtual environment lives beside it, not inside

The virtual environments are real (`python3 -m venv --without-pip`); what a test wants in
one is installed by hand (`install`: the distributions this Python has, linked into the
environment's site-packages), so nothing needs the network.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig

from tests.fixtures import git, write_files

LAYOUTS = ("plain", "git", "git+venv", "git+venv-seen", "worktree+venv", "submodule+venv",
           "node_modules", "venv-outside")


def commit(root: str, message: str = "initial") -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def checkout(tmp: str, files: dict[str, str], name: str = "repo",
             ignore: tuple[str, ...] = ()) -> str:
    """A committed git repository holding `files` (and a `.gitignore` naming `ignore`)."""
    root = os.path.join(tmp, name)
    os.makedirs(root)
    extra = {".gitignore": "".join(f"{item}\n" for item in ignore)} if ignore else {}
    write_files(root, {**files, **extra})
    git(root, "init", "-q", "-b", "main")
    commit(root)
    return root


def venv(path: str) -> str:
    """A real virtual environment at `path`; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True,
                   capture_output=True)
    return os.path.join(path, "bin", "python")


def install(path: str, *names: str) -> None:
    """The distributions `names` (as this Python has them installed) installed by hand into
    the virtual environment at `path`: their top-level packages and metadata linked into its
    site-packages, as pip would have put them there."""
    rel = os.path.relpath(sysconfig.get_path("purelib"), sysconfig.get_path("data"))
    site = os.path.join(path, rel)
    for name in names:
        dist = importlib.metadata.distribution(name)
        tops = {str(f).split("/", 1)[0] for f in dist.files or ()
                if not str(f).startswith("..") and "__pycache__" not in str(f)}
        for top in sorted(tops):
            source = os.path.join(str(dist.locate_file("")), top)
            if os.path.exists(source) and not os.path.exists(os.path.join(site, top)):
                os.symlink(source, os.path.join(site, top))


def node_modules(root: str) -> None:
    """A small `node_modules` tree, as npm leaves one."""
    write_files(root, {"node_modules/left-pad/package.json": '{"name": "left-pad"}\n',
                       "node_modules/left-pad/index.js": "module.exports = (s) => s;\n",
                       "node_modules/.package-lock.json": "{}\n"})


def worktree(tmp: str, files: dict[str, str], name: str = "repo") -> str:
    """A `git worktree` (its `.git` is a file) of a repository holding `files`."""
    main = checkout(tmp, files, name=f"{name}-main", ignore=(".venv/",))
    root = os.path.join(tmp, name)
    git(main, "worktree", "add", "-q", "-b", "work", root)
    return root


def submodule(tmp: str, files: dict[str, str], name: str = "repo",
              library: dict[str, str] | None = None) -> str:
    """A checkout of `files` with a submodule `vendor/lib` holding `library`."""
    lib = checkout(tmp, library or {"lib/__init__.py": "VALUE = 1\n"}, name=f"{name}-lib")
    root = checkout(tmp, files, name=name, ignore=(".venv/",))
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib")
    commit(root, "add the submodule")
    return root


def build(layout: str, tmp: str, files: dict[str, str], name: str = "repo") -> str:
    """The workspace of `layout` (one of LAYOUTS) holding `files`; returns its directory."""
    if layout == "plain":
        root = os.path.join(tmp, name)
        os.makedirs(root)
        write_files(root, files)
        return root
    if layout == "git":
        return checkout(tmp, files, name)
    if layout == "git+venv":
        root = checkout(tmp, files, name, ignore=(".venv/",))
        venv(os.path.join(root, ".venv"))
        return root
    if layout == "git+venv-seen":
        root = checkout(tmp, files, name)
        venv(os.path.join(root, ".venv"))
        return root
    if layout == "worktree+venv":
        root = worktree(tmp, files, name)
        venv(os.path.join(root, ".venv"))
        return root
    if layout == "submodule+venv":
        root = submodule(tmp, files, name)
        venv(os.path.join(root, ".venv"))
        return root
    if layout == "node_modules":
        root = checkout(tmp, files, name, ignore=("node_modules/",))
        node_modules(root)
        return root
    if layout == "venv-outside":
        root = checkout(tmp, files, name)
        venv(os.path.join(tmp, f"{name}-env"))
        return root
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
