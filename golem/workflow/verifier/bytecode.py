"""Bytecode golem compiles itself, so graded runs start warm.

Python looks for a module's bytecode under the `pycache_prefix` each run is given, at
PREFIX/<the source's directory>/<name>.<tag>.pyc. golem's cache holds two kinds. The
runner's modules (the standard library's and those of unittest or pytest, which every run
finds at the same paths) are placed at those paths (`compile_modules`, given the list
`discover` asks the test interpreter for, and after the baseline the list of every module
its run loaded, from golem's driver or plugin: the suite's dependencies): a link to the bytecode installed beside the source
where there is one, else compiled. The workspace's sources are somewhere else in
every run (each graded run has a copy of its own), so golem keeps their bytecode by
content: `@code/<tag>/<sha256 of the source>.pyc` (`compile_sources`). What golem compiles
is written by one kind of process only: the test interpreter isolated with `-I -S` (nothing
of the workspace, the environment or site-packages runs in it), handed the bytes golem read,
never a path, and writing hash-checked bytecode (PEP 552). A workspace source whose
compiling warns is left out: a run that makes warnings errors must see them, as it would
compiling the source. pytest's rewriting of the test modules the baseline's pytest rewrote
is kept by content too (`@pytest/<tag>/<sha256>-<pytest's version>.pyc`, `rewrite_tests`):
pytest's own rewriter makes it, in the test interpreter with `-I -S` and pytest's
installation on its path, handed the bytes golem read, and golem's pytest plugin takes it
for a source of the same content instead of rewriting it in every graded run.

Each run is then given a `view`: a fresh directory, bound read-only into the sandbox, whose
entries are symbolic links into golem's cache, with the bytecode of every source of the
run's tree placed where Python looks for it. Python compares each source's hash with the one
recorded in its bytecode before it uses it, so bytecode placed for a file that has changed
since (an edit of the agent's, a changed file in a verification copy) is never run; Python
compiles that file in memory, for that run only. The cache, with what its links point to, is
checked unchanged (sizes, times, change times) before it is trusted again
(scratch.cache_state).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import marshal
import os
import stat
import tempfile
import threading

from golem.core import cancel
from golem.tools import process, tree
from golem.workflow.verifier.scripts import script
from golem.workflow.verifier.snapshot import CACHE_DIRS, DEPENDENCY_NAMES, VCS_NAMES

CODE = "@code"                  # the content-keyed part of golem's cache
REWRITTEN = "@pytest"           # test modules as pytest's assertion rewriter makes them
REWRITER = os.path.join("_pytest", "assertion", "rewrite.py")
MAX_SOURCES = 50_000            # a tree with more sources is left to Python
MAX_SOURCE = 8 * 1024 * 1024    # as is a larger source
BATCH = 64 * 1024 * 1024        # bytes of source handed to one compiling process
MAX_WORKERS = 8                 # compiling processes at once, at most one per CPU ...
MIN_SHARE = 256 * 1024          # ... each with at least this much source to compile

# the scripts golem runs in the test interpreter (helpers/*.py, read as text, run with -c)
COMPILE, REWRITE, DISCOVER = (script(n) for n in ("compile_sources.py", "rewrite_tests.py",
                                                   "discover.py"))





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


def compile_sources(interpreter: str, tag: str, master: str, roots: list[str], scratch: str,
                    env: dict[str, str], wrap=None, timeout: float = 300,
                    into: str | None = None) -> int:
    """Compile every source below the trees `roots` that golem's cache lacks into it, in
    processes of the test interpreter `interpreter` (cache tag `tag`) isolated from
    everything but the standard library; or, given `into` (a directory only those processes
    may write), into it, for `place_compiled` to move into the cache. Returns how many
    sources were new. A failure costs time, never correctness: what is missing Python
    compiles itself."""
    out = code_dir(master, tag)
    try:
        if into is None:
            os.makedirs(out, mode=0o700, exist_ok=True)
        have = set(os.listdir(out)) if os.path.isdir(out) else set()
    except OSError:
        return 0
    if into is not None:    # golem's cache is left as it is, for its state to be compared
        out = into
    wanted: dict[str, tuple] = {}
    for root in roots:
        wanted.update(sources(root, lambda key: key + ".pyc" not in have
                              and key not in wanted)[1])
    _compile(interpreter, out, [(key + ".pyc", path, data, True)
                                for key, (path, data) in wanted.items()],
             scratch, env, wrap, timeout)
    return len(wanted)


def place_compiled(out: str, master: str, tag: str) -> int:
    """Copy into golem's cache what `compile_sources` compiled into `out`: each regular file
    named as it names them (a SHA-256 in hex, `.pyc`), never through a link."""
    names = set()
    try:
        for name in os.listdir(out):
            key, dot, ext = name.partition(".")
            if ext == "pyc" and len(key) == 64 and all(c in "0123456789abcdef" for c in key):
                names.add(name)
    except OSError:
        return 0
    return _place(out, code_dir(master, tag), names)


def discover(interpreter: str, names: list[str], cwd: str, env: dict[str, str],
             wrap=None, timeout: float = 120) -> list[str]:
    """The source files of the modules the test interpreter loads importing `names` as a
    run would. What it says is only a list of paths to consider: golem reads and compiles
    them itself (compile_modules)."""
    try:
        done = process.run([interpreter, "-I", "-B", "-c", DISCOVER, *names], cwd=cwd,
                           env=env, timeout=timeout, cap=8_000_000, wrap=wrap)
        files = json.loads(done.output.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return []
    if not isinstance(files, list):
        return []
    return [f for f in files[:MAX_SOURCES] if isinstance(f, str)]


def imported(directory: str) -> set[str]:
    """The modules the Python files in `directory` (golem's helpers) import, anywhere in
    them: the runner's side of a graded run, for `discover` to list too."""
    found: set[str] = set()
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return found
    for name in names:
        if not name.endswith(".py"):
            continue
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                tree_ = ast.parse(handle.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree_):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
    return found


def compile_modules(interpreter: str, tag: str, master: str, files: list[str],
                    within: list[str], root: str, scratch: str, env: dict[str, str],
                    wrap=None, timeout: float = 300) -> int:
    """Compile the sources `files` (what `discover` listed) into golem's cache at the paths
    Python looks for them under its `pycache_prefix`, hash-checked. Only Python sources that
    lie in the directories `within` (the interpreter's own trees and the workspace's
    dependency trees, which every run sees anyway) are read; the workspace's own sources
    (below `root`, as `sources` finds them) are left to `compile_sources`, and those the cache
    already holds are left as they are. Returns how many were placed (linked or compiled)."""
    tops = [os.path.realpath(w) for w in within]
    skip = {os.path.realpath(root), os.path.abspath(root)}
    items, seen, linked = [], set(), 0
    for name in files:
        path = os.path.abspath(name)
        real = os.path.realpath(path)
        if path in seen or not path.endswith(".py") or not real.endswith(".py") \
                or not any(real == t or real.startswith(t + os.sep) for t in tops) \
                or any(_covered(top, path) or _covered(top, real) for top in skip):
            continue
        seen.add(path)
        directory, base = os.path.split(path)
        where = os.path.join(directory.lstrip(os.sep), f"{base[:-3]}.{tag}.pyc")
        if os.path.lexists(os.path.join(master, where)):
            continue
        if _link_beside(master, where, real, tag, tops):
            linked += 1
            continue
        try:
            with open(real, "rb", opener=_regular) as handle:
                data = handle.read(MAX_SOURCE + 1)
        except OSError:
            continue
        if len(data) > MAX_SOURCE:
            continue
        items.append((where, path, data, False))
    _compile(interpreter, master, items, scratch, env, wrap, timeout)
    return linked + len(items)


def rewrite_tests(interpreter: str, tag: str, master: str, files: list[str],
                  modules: list[str], within: list[str], root: str, scratch: str,
                  env: dict[str, str], wrap=None, timeout: float = 300,
                  settled=lambda: True) -> int:
    """Rewrite the test modules `files` (what the baseline's pytest rewrote, golem's cache
    lacking them: a list of paths to consider) as pytest's assertion rewriter would, into
    golem's cache by content (`@pytest/<tag>/<sha256 of the source>-<pytest's version>.pyc`),
    where golem's pytest plugin takes them instead of rewriting the source again
    (pytest_plugin.rewrite_from_cache). Only files below `root` (where `sources` looks) or in
    `within` are read. The rewriter is the one the run imported (among `modules`, in the
    directories `within`), run by the test interpreter with `-I -S` (pytest's own modules and
    the standard library's, nothing of the workspace's code), handed the bytes golem read,
    never a path; `wrap` should give it golem's cache read-only: it writes into `scratch`,
    and golem places what it wrote, under the keys it asked for, once `settled()` says the
    cache is as it was. Returns how many were placed."""
    tops = [os.path.realpath(w) for w in within]

    def inside(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == t or real.startswith(t + os.sep) for t in tops)

    rewriter = next((m for m in modules if m.endswith(os.sep + REWRITER) and inside(m)), None)
    if rewriter is None:
        return 0
    paths = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(rewriter))))]
    for name in modules:    # where pytest's own imports (pluggy, iniconfig) come from
        parts = os.path.abspath(name).split(os.sep)
        for at, part in enumerate(parts[:-1]):
            if part in ("site-packages", "dist-packages"):
                found = os.sep.join(parts[:at + 1])
                if found not in paths and inside(found):
                    paths.append(found)
                break
    items, seen = [], set()
    for name in files:
        path = os.path.abspath(name)
        if path in seen or not path.endswith(".py") or not (_covered(root, path) or inside(path)):
            continue
        seen.add(path)
        try:
            with open(path, "rb", opener=_regular) as handle:
                data = handle.read(MAX_SOURCE + 1)
        except OSError:
            continue
        if len(data) <= MAX_SOURCE:
            items.append((hashlib.sha256(data).hexdigest(), path, data, True))
    if not items:
        return 0
    try:
        out = tempfile.mkdtemp(prefix="rewritten-", dir=scratch)
    except OSError:
        return 0
    try:
        _compile(interpreter, out, items, scratch, env, wrap, timeout, REWRITE, paths)
        return _place_rewritten(out, os.path.join(master, REWRITTEN, tag),
                                {key for key, *_ in items}) if settled() else 0
    finally:
        tree.remove_tree(out)


