"""Reading a git checkout for `golem verify`: the base revision exported into a directory
(submodules at their recorded commits, files `export-ignore` keeps out of archives, the
filters of the user's git configuration applied), the changes since it, and the build
products git ignores that carry over. git is run with the user's configuration but with
`core.fsmonitor` off, without the variables that would point it at another repository and
without credentials; the repository is only read.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import os
import re
import stat
import subprocess
import sys
import tarfile

from golem.core.errors import UsageError
from golem.tools import tree
from golem.tools.process import SECRET_WORDS
from golem.workflow.verifier.protect import RUNNER_MODULES, Facts, is_test_path, reason
from golem.workflow.verifier.snapshot import Changes

# variables that would make git read another repository, index or work tree than the one
# golem names, or run a program of the environment's choosing while it reads
GIT_REDIRECTS = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS", "GIT_PAGER",
    "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_QUARANTINE_PATH", "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS", "GIT_GRAFT_FILE", "GIT_SHALLOW_FILE", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT"})
GITLINK = "160000"          # the mode of a submodule's entry in a tree
PRODUCT_LIMIT = 256_000_000     # bytes of one build product carried over
PRODUCTS_MAX = 10_000           # build products carried over, at most
STDLIB_AND_RUNNERS = frozenset(sys.stdlib_module_names) | RUNNER_MODULES


def work_tree_top(root: str) -> str | None:
    """The top of the git work tree that holds `root`: the nearest directory at or above it
    with a `.git` (a directory, or a file as in submodules and linked work trees)."""
    here = root
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def git_env(top: str) -> dict[str, str]:
    """The user's environment for git, less credentials and whatever would point git at
    another repository; discovery stops above `top`."""
    env = {name: value for name, value in os.environ.items()
           if name not in GIT_REDIRECTS and not name.startswith("GIT_CONFIG_KEY_")
           and not name.startswith("GIT_CONFIG_VALUE_")
           and not any(word in name.upper() for word in SECRET_WORDS)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0",
               GIT_CEILING_DIRECTORIES=os.path.dirname(top))
    return env


def run_git(root: str, *args: str, binary: bool = False,
            given: bytes | None = None) -> str | bytes:
    """git's output for `args`, run in `root` (`given` on its stdin); UsageError with git's
    last line when it fails."""
    top = work_tree_top(root) or root
    argv = ["git", "-c", "core.fsmonitor=", "--work-tree", top, "-C", root, *args]
    try:
        done = subprocess.run(argv, input=given or b"", capture_output=True,
                              timeout=300, env=git_env(top))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git {args[0]} failed: {exc}") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError(f"git {args[0]}: {message[-1] if message else 'failed'}")
    return done.stdout if binary else done.stdout.decode(errors="surrogateescape")


# the keys of git's configuration whose value is a command git runs on the tree's files
DRIVER_KEY = re.compile(r"(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)"
                        r"|merge\..+\.driver)", re.S)


def driver_commands(root: str) -> list[tuple[str, str]]:
    """(key, command) of the filter, diff and merge drivers git's configuration defines for
    the checkout at `root` (global, system and the repository's own): what attributes such
    as `filter=NAME` make git run; none outside git, or when git is missing."""
    try:
        listing = run_git(root, "config", "-z", "--get-regexp", r"^(filter|diff|merge)\.")
    except UsageError:
        return []
    found = []
    for item in listing.split("\0")[:1000]:
        key, _, command = item.partition("\n")
        if DRIVER_KEY.fullmatch(key) and command.strip():
            found.append((key, command))
    return found


def gitlinks(root: str, rev: str) -> dict[str, str]:
    """The submodules `rev` records below `root`: path (relative to root) -> commit."""
    listing = run_git(root, "ls-tree", "-r", "-z", rev)
    found = {}
    for line in listing.split("\0"):
        meta, _, path = line.partition("\t")
        fields = meta.split()
        if path and len(fields) == 3 and fields[0] == GITLINK:
            found[path] = fields[2]
    return found


def _index_gitlinks(root: str) -> set[str]:
    """The submodules the index has now below `root`."""
    listing = run_git(root, "ls-files", "-z", "--stage")
    return {line.partition("\t")[2] for line in listing.split("\0")
            if line.startswith(GITLINK + " ") and "\t" in line}


def _checked_out(root: str, path: str) -> bool:
    return os.path.lexists(os.path.join(root, *path.split("/"), ".git"))


def _has_commit(root: str, commit: str) -> bool:
    try:
        run_git(root, "cat-file", "-e", f"{commit}^{{commit}}")
        return True
    except UsageError:
        return False


def changes_since(root: str, rev: str) -> Changes:
    """Paths (relative to root) that differ from `rev`: committed, uncommitted or untracked;
    inside a checked-out submodule, file by file since the commit `rev` records for it."""
    added, modified, removed = [], [], []
    status = run_git(root, "diff", "--no-ext-diff", "--no-textconv", "--name-status",
                     "--no-renames", "--ignore-submodules=all", "-z", "--relative", rev, "--")
    fields = status.split("\0")
    linked = gitlinks(root, rev)
    now = _index_gitlinks(root)
    for kind, path in zip(fields[0::2], fields[1::2]):
        if path in linked or path in now:
            continue        # a submodule: judged file by file below
        {"A": added, "D": removed}.get(kind[:1], modified).append(path)
    untracked = run_git(root, "ls-files", "--others", "--exclude-standard", "-z")
    added += [p for p in untracked.split("\0") if p]
    for path in sorted(set(linked) | now):
        inner = _submodule_changes(root, path, linked.get(path))
        added += [f"{path}/{p}" for p in inner.added]
        modified += [f"{path}/{p}" for p in inner.modified]
        removed += [f"{path}/{p}" for p in inner.removed]
    return Changes(sorted(set(added)), sorted(modified), sorted(removed))


def _submodule_changes(root: str, path: str, commit: str | None) -> Changes:
    if not _checked_out(root, path):
        return Changes([], [], [])      # neither exported nor present: nothing to compare
    sub = os.path.join(root, *path.split("/"))
    if commit is None:      # a submodule added since rev: every file of it is new
        listed = run_git(sub, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return Changes(sorted(p for p in listed.split("\0") if p), [], [])
    if not _has_commit(sub, commit):
        raise UsageError(f"submodule {path}: the commit the base records ({commit[:12]}) is "
                         "not in its repository; run `git submodule update` first")
    return changes_since(sub, commit)


def export(root: str, rev: str, target: str) -> None:
    """Write `root`'s part of `rev` into the directory `target` (made if missing, else
    empty), submodules included."""
    prefix = run_git(root, "rev-parse", "--show-prefix").strip()
    treeish = f"{rev}:{prefix}" if prefix else rev
    # from the top: below it, git would read the subtree's paths as under the prefix again
    data = run_git(work_tree_top(root) or root, "archive", "--format=tar", treeish,
                   binary=True)
    os.makedirs(target, exist_ok=True)
    if os.listdir(target):
        raise UsageError(f"cannot export {rev} into {target}: it is not empty")
    _unpack(data, target, rev, os.path.realpath(root))
    _fill_in(root, rev, prefix, target)
    for path, commit in sorted(gitlinks(root, rev).items()):
        if not _checked_out(root, path):
            continue        # not checked out here either: the suite sees it empty both ways
        sub = os.path.join(root, *path.split("/"))
        if not _has_commit(sub, commit):
            raise UsageError(f"submodule {path}: the commit {rev} records ({commit[:12]}) is "
                             "not in its repository; run `git submodule update` first")
        place = os.path.join(target, *path.split("/"))
        real = os.path.realpath(place)
        if not real.startswith(os.path.realpath(target) + os.sep) or \
                (os.path.lexists(place) and not os.path.isdir(place)):
            raise UsageError(f"refusing to export submodule {path!r}: its place in the "
                             "export is not a directory of the export")
        export(sub, commit, place)


def link_target(link: str, root: str, target: str) -> str:
    """Where a link of the tree at `root`, exported into `target`, points in the export:
    an absolute link into `root` at the same place in `target` (as `fix`'s copies do);
    every other link as git holds it, absolute or leaving the tree, which then points at
    nothing of the export."""
    if link == root or link.startswith(root + "/"):
        return target + link[len(root):]
    return link


def _unpack(data: bytes, target: str, rev: str, root: str) -> None:
    """Write the tar archive `data` (`git archive`'s) into `target`, never through a link:
    directories, files (executable or not) and symbolic links, each link kept as a link
    (`link_target`), whatever it points at. Other kinds of member (git writes none) are
    skipped."""
    with tarfile.open(fileobj=io.BytesIO(data)) as archive, tree.Writer(target) as writer:
        for member in archive:
            name = member.name.rstrip("/")
            parts = name.split("/")
            if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise UsageError(f"refusing to export {member.name!r} from {rev}: not a path "
                                 "inside the tree")
            try:
                if member.isdir():
                    writer.mkdir(name)
                elif member.issym():
                    writer.symlink(name, link_target(member.linkname, root, target))
                elif member.isreg():
                    handle = archive.extractfile(member)
                    writer.write(name, handle.read() if handle else b"",
                                 0o755 if member.mode & 0o111 else 0o644)
            except (OSError, tree.TreeError) as exc:
                raise UsageError(f"cannot export {name!r} from {rev}: {exc}") from None


def _fill_in(root: str, rev: str, prefix: str, target: str) -> None:
    """Write the files of `rev` that `git archive` left out (an `export-ignore` attribute,
    often set on `tests/` to keep release archives small) from git's objects, through the
    filters a checkout applies."""
    top = work_tree_top(root) or root
    with tree.Writer(target) as writer:
        for line in run_git(root, "ls-tree", "-r", "-z", rev).split("\0"):
            meta, _, path = line.partition("\t")
            fields = meta.split()
            if not path or len(fields) != 3 or fields[1] != "blob":
                continue
            if writer.lstat(path) is not None:
                continue
            mode, sha = fields[0], fields[2]
            try:
                if mode == "120000":
                    link = run_git(top, "cat-file", "blob", sha)
                    writer.symlink(path, link_target(link, os.path.realpath(root), target))
                    continue
                data = run_git(top, "cat-file", "--filters", f"--path={prefix}{path}",
                               sha, binary=True)
                writer.write(path, data, 0o755 if mode == "100755" else 0o644)
            except (OSError, tree.TreeError) as exc:
                raise UsageError(f"cannot export {path!r} from {rev}: {exc}") from None


def build_products(root: str, changes: Changes, trees: list[str]) -> list[str]:
    """Files git ignores that the suite imports as they are, carried from the workspace into
    the base and the verification copy: Python modules (`.py`, extension modules such as
    `.so` and `.pyd`) in a directory git does not ignore as a whole, so beside the sources.
    Never a test file or test data by name or place, a start-up hook or conftest.py, bytecode,
    anything inside a dependency tree or an ignored directory (`build/`, `.venv/`), a file
    named like a standard-library or test-runner module, a path among the changes, or a file
    ignored only by a rule of a `.gitignore` the changes add or edit."""
    listed = run_git(root, "ls-files", "-z", "--others", "--ignored", "--exclude-standard",
                     "--directory", "--no-empty-directory").split("\0")
    skip = set(changes.all)
    inside = lambda rel: any(rel == t or rel.startswith(t + "/") for t in trees)
    found = []
    for rel in listed:
        if not rel or rel.endswith("/") or rel in skip or inside(rel) or not _module(rel):
            continue
        if is_test_path(rel) or reason(rel, "removed", Facts()):
            continue        # what the rules protect as tests or machinery never carries over
        if rel.rsplit("/", 1)[-1].split(".", 1)[0] in STDLIB_AND_RUNNERS:
            continue        # named like a module the tests would import from outside
        found.append(rel)
    return _ignored_before(root, changes, sorted(found)[:PRODUCTS_MAX])


def _ignored_before(root: str, changes: Changes, found: list[str]) -> list[str]:
    """Those of `found` that git ignores by a rule the changes do not touch: an ignore file
    the changes add or edit could hide a change in a file it makes ignored."""
    touched = {p for p in changes.added + changes.modified
               if p.rsplit("/", 1)[-1] == ".gitignore"}
    if not touched or not found:
        return found
    prefix = run_git(root, "rev-parse", "--show-prefix").strip()
    kept = []
    given = "".join(f"{p}\0" for p in found).encode(errors="surrogateescape")
    fields = run_git(root, "check-ignore", "-v", "-z", "--stdin", given=given).split("\0")
    for source, _, _, path in zip(*[iter(fields)] * 4):
        rel = source[len(prefix):] if prefix and source.startswith(prefix) else source
        if rel not in touched:
            kept.append(path)
    return sorted(kept)


def _module(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    return name.endswith((".py", ".so", ".pyd")) or ".so." in name


DATA_MODULE_LIMIT = 1_000_000      # bytes of a carried `.py` product golem reads
TYPING_MODULES = frozenset({"typing", "__future__"})
# names a module binds that the import system or the interpreter acts on (`__path__` makes it
# a package that imports from anywhere)
IMPORT_MACHINERY = frozenset({"__path__", "__spec__", "__loader__", "__builtins__",
                              "__getattr__", "__dir__", "__class__", "__file__", "__name__",
                              "__package__", "__cached__", "__dict__", "__annotations__"})


def data_only(source: bytes) -> bool:
    """Whether a Python module only binds data, the shape of a generated `_version.py`
    (setuptools-scm's): a docstring, assignments and annotations of literals, tuples, lists,
    dicts, subscripts (`Tuple[int, ...]`) and names the module binds itself (or `object`),
    `__all__`, imports from `typing` and `__future__`, and `if TYPE_CHECKING:` blocks of the
    same (with TYPE_CHECKING False or typing's). No call, no attribute, no other import, no
    builtin handed out (`add = max`): nothing in it runs code when it is imported."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    bound: set[str] = set()
    loaded: set[str] = set()
    if not _data_statements(module.body, bound, loaded, True):
        return False
    # a name the module does not bind is a builtin, whatever it is: code handed out
    return loaded <= bound | {"object"}


def _data_statements(body: list, bound: set, loaded: set, runtime: bool) -> bool:
    """Whether `body` only binds data; adds the names it binds to `bound` and the names its
    values read when it runs (`runtime`: not under `if TYPE_CHECKING:`) to `loaded`."""
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) or \
                isinstance(node, ast.Pass):
            continue
        if isinstance(node, (ast.ImportFrom, ast.Import)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if isinstance(node, ast.ImportFrom) and (node.level or module not in TYPING_MODULES):
                return False
            if runtime and module == "typing" and \
                    any(a.name != "TYPE_CHECKING" or a.asname for a in node.names):
                return False        # typing's callables (`cast`) are code to hand out
            if isinstance(node, ast.Import) and \
                    any(alias.name not in TYPING_MODULES for alias in node.names):
                return False
            if runtime and isinstance(node, ast.ImportFrom):    # `import typing` binds
                bound.update(a.asname or a.name for a in node.names)   # nothing to hand out
            continue
        if isinstance(node, ast.Assign):
            targets = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if not all(_data_target(t) for t in node.targets) or \
                    not _data_value(node.value, loaded if runtime else set()):
                return False
            if set(targets) & IMPORT_MACHINERY:
                return False
            if "TYPE_CHECKING" in targets and not (isinstance(node.value, ast.Constant)
                                                   and node.value.value is False):
                return False
            if runtime:
                bound.update(targets)
            continue
        if isinstance(node, ast.AnnAssign):
            # an annotation is evaluated (into __annotations__), never called
            if not isinstance(node.target, ast.Name) or \
                    node.target.id in IMPORT_MACHINERY | {"TYPE_CHECKING"} or \
                    not _data_value(node.annotation, set()) or \
                    node.value is not None and not _data_value(node.value,
                                                               loaded if runtime else set()):
                return False
            if node.value is not None and runtime:
                bound.add(node.target.id)
            continue
        if isinstance(node, ast.If) and _type_checking(node.test):
            if _data_statements(node.body, bound, loaded, False) and \
                    _data_statements(node.orelse, bound, loaded, runtime):
                continue
            return False
        return False
    return True


def _data_target(node) -> bool:
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_data_target(e) for e in node.elts)
    return isinstance(node, ast.Name)


def _data_value(node, loaded: set) -> bool:
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name):
            loaded.add(node.id)
        elif isinstance(node, ast.Constant):
            continue
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            todo += node.elts
        elif isinstance(node, ast.Dict):
            todo += [k for k in node.keys if k is not None] + node.values
        elif isinstance(node, ast.Subscript):
            todo += [node.value, node.slice]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            todo.append(node.operand)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            todo += [node.left, node.right]     # `str | None` in an annotation
        else:
            return False
    return True


def _type_checking(test) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or \
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING" and \
        isinstance(test.value, ast.Name) and test.value.id == "typing"


def _extension(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1].lower()
    return name.endswith((".so", ".pyd")) or ".so." in name


def carry(root: str, target: str, products: list[str],
          left_out: dict[str, str] | None = None) -> list[str]:
    """Copy the build products from the workspace into the export at `target` where their
    directory exists there; never through a link. Returns those copied. A `.py` product is
    code nobody reviews: it is copied only when it binds data alone (`data_only`); the
    others go into `left_out` (path -> why), and both runs go without them."""
    copied = []
    with tree.Writer(target) as writer:
        for rel in products:
            parts, name = tree.split(rel)
            if parts and not os.path.isdir(os.path.join(target, *parts)):
                continue        # no such source directory at the base
            try:
                dir_fd = tree.open_dir(root, parts)
            except (OSError, tree.TreeError):
                continue
            try:
                fd, info = tree.open_file(dir_fd, name)
            except OSError:
                continue
            finally:
                os.close(dir_fd)
            try:
                if not stat.S_ISREG(info.st_mode) or info.st_size > PRODUCT_LIMIT:
                    continue
                if _extension(rel):
                    writer.write(rel, mode=info.st_mode & 0o755, source=fd,
                                 size=info.st_size)
                    copied.append(rel)
                    continue
                data = os.pread(fd, DATA_MODULE_LIMIT + 1, 0) \
                    if info.st_size <= DATA_MODULE_LIMIT else b""
                if len(data) <= DATA_MODULE_LIMIT and data_only(data):
                    writer.write(rel, data, info.st_mode & 0o755)
                    copied.append(rel)
                elif left_out is not None:
                    left_out[rel] = ("a module git ignores that runs code (more than data "
                                     "assignments): code the change can hold that nobody "
                                     "reviews, so neither run has it")
            except (OSError, tree.TreeError):
                pass
            finally:
                os.close(fd)
    return copied


# Lines of `.pth` files that package installers write, which Python runs at start-up: the
# workspace's environment is trusted under `verify`, and any other executable line in it is
# named (`environment_hooks`).
KNOWN_PTH_LINES = (
    ("distutils-precedence.pth", "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = "
                                 "os.environ.get(var, 'local') == 'local'; enabled and "
                                 "__import__('_distutils_hack').add_shim(); "),
    ("_virtualenv.pth", "import _virtualenv"),
    ("*coverage*.pth", "import coverage; coverage.process_startup()"),
    ("pywin32.pth", "import pywin32_bootstrap"),
    ("easy-install.pth", "import sys; sys.__plen = len(sys.path)"),
    ("easy-install.pth", "import sys; new = sys.path[sys.__plen:]; del sys.path[sys.__plen:]; "
                         "p = getattr(sys, '__egginsert', 0); sys.path[p:p] = new; "
                         "sys.__egginsert = p + len(new)"),
)
EDITABLE_FINDER = re.compile(r"import (__editable___[\w.]+_finder); \1\.install\([^()]*\)")
START_UP_MODULES = ("sitecustomize.py", "usercustomize.py")


def environment_hooks(root: str, trees: list[str]) -> list[dict]:
    """Start-up code in the workspace's own virtual environments that no known installer
    writes: a `.pth` line that Python runs (one starting with `import`) other than those of
    setuptools (`distutils-precedence.pth`, an editable install's `__editable__.*.pth`
    finder), virtualenv, coverage, pywin32 or easy-install, or a `sitecustomize.py` or
    `usercustomize.py` in site-packages. One finding (kind `environment-hook`) each."""
    found = []
    for top in trees:
        if not os.path.isfile(os.path.join(root, top, "pyvenv.cfg")):
            continue
        for site in _site_packages(os.path.join(root, top)):
            try:
                names = sorted(os.listdir(site))[:10_000]
            except OSError:
                continue
            rel_site = os.path.relpath(site, root).replace(os.sep, "/")
            for name in names:
                if name in START_UP_MODULES:
                    found.append({"path": f"{rel_site}/{name}", "line": 1,
                                  "kind": "environment-hook",
                                  "detail": "a start-up module in the workspace's environment "
                                            "runs code in every test run"})
                elif name.endswith(".pth"):
                    found += _pth_hooks(site, rel_site, name)
    return found


def _site_packages(venv: str) -> list[str]:
    """The site-packages directories of the virtual environment at `venv` (`lib64` is
    usually a link to `lib`: each directory once)."""
    found = {}
    for lib in ("lib", "lib64", "Lib"):
        base = os.path.join(venv, lib)
        try:
            entries = sorted(os.listdir(base))
        except OSError:
            continue
        for where in [base] + [os.path.join(base, e) for e in entries if e.startswith("python")]:
            site = os.path.join(where, "site-packages")
            if os.path.isdir(site):
                found.setdefault(os.path.realpath(site), site)
    return list(found.values())


def _pth_hooks(site: str, rel_site: str, name: str) -> list[dict]:
    path = os.path.join(site, name)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise OSError
        with open(path, "rb") as handle:
            data = handle.read(1_000_001)
    except OSError:
        return [{"path": f"{rel_site}/{name}", "line": 1, "kind": "environment-hook",
                 "detail": "a .pth file golem cannot read as a regular file"}]
    found = []
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        line = raw.rstrip()
        if not line.startswith(("import ", "import\t")):
            continue        # a path entry or a comment: Python runs only `import` lines
        known = any(fnmatch.fnmatchcase(name, pattern) and line == text.rstrip()
                    for pattern, text in KNOWN_PTH_LINES)
        if not known and name.startswith("__editable__.") and EDITABLE_FINDER.fullmatch(line):
            known = True
        if not known or len(data) > 1_000_000:
            found.append({"path": f"{rel_site}/{name}", "line": number,
                          "kind": "environment-hook",
                          "detail": f"a .pth line no known installer writes runs code in every "
                                    f"test run: {line[:120]}"})
    return found
