"""Reading a git checkout for `golem verify`: the base revision exported into a directory
(submodules at their recorded commits, files `export-ignore` keeps out of archives, the
filters of the user's git configuration applied), the changes since it, and the build
products git ignores that carry over. git is run with the user's configuration but with
`core.fsmonitor` off, without the variables that would point it at another repository and
without credentials; the repository is only read.
"""

from __future__ import annotations

import io
import os
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
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(target, filter="data")
        else:
            for member in archive.getmembers():   # Python before 3.11.4: check by hand
                name = member.name
                if name.startswith("/") or ".." in name.split("/") or member.islnk() or \
                        (member.issym() and (member.linkname.startswith("/")
                                             or ".." in member.linkname.split("/"))):
                    raise UsageError(f"refusing to export {name!r} from {rev}")
            archive.extractall(target)
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
                    if link.startswith("/") or ".." in link.split("/"):
                        raise UsageError(f"refusing to export {path!r} from {rev}: a link "
                                         "out of the tree")
                    writer.symlink(path, link)
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


def carry(root: str, target: str, products: list[str]) -> list[str]:
    """Copy the build products from the workspace into the export at `target` where their
    directory exists there; never through a link. Returns those copied."""
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
                if stat.S_ISREG(info.st_mode) and info.st_size <= PRODUCT_LIMIT:
                    writer.write(rel, mode=info.st_mode & 0o755, source=fd,
                                 size=info.st_size)
                    copied.append(rel)
            except (OSError, tree.TreeError):
                pass
            finally:
                os.close(fd)
    return copied