def _place_rewritten(out: str, into: str, keys: set[str]) -> int:
    """Move into golem's cache `into` each file of `out` named for one of `keys`
    (`<key>-<version>.pyc`): what the rewriting process wrote (`_place`)."""
    try:
        names = os.listdir(out)
    except OSError:
        return 0
    wanted = set()
    for name in names:
        key, dash, rest = name.partition("-")
        if key in keys and dash and rest.endswith(".pyc") and os.sep not in rest:
            wanted.add(name)
    return _place(out, into, wanted)


def _place(out: str, into: str, names: set[str]) -> int:
    """Copy the files `names` of `out` into `into`, each only if it is a regular file (never
    followed through a link) of a size bytecode can have, written beside and renamed into
    place. Returns how many were placed."""
    placed = 0
    try:
        os.makedirs(into, mode=0o700, exist_ok=True)
    except OSError:
        return 0
    for name in sorted(names):
        try:
            with open(os.path.join(out, name), "rb", opener=_regular) as handle:
                data = handle.read(8 * MAX_SOURCE + 1)
            if not 4 < len(data) <= 8 * MAX_SOURCE:
                continue
            part = os.path.join(into, "." + name + ".part")
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as written:
                written.write(data)
            os.replace(part, os.path.join(into, name))
        except OSError:
            continue
        placed += 1
    return placed


