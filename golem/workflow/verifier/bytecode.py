"""Bytecode golem compiles for the workspace's own sources, so graded runs start warm.

Python looks for a module's bytecode under the `pycache_prefix` each run is given, at
PREFIX/<the source's directory>/<name>.<tag>.pyc. golem's cache (scratch.cache_dir) holds
the standard library's and the runner's modules at their own paths (the warm-up). The
workspace's sources are somewhere else in every run (each graded run has a copy of its own),
so golem keeps their bytecode by content instead: `@code/<tag>/<sha256 of the source>.pyc`,
written by `compile_sources`, a process of golem's own (the test interpreter, isolated with
`-I -S`, so nothing of the workspace, the environment or site-packages runs in it) that
compiles the bytes golem read and hashed, never a path. Only a baseline adds to it.

Each run is then given a `view`: a fresh directory, bound read-only into the sandbox, whose
entries are symbolic links into golem's cache, with the bytecode of every source of the run's tree placed
where Python looks for it. The bytecode is hash-checked (PEP 552): Python compares the
source's hash with the one recorded in the file before it uses it, so bytecode placed for a
file that has changed since (an edit of the agent's, a changed file in a verification copy)
is never run; Python compiles that file in memory, for that run only. Where commands run
unconfined, the cache, this part too, is checked unchanged (sizes, times, change times)
before it is trusted again (scratch.cache_state).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile

from golem.tools import process, tree
from golem.workflow.verifier.snapshot import CACHE_DIRS, DEPENDENCY_NAMES, VCS_NAMES

CODE = "@code"                  # the content-keyed part of golem's cache
MAX_SOURCES = 50_000            # a tree with more sources is left to Python
MAX_SOURCE = 8 * 1024 * 1024    # as is a larger source
BATCH = 64 * 1024 * 1024        # bytes of source handed to one compiling process

# Runs in the test interpreter: argv[1] is golem's batch (key, name, source bytes), argv[2]
# the directory it writes `<key>.pyc` into. A source that does not compile is left out.
COMPILE = r"""
import importlib._bootstrap_external as external, importlib.util, marshal, os, sys
with open(sys.argv[1], "rb") as handle:
    batch = marshal.load(handle)
out = sys.argv[2]
for key, name, source in batch:
    try:
        code = compile(source, name, "exec", dont_inherit=True)
        data = external._code_to_hash_pyc(code, importlib.util.source_hash(source), True)
    except Exception:
        continue
    part = os.path.join(out, "." + key + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(part, os.path.join(out, key + ".pyc"))
"""


def _pruned(rel: str, name: str) -> bool:
    return (name in VCS_NAMES or name in CACHE_DIRS or name in DEPENDENCY_NAMES
            or name.startswith("."))


def sources(root: str, keep=lambda key: False) -> tuple[dict[str, str], dict[str, tuple]]:
    """Every Python source below `root` (not in a dependency tree, a cache, a version-control
    or hidden directory; never through a link): path -> content key; and for each key
    `keep(key)` asks for, the source itself (its path and bytes). ({}, {}) for a tree too big
    or that cannot be walked: Python then compiles as it would without golem."""
    found: dict[str, str] = {}
    wanted: dict[str, tuple] = {}
    try:
        for item in tree.walk(root, _pruned):
            if item.kind != "file" or not item.name.endswith(".py") \
                    or item.info.st_size > MAX_SOURCE:
                continue
            if len(found) >= MAX_SOURCES:
                return {}, {}
            try:
                fd = os.open(item.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=item.dir_fd)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(MAX_SOURCE + 1)
            if len(data) > MAX_SOURCE:
                continue
            key = hashlib.sha256(data).hexdigest()
            found[item.rel] = key
            if key not in wanted and keep(key):
                wanted[key] = (os.path.join(root, item.rel), data)
    except (OSError, tree.TreeError):
        return {}, {}
    return found, wanted


def code_dir(master: str, tag: str) -> str:
    return os.path.join(master, CODE, tag)


def compile_sources(interpreter: str, tag: str, master: str, root: str, scratch: str,
                    env: dict[str, str], wrap=None, timeout: float = 300) -> int:
    """Compile every source below `root` that golem's cache lacks into it, in processes of
    the test interpreter `interpreter` (cache tag `tag`) isolated from everything but the
    standard library. Returns how many sources were new. A failure costs time, never
    correctness: what is missing Python compiles itself."""
    out = code_dir(master, tag)
    try:
        os.makedirs(out, mode=0o700, exist_ok=True)
        have = set(os.listdir(out))
    except OSError:
        return 0
    _, wanted = sources(root, lambda key: key + ".pyc" not in have)
    batches, batch, size = [], [], 0
    for key, (path, data) in wanted.items():
        batch.append((key, path, data))
        size += len(data)
        if size >= BATCH:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    for number, batch in enumerate(batches):
        try:
            fd, path = tempfile.mkstemp(prefix=f"compile{number}-", suffix=".marshal",
                                        dir=scratch)
            with os.fdopen(fd, "wb") as handle:
                marshal.dump(batch, handle)
        except OSError:
            return 0
        try:
            process.run([interpreter, "-I", "-S", "-B", "-c", COMPILE, path, out], cwd=scratch,
                        env=env, timeout=timeout, cap=20_000, wrap=wrap)
        except OSError:
            pass
        finally:
            os.unlink(path)
    return len(wanted)


def view(where: str, master: str, tag: str, roots: list[str]) -> str | None:
    """A fresh directory below `where` to give a run as its `pycache_prefix`: every entry of
    golem's cache `master` (linked), and for each tree in `roots` the bytecode of each of
    its sources the cache holds, where Python looks for it. None when the cache holds no
    bytecode for this interpreter (the caller then gives the cache itself)."""
    code = code_dir(master, tag)
    try:
        have = set(os.listdir(code))
    except OSError:
        return None
    placed: dict[str, str] = {}         # path in the view -> bytecode in the cache
    for root in roots:
        found, _ = sources(root)
        for rel, key in found.items():
            if key + ".pyc" not in have:
                continue
            directory, name = os.path.split(rel)
            for top in {os.path.abspath(root), os.path.realpath(root)}:
                where_in = os.path.join(top, directory).lstrip(os.sep)
                placed[os.path.join(where_in, f"{name[:-3]}.{tag}.pyc")] = \
                    os.path.join(code, key + ".pyc")
    needed: dict = {}                   # the directories to make, as a tree of names
    for path in placed:
        node = needed
        for part in os.path.dirname(path).split(os.sep):
            node = node.setdefault(part, {})
    target = tempfile.mkdtemp(prefix="bytecode-", dir=where)
    try:
        _merge(target, master, needed, top=True)
        for path, cached in placed.items():
            # a link by name: a hard link would change the cached file's change time, which
            # is how golem tells that something else wrote its cache
            os.symlink(cached, os.path.join(target, path))
    except OSError:
        tree.remove_tree(target)
        return None
    return target


def _merge(target: str, source: str | None, needed: dict, top: bool = False) -> None:
    """Fill `target` with links to every entry of `source` but those `needed` names as
    directories of its own, which are made and filled the same way."""
    if source is not None:
        try:
            names = os.listdir(source)
        except OSError:
            names = []
        for name in names:
            if name in needed or (top and name == CODE):
                continue
            os.symlink(os.path.join(source, name), os.path.join(target, name))
    for name, below in needed.items():
        path = os.path.join(target, name)
        os.mkdir(path, 0o700)
        inner = os.path.join(source, name) if source is not None else None
        if inner is not None and (os.path.islink(inner) or not os.path.isdir(inner)):
            inner = None
        _merge(path, inner, below)
