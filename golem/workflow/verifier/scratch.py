"""Scratch directories, one set per phase, so nothing one phase writes reaches the next.

Each phase (the baseline, the agent's run, the verification) gets a directory of its own,
made with `mkdtemp` (mode 0700, a name nobody can predict) when the phase starts, and
removed, iteratively and without following links, when it ends. Inside it every suite run
gets a fresh HOME and TMPDIR, and golem's helpers (the unittest driver, the pytest launcher
and plugin, the node reporter) are written into a `helpers` directory that sandboxes bind
read-only. Only the agent phase's directory is ever writable inside the model's sandbox,
and it is removed before the verification starts.

Bytecode comes from a cache golem owns, written only by golem's compiler (bytecode.py): the
runner's modules and the workspace's sources, compiled by the test interpreter isolated with
`-I -S`. Every suite run, the baseline's too, gets it bound read-only through a view of its
own, so nothing a test runs can change what a later run reads. Under bubblewrap the cache is
made in the baseline's scratch for one command; unconfined, it is kept between commands
(`cache_dir`), and golem checks it is unchanged before it trusts it again, throwing it away
otherwise.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from importlib import resources

from golem.tools import tree
from golem.workflow.verifier import bytecode

HELPERS = ("evidence.py", "relocate.py", "unittest_driver.py", "pytest_launcher.py", "pytest_plugin.py",
           "node_reporter.mjs", "pytest.ini")


@dataclass
class RunScratch:
    """What one suite run writes: its HOME, TMPDIR, bytecode cache and result files."""

    root: str
    home: str
    tmp: str
    pycache: str

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, "HOME": self.home, "TMPDIR": self.tmp,
                "PYTHONPYCACHEPREFIX": self.pycache, "PYTHONNOUSERSITE": "1"}


_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)


class Phase:
    """The scratch of one phase; a context manager that removes it on the way out."""

    def __init__(self, name: str):
        self.name = name
        self.root = tempfile.mkdtemp(prefix=f"golem-{name}-")
        self._helpers: str | None = None
        self._runs = 0
        self._view_root: str | None = None

    def helpers(self) -> str:
        """The read-only directory holding golem's helpers for this phase."""
        if self._helpers is None:
            path = os.path.join(self.root, "helpers")
            os.mkdir(path, 0o700)
            package = resources.files("golem.workflow.verifier.helpers")
            for name in HELPERS:
                # a fresh name in a directory only golem can write, read for one command:
                # nothing to make atomic or durable
                fd = os.open(os.path.join(path, name), _NEW, 0o444)
                try:
                    os.fchmod(fd, 0o444)    # whatever the umask
                    data = memoryview(package.joinpath(name).read_bytes())
                    while data:
                        data = data[os.write(fd, data):]
                finally:
                    os.close(fd)
            os.chmod(path, 0o555)
            self._helpers = path
        return self._helpers

    def run(self, pycache: str | None = None) -> RunScratch:
        """A fresh HOME and TMPDIR for one run, with bytecode from `pycache` (golem's cache)
        or, without one, from a fresh empty directory."""
        self._runs += 1
        root = tempfile.mkdtemp(prefix=f"run{self._runs}-", dir=self.root)
        home, tmp = os.path.join(root, "home"), os.path.join(root, "tmp")
        os.mkdir(home, 0o700)
        os.mkdir(tmp, 0o700)
        if pycache is None:
            pycache = os.path.join(root, "pycache")
            os.mkdir(pycache, 0o700)
        return RunScratch(root, home, tmp, pycache)

    def view(self, master: str | None, tag: str | None, root: str) -> str | None:
        """A fresh bytecode view for one run of the tree at `root` (bytecode.view), outside
        the phase's directory (which the agent's sandbox may write): the run binds it
        read-only. None without a cache or bytecode for this interpreter."""
        if master is None or tag is None:
            return None
        if self._view_root is None:
            self._view_root = tempfile.mkdtemp(prefix=f"golem-{self.name}-bytecode-")
        # golem's helpers too, where the phase has them (compiled with the baseline's sources)
        helpers = [self._helpers] if self._helpers else []
        return bytecode.view(self._view_root, master, tag, [root, *helpers])

    def close(self) -> None:
        if self._helpers is not None:
            os.chmod(self._helpers, stat.S_IRWXU)
        tree.remove_tree(self.root)
        if self._view_root is not None:
            tree.remove_tree(self._view_root)

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def cache_dir(state: str, interpreter: str, workspace: str) -> str:
    """golem's bytecode cache for one interpreter and workspace, under the state directory
    `state` (made 0700, never a link)."""
    key = hashlib.sha256(f"{interpreter}\0{workspace}".encode("utf-8", "surrogateescape"))
    path = os.path.join(state, "pycache", key.hexdigest()[:24])
    os.makedirs(path, mode=0o700, exist_ok=True)
    if os.path.islink(path) or not os.path.isdir(path):
        raise OSError(f"{path} is not a directory golem made")
    return path


def cache_state(path: str) -> dict[str, str]:
    """path -> kind, size, modification and change times of every entry of a cache; for a
    link, where it points and the same of what it points to."""
    found = {}
    try:
        for item in tree.walk(path, max_depth=400):
            info = item.info
            sign = f"{item.kind}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
            if item.kind == "link":
                try:
                    target = os.readlink(item.name, dir_fd=item.dir_fd)
                    there = os.stat(item.name, dir_fd=item.dir_fd)
                    sign += (f":{target}:{there.st_mode:o}:{there.st_ino}:{there.st_size}:"
                             f"{there.st_mtime_ns}:{there.st_ctime_ns}")
                except OSError:
                    sign += ":dangling"
            found[item.rel] = sign
    except (OSError, tree.TreeError):
        found["?"] = "unreadable"
    return found