def _link_beside(master: str, where: str, source: str, tag: str, tops: list[str]) -> bool:
    """Place at `where` in golem's cache a link to the bytecode installed beside `source`
    (`__pycache__/<name>.<tag>.pyc`, as pip and the interpreter's own install write it), if
    there is one: a file of the same trees, which every run may read and none may write.
    Python checks it against its source as it would in place; golem's record of the cache
    (scratch.cache_state) holds the file's own times, so a later change to it is seen."""
    directory, base = os.path.split(source)
    beside = os.path.realpath(os.path.join(directory, "__pycache__", f"{base[:-3]}.{tag}.pyc"))
    try:
        info = os.lstat(beside)
        if not stat.S_ISREG(info.st_mode) or not any(beside.startswith(t + os.sep)
                                                     for t in tops):
            return False
        os.makedirs(os.path.dirname(os.path.join(master, where)), mode=0o700, exist_ok=True)
        os.symlink(beside, os.path.join(master, where))
    except OSError:
        return False
    return True


def _regular(path: str, flags: int) -> int:
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return fd


def _covered(root: str, path: str) -> bool:
    """Whether `sources(root)` would find the file `path` (so its bytecode is kept by
    content, not by path)."""
    rel = os.path.relpath(path, root)
    if rel.startswith(os.pardir + os.sep) or rel == os.pardir or os.path.isabs(rel):
        return False
    return not any(_pruned("", part) for part in rel.split(os.sep)[:-1])


def _compile(interpreter: str, out: str, items: list[tuple], scratch: str,
             env: dict[str, str], wrap, timeout: float, script: str = COMPILE,
             extra=()) -> None:
    """Hand `items` (where below `out`, name, source, strict) to compiling processes of the
    test interpreter, isolated with `-I -S`: nothing but its standard library runs there.
    The work is shared, by size, among as many processes at once as there are CPUs (each
    handed at most BATCH bytes of source at a time)."""
    total = sum(len(item[2]) for item in items)
    workers = max(1, min(os.cpu_count() or 1, MAX_WORKERS, total // MIN_SHARE))
    shares: list[list[tuple]] = [[] for _ in range(workers)]
    sizes = [0] * workers
    for item in sorted(items, key=lambda item: -len(item[2])):
        least = sizes.index(min(sizes))
        shares[least].append(item)
        sizes[least] += len(item[2])
    if workers == 1:
        _compile_share(interpreter, out, items, scratch, env, wrap, timeout, "0", script,
                       extra)
        return
    stopper = cancel.current()      # the attempt's, if any: it stops the compiling too

    def share_of(number: int) -> None:
        with cancel.scope(stopper) if stopper else contextlib.nullcontext():
            _compile_share(interpreter, out, shares[number], scratch, env, wrap, timeout,
                           str(number), script, extra)

    threads = [threading.Thread(target=share_of, args=(number,), daemon=True)
               for number in range(workers) if shares[number]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _compile_share(interpreter: str, out: str, items: list[tuple], scratch: str,
                   env: dict[str, str], wrap, timeout: float, name: str,
                   script: str = COMPILE, extra=()) -> None:
    batches, batch, size = [], [], 0
    for item in items:
        batch.append(item)
        size += len(item[2])
        if size >= BATCH:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    for number, batch in enumerate(batches):
        try:
            fd, path = tempfile.mkstemp(prefix=f"compile{name}-{number}-", suffix=".marshal",
                                        dir=scratch)
            with os.fdopen(fd, "wb") as handle:
                marshal.dump(batch, handle)
        except OSError:
            return
        try:
            process.run([interpreter, "-I", "-S", "-B", "-c", script, path, out, *extra],
                        cwd=scratch, env=env, timeout=timeout, cap=20_000, wrap=wrap)
        except OSError:
            pass
        finally:
            os.unlink(path)


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
