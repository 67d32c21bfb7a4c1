"""Which changed paths touch the tests or the test machinery (and so cannot count as a fix).

What the baseline ran decides first: every file it collected a test from is a test file,
whatever its name. Then rules by name and place, all compared without regard to case:

- test files by name (`test_*.py`, `*_test.py`, `*_tests.py`, `*.test.js`, ...) or in a test
  directory (`tests`, `unittests`, `__tests__`, `spec`, ...), and every file under a test-data
  directory (`testdata`, `fixtures`, `golden`, `snapshots`, `__snapshots__`, ...) or that is
  not code inside a test directory: changing, deleting or adding one is protected (adding a
  new test file is not);
- `conftest.py` anywhere, interpreter start-up hooks (`sitecustomize.py`,
  `usercustomize.py`, `*.pth`), runner and build configuration (`pytest.ini`, `tox.ini`,
  `setup.cfg`, `pyproject.toml`, `package.json`, `jest.config.*`, ...), toolchain pins
  (`.python-version`, `.tool-versions`, `runtime.txt`, `.nvmrc`, ...), package metadata
  (`*.egg-info`, `*.dist-info`, whose entry points load plugins), build files the test
  command uses;
- shadowing, by import resolution: a new file or directory that creates a top-level module
  name where the tests import from (the workspace's top, `src/`, the directories pytest and
  unittest put on sys.path for the test files) is protected when that name is importable
  from outside the workspace (the standard library, site-packages, the runner and its
  dependencies, as the test interpreter reported them at the baseline) or is provided by
  the workspace somewhere else on sys.path. Every module suffix the interpreter knows counts
  (`.py`, `.pyc`, extension modules), and so do packages and namespace directories;
- a dependency tree (`.venv`, `node_modules`, ...) or `.git`'s refs that the run changed;
- doctests beside code: a module whose doctests the baseline ran (`--doctest-modules`,
  `doctest.DocTestSuite`) is code, not a test file, but the text of its doctests is a test.
  Adding, changing or deleting an example or its expected output, or a statement that names
  `__doc__` or `__test__` (a docstring set by code, a `__test__` table) is protected; every
  other change to the module is allowed.

Each reason says which rule protected the path.
"""

from __future__ import annotations

import ast
import doctest
import fnmatch
import os
import posixpath
import re
import sys
from dataclasses import dataclass, field
from typing import Callable

from golem.workflow.verifier.snapshot import Changes

TEST_DIRS = frozenset({"test", "tests", "testing", "unittests", "unit_tests", "__tests__",
                       "spec", "specs", "e2e"})
DATA_DIRS = frozenset({"testdata", "test_data", "test-data", "fixtures", "golden", "goldens",
                       "snapshots", "__snapshots__", "cassettes", "expected"})
TEST_FILES = ("test_*.py", "*_test.py", "*_tests.py", "tests.py", "test*.py", "*_test.go",
              "*.test.js", "*.test.ts", "*.spec.js", "*.spec.ts", "*.test.mjs", "*.test.cjs",
              "*.test.jsx", "*.test.tsx", "*.spec.jsx", "*.spec.tsx", "*_spec.rb", "*_test.rb")
CODE_SUFFIXES = (".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs",
                 ".rb", ".java", ".kt", ".c", ".h", ".cc", ".cpp", ".hpp")
# read by a runner wherever they sit between the root and the tests: protected at any depth
CONFIG_ANYWHERE = frozenset({"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml",
                             "tox.ini", "setup.cfg", "pyproject.toml", "package.json",
                             "go.mod", "go.sum", "go.work", ".babelrc", ".mocharc.json",
                             ".mocharc.js", ".mocharc.yml", ".coveragerc"})
CONFIG_PATTERNS = ("jest.config.*", "vitest.config.*", "babel.config.*", "karma.conf.*")
CONFIG_TOP = frozenset({"noxfile.py", "cargo.toml", "setup.py", "tsconfig.json",
                        "requirements.txt", "manifest.in"})
PINS = frozenset({".python-version", ".tool-versions", "runtime.txt", ".nvmrc",
                  ".node-version", "rust-toolchain", "rust-toolchain.toml", ".ruby-version",
                  ".go-version", ".java-version"})
BUILD_FILES = frozenset({"makefile", "gnumakefile", "tox.ini", "noxfile.py", "package.json",
                         "justfile", "taskfile.yml"})
BUILD_PROGRAMS = frozenset({"make", "tox", "nox", "npm", "yarn", "pnpm", "just", "task"})
HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
METADATA = (".egg-info", ".dist-info", ".egg-link", ".egg")
DOCTEST_NAMES = ("__doc__", "__test__")      # what doctest reads besides docstrings
RUNNER_MODULES = frozenset({"pytest", "_pytest", "py", "pluggy", "unittest", "nose", "nose2",
                            "conftest", "iniconfig"})


@dataclass
class Facts:
    """What the baseline established that decides what is protected."""

    test_argv: list[str] = field(default_factory=list)
    test_files: set[str] = field(default_factory=set)   # the baseline collected tests here
    before: set[str] = field(default_factory=set)        # every path at the snapshot
    import_roots: set[str] = field(default_factory=lambda: {""})
    outside_names: frozenset[str] = frozenset(sys.stdlib_module_names) | RUNNER_MODULES
    suffixes: tuple[str, ...] = (".py", ".pyc", ".so")
    trees_changed: dict[str, str] = field(default_factory=dict)
    test_data: dict[str, str] = field(default_factory=dict)   # read by the tests: file -> test
    # modules whose doctests the baseline ran: file -> why the change is protected, or ""
    # when only code outside the doctests changed
    doctests: dict[str, str] = field(default_factory=dict)

    named_data: dict[str, str] = field(default_factory=dict)  # named by a test: file -> test
    allow_change: tuple[str, ...] = ()      # -allow-change: files run later that may change
    run_by: dict[str, str] = field(default_factory=dict)    # script -> run-later file naming it
    plugins: set[str] = field(default_factory=set)  # modules pytest loaded as plugins at baseline
    # the baseline's test process loaded these files of the tree (the code under test): a
    # run-later file naming one does not protect it, the tests judge it (`find_run_later`)
    imported: set[str] = field(default_factory=set)
    # imported files a run-later file runs whose `if __name__ == "__main__":` block the
    # change touched: file -> the run-later file that runs it
    run_main: dict[str, str] = field(default_factory=dict)
    known_failing: tuple[str, ...] = ()     # -known-failing: tests the run is not judged on
    # the commands git's configuration gives filter, diff and merge drivers: (key, command)
    drivers: list[tuple[str, str]] = field(default_factory=list)

    def loaded_by_tests(self, modules: list[str], origins: dict[str, list[str]],
                        cwd: str) -> None:
        """Take as imported by the tests every file of the tree the baseline's test process
        loaded (`modules`: the source files of its modules at the end, absolute or relative
        to `cwd`, where it ran) and every file the baseline's tests' code came from
        (`origins`). Only the baseline counts: nothing the change adds (an import in the
        code, a new test file) makes a file the tests'."""
        top = os.path.normpath(cwd)
        for path in modules:
            full = os.path.normpath(os.path.join(top, path))
            if full.startswith(top + os.sep):
                rel = full[len(top) + 1:].replace(os.sep, "/")
                if rel in self.before:
                    self.imported.add(rel)
        self.imported.update(f for files in origins.values() for f in files
                             if f in self.before)

    def find_run_later(self, changes: Changes, original: Callable[[str], bytes | None],
                       current: Callable[[str], bytes | None]) -> None:
        """Set `run_by` (`named_to_run`): the files run-later files run, less those the
        baseline's tests imported, which the tests judge like any code under test; of
        those, one whose `if __name__ == "__main__":` block the change touched goes in
        `run_main` (only the tool that runs it runs that block)."""
        run_by = named_to_run(self.before, changes, original, current, self.drivers)
        changed = set(changes.added) | set(changes.modified)
        for script in sorted(set(run_by) & self.imported):
            runner = run_by.pop(script)
            if script in changed and _main_block(original(script)) != \
                    _main_block(current(script)):
                self.run_main[script] = runner
        self.run_by = run_by

    def read_by_tests(self, reads: dict[str, set[str]]) -> None:
        """Take as test data every file the baseline's tests (or their helpers and fixtures)
        opened or tried to open for reading."""
        for path, openers in reads.items():
            tests = self.test_openers(openers)
            if tests:
                self.test_data[path] = tests[0]

    def test_openers(self, openers) -> list[str]:
        """The files among `openers` that belong to the tests."""
        return sorted(o for o in openers if o in self.test_files or is_test_path(o)
                      or o.rpartition("/")[2] == "conftest.py")

    def named_by_tests(self, original: Callable[[str], bytes | None]) -> None:
        """Take as test data every existing file, not code, that a test module names in a
        string literal: the whole relative path (`"data/expected.txt"`), or its name with each
        directory above it named too (`HERE / "data" / "expected.txt"`) or holding the test.
        Read where the baseline never got to them (a test that crashed before opening its
        expectations), they are the tests' all the same. `original(path)` gives a file's
        content before the run."""
        by_name: dict[str, list[str]] = {}
        for path in self.before:
            if not _is_code(path) and not path.startswith(".git/"):
                by_name.setdefault(path.rpartition("/")[2], []).append(path)
        # a literal names a file only if the file's name stands in the source: a module
        # where no name does is not parsed (a few names are looked for one by one; many, as
        # the words between quotes, slashes and other separators, if no name holds one)
        few = len(by_name) <= 64
        sift = few or not any(_NAME_BOUNDS.search(name) for name in by_name)
        for test in sorted(self.test_files | {p for p in self.before
                                              if p.rpartition("/")[2] == "conftest.py"}):
            data = original(test)
            if not by_name:
                break
            if sift and data is not None:
                text = data.decode("utf-8", "replace")
                names = [n for n in by_name if n in text] if few else \
                    by_name.keys() & set(_NAME_BOUNDS.split(text))
                if not any(_on_a_literal_line(text, name) for name in names):
                    continue
            literals = _literals(data)
            parts = {piece for text in literals for piece in text.split("/") if piece}
            here = set(test.split("/")[:-1])
            for text in literals:
                clean = posixpath.normpath(text).lstrip("/")
                for path in by_name.get(clean.rpartition("/")[2], ()):
                    named = all(d in parts or d in here for d in path.split("/")[:-1])
                    if path == clean or (named and path.endswith("/" + clean)):
                        self.named_data.setdefault(path, test)

    @property
    def test_dirs(self) -> set[str]:
        return {p.rpartition("/")[0] for p in self.test_files}


def _lower_parts(rel: str) -> list[str]:
    return rel.lower().split("/")


def _named_like_test(name: str) -> bool:
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in TEST_FILES)


def _test_dir(part: str) -> bool:
    return part in TEST_DIRS or part.startswith("test") or part.endswith(("_test", "_tests"))


def is_test_path(rel: str) -> bool:
    """A file that belongs to the tests by name: in a test directory, or named like a test."""
    parts = _lower_parts(rel)
    return any(_test_dir(p) for p in parts[:-1]) or _named_like_test(parts[-1])


def _in_data_dir(rel: str) -> bool:
    return any(p in DATA_DIRS for p in _lower_parts(rel)[:-1])


def _is_code(rel: str) -> bool:
    return rel.lower().endswith(CODE_SUFFIXES)


def module_name(entry: str, suffixes: tuple[str, ...], is_dir: bool) -> str | None:
    """The top-level module a file or directory named `entry` provides, if any."""
    if is_dir:
        return entry if entry.isidentifier() else None
    for suffix in sorted(suffixes, key=len, reverse=True):
        if entry.endswith(suffix) and entry[:-len(suffix)].isidentifier():
            return entry[:-len(suffix)]
    return None


def _created_name(rel: str, root: str, suffixes: tuple[str, ...]) -> tuple[str, str] | None:
    """(module name, entry) that path `rel` creates at sys.path root `root`, if below it."""
    prefix = root + "/" if root else ""
    if not rel.startswith(prefix):
        return None
    rest = rel[len(prefix):].split("/")
    entry = rest[0]
    return (name, entry) if (name := module_name(entry, suffixes, len(rest) > 1)) else None


def provided(paths: set[str], root: str, suffixes: tuple[str, ...]) -> set[str]:
    """Top-level module names the files `paths` provide at sys.path root `root`."""
    names = set()
    for rel in paths:
        created = _created_name(rel, root, suffixes)
        if created:
            names.add(created[0])
    return names


def import_roots(test_files: set[str], paths: set[str], extra: set[str] = ()) -> set[str]:
    """The workspace directories the tests import from: the top, `src`, and for each test
    file the directory above its outermost package (what pytest's default import mode and
    unittest's discovery put on sys.path), plus `extra` (pytest's `pythonpath`)."""
    roots = {"", *extra}
    if any(p.startswith("src/") for p in paths):
        roots.add("src")
    for rel in test_files:
        parent = rel.rpartition("/")[0]
        while parent and f"{parent}/__init__.py" in paths:
            parent = parent.rpartition("/")[0]
        roots.add(parent)
    return roots


def _shadow(rel: str, facts: Facts) -> str | None:
    for root in sorted(facts.import_roots, key=len, reverse=True):
        created = _created_name(rel, root, facts.suffixes)
        if not created:
            continue
        name, entry = created
        here = provided(facts.before, root, facts.suffixes)
        if name in here:
            return None     # the workspace provided this name here before the run
        where = f"{root}/" if root else "the top of the workspace"
        if name in facts.outside_names:
            return (f"shadowing: a new {entry!r} at {where} creates module {name!r}, which the "
                    f"tests would otherwise import from outside the workspace")
        others = [r for r in facts.import_roots if r != root
                  and name in provided(facts.before, r, facts.suffixes)]
        if others:
            other = others[0] + "/" if others[0] else "the top"
            return (f"shadowing: a new {entry!r} at {where} creates module {name!r}, which the "
                    f"workspace provides at {other}")
    return None


def reason(rel: str, kind: str, facts: Facts) -> str | None:
    """Why a change of `kind` (added/modified/removed) to `rel` is protected, or None."""
    parts = _lower_parts(rel)
    name = parts[-1]
    programs = {os.path.basename(a) for a in facts.test_argv[:1]}
    top = len(parts) == 1
    if name == "conftest.py":
        return "runner machinery: conftest.py changes how pytest collects and reports tests"
    if rel in facts.plugins:
        return (f"runner machinery: pytest loaded {rel} as a plugin in the baseline's run; its "
                "hooks change how tests are collected and reported")
    if name in HOOKS or name.endswith(".pth"):
        return f"interpreter start-up hook: {rel} runs code when Python starts"
    if any(p.endswith(METADATA) for p in parts[:-1]) or name.endswith(METADATA):
        return "package metadata: its entry points can load test-runner plugins"
    if name in PINS:
        return f"toolchain pin: {rel} chooses the interpreter or toolchain that runs the tests"
    if name in CONFIG_ANYWHERE or (top and name in CONFIG_TOP) or \
            any(fnmatch.fnmatchcase(name, p) for p in CONFIG_PATTERNS):
        return f"runner configuration: {rel} is test-runner or build configuration"
    if name in BUILD_FILES and programs & BUILD_PROGRAMS:
        return f"build file: {rel} is used by the test command"
    if facts.doctests.get(rel):
        return facts.doctests[rel]
    if rel in facts.test_files and kind != "added" and rel not in facts.doctests:
        verb = "deleted" if kind == "removed" else "modified"
        return f"test file: the baseline collected tests from {rel}, and the run {verb} it"
    if _in_data_dir(rel):
        return f"test data: {rel} is under a test-data directory"
    data = _test_data(rel, facts) or _listed(rel, kind, facts)
    if data:
        return data
    if kind == "added":
        shadow = _shadow(rel, facts)
        if shadow:
            return shadow
        if name == "__init__.py" and (is_test_path(rel) or
                                      rel.rpartition("/")[0] in facts.test_dirs):
            return "test package: a new __init__.py changes how the tests are imported"
    in_test_dir = rel.rpartition("/")[0] in facts.test_dirs or \
        any(_test_dir(p) for p in parts[:-1])
    if in_test_dir and not _is_code(rel):
        return f"test data: {rel} is not code, in a test directory"
    if kind != "added" and is_test_path(rel):
        verb = "deleted" if kind == "removed" else "modified"
        return f"test file: an existing test file, {verb} (by name or directory)"
    if name.endswith((".pyc", ".pyo")) and kind != "removed":
        return ("compiled bytecode: the run wrote it where Python may load it instead of the "
                "source (golem's own runs never write bytecode into the workspace)")
    if (name.endswith((".so", ".pyd", ".dylib")) or ".so." in name) and kind != "removed":
        return ("compiled extension: machine code golem cannot read, scan or judge, which "
                "Python may import instead of the source")
    return None


def _test_data(rel: str, facts: Facts) -> str | None:
    """Why `rel` is test data by what the tests read or name, or None."""
    if rel in facts.test_data:
        return f"test data: the baseline's tests read {rel} ({facts.test_data[rel]})"
    if rel in facts.named_data:
        return f"test data: {facts.named_data[rel]} names {rel}"
    return None


def _listed(rel: str, kind: str, facts: Facts) -> str | None:
    """Why adding or deleting `rel`, not code, changes a directory the baseline's tests
    listed (a directory of cases), or None."""
    listed = rel.rpartition("/")[0] + "/"
    if kind == "modified" or _is_code(rel) or listed not in facts.test_data:
        return None
    verb = "added" if kind == "added" else "deleted"
    return (f"test data: the baseline's tests list {listed} ({facts.test_data[listed]}), and "
            f"the run {verb} {rel} in it")


def _main_block(source: bytes | None) -> str | None:
    """The module's top-level `if __name__ == "__main__":` statements as the parser reads
    them (comments and layout aside); None when there is no source or it does not parse
    (then it cannot be told apart, and counts as changed)."""
    if source is None:
        return None
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return "\n".join(ast.dump(node) for node in module.body
                     if isinstance(node, ast.If) and _is_main_test(node.test))


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and
            isinstance(test.ops[0], (ast.Eq, ast.Is))):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in sides) and \
        any(isinstance(n, ast.Constant) and n.value == "__main__" for n in sides)


def _main_changed(rel: str, kind: str, facts: Facts) -> str | None:
    """Why a change to `rel`, a file the baseline's tests import that a run-later file
    runs, is protected: its `__main__` block changed, which the tests never run."""
    runner = facts.run_main.get(rel)
    if runner is None or kind == "removed" or \
            any(fnmatch.fnmatchcase(rel, glob) for glob in facts.allow_change):
        return None
    return (f"run later: {rel}: the change touches its `if __name__ == \"__main__\":` block, "
            f"which only {runner} runs (the tests import the module and judge the rest of "
            "it); allow it with -allow-change")


def read_in_run(reads: dict[str, set[str]], changed: set[str], facts: Facts,
                label: str = "verification") -> list[tuple[str, str]]:
    """(path, reason) for every changed file the tests of a later run opened for reading:
    test data the baseline's tests never got to (a test that failed before it opened its
    expectations)."""
    found = []
    for path in sorted(set(reads) & changed):
        tests = facts.test_openers(reads[path])
        if tests:
            found.append((path, f"test data: the {label}'s tests read {path} ({tests[0]})"))
    return found


_NAME_BOUNDS = re.compile(r"""[\s'"/\\(){}\[\],=:;+%<>|&*!?#`$@^~]""")


def _on_a_literal_line(text: str, name: str, most: int = 1000) -> bool:
    """Whether `name` stands in `text` where a one-line string literal could hold it: on a
    line with a quote, or one continued from the line before. An occurrence in a comment or
    a docstring's inner line alone makes no module worth parsing (a 1.4 MB module of test
    vectors that names its generator in a comment took 0.9 s to parse)."""
    at, seen = text.find(name), 0
    while at >= 0 and seen < most:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line = text[start:end if end >= 0 else len(text)]
        if "'" in line or '"' in line or text[max(0, start - 2):start].startswith("\\"):
            return True
        at, seen = text.find(name, at + len(name)), seen + 1
    return seen >= most     # too many to look at: parsed


def _literals(data: bytes | None) -> set[str]:
    """The short one-line string constants of a Python source."""
    if not data or len(data) > 2_000_000:
        return set()
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and 0 < len(node.value) < 300
            and "\n" not in node.value and "\x00" not in node.value}


def protected_changes(changes: Changes, facts: Facts) -> list[tuple[str, str]]:
    """(path, reason) for every protected path among the changes, sorted by path; a changed
    dependency tree comes as one entry for the tree."""
    found = [(tree, f"dependency tree changed during the run ({what}); it is linked, not "
                    "copied, into the verification") for tree, what in facts.trees_changed.items()]
    tree = frozenset(p.lower() for p in (facts.before | set(changes.added)) - set(changes.removed))
    for kind, paths in (("added", changes.added), ("modified", changes.modified),
                        ("removed", changes.removed)):
        for rel in paths:
            why = reason(rel, kind, facts) or _main_changed(rel, kind, facts) or \
                run_later(rel, kind, facts.allow_change, tree, facts.run_by)
            if why:
                found.append((rel, why))
    return sorted(found)


# Files other tools execute later, with the authority of whoever runs them: CI (with its
# tokens and secrets), git hooks, task runners and build scripts, editor tasks. A change to
# one passes no test and fails none, so the verdict alone would never show it.
RUN_LATER_DIRS = {
    ".github": "CI definition (GitHub Actions workflows and actions)",
    ".circleci": "CI definition (CircleCI)", ".gitlab": "CI definition (GitLab)",
    ".buildkite": "CI definition (Buildkite)", ".woodpecker": "CI definition (Woodpecker)",
    ".azure-pipelines": "CI definition (Azure Pipelines)", ".tekton": "CI definition (Tekton)",
    ".gitea": "CI definition (Gitea Actions)", ".forgejo": "CI definition (Forgejo Actions)",
    ".husky": "hook configuration (husky git hooks)", ".githooks": "git hook",
    ".git-hooks": "git hook",
    ".devcontainer": "editor configuration (dev container commands)",
    ".storybook": "tool configuration (Storybook runs its JavaScript)",
    ".mvn": "build configuration (Maven wrapper and extensions)",
}
# a directory inside another one: ".idea/runconfigurations" anywhere in the path
RUN_LATER_SUBDIRS = {".idea/runconfigurations": "editor run configuration (IntelliJ)",
                     "gradle/wrapper": "build configuration (the Gradle wrapper download)",
                     ".ipython": "start-up code (IPython runs its profile's scripts)",
                     ".jupyter": "server configuration (Jupyter runs it as Python)"}
RUN_LATER_FILES = {
    ".gitlab-ci.yml": "CI definition (GitLab)", ".gitlab-ci.yaml": "CI definition (GitLab)",
    ".travis.yml": "CI definition (Travis)",
    "azure-pipelines.yml": "CI definition (Azure Pipelines)",
    "azure-pipelines.yaml": "CI definition (Azure Pipelines)",
    ".azure-pipelines.yml": "CI definition (Azure Pipelines)",
    ".azure-pipelines.yaml": "CI definition (Azure Pipelines)",
    "jenkinsfile": "CI definition (Jenkins)", "appveyor.yml": "CI definition (AppVeyor)",
    ".appveyor.yml": "CI definition (AppVeyor)",
    "bitbucket-pipelines.yml": "CI definition (Bitbucket)", ".drone.yml": "CI definition (Drone)",
    ".cirrus.yml": "CI definition (Cirrus)", "cloudbuild.yaml": "CI definition (Cloud Build)",
    "cloudbuild.yml": "CI definition (Cloud Build)", "codefresh.yml": "CI definition",
    "buildspec.yml": "CI definition (AWS CodeBuild)", ".semaphore.yml": "CI definition",
    ".woodpecker.yml": "CI definition (Woodpecker)", ".woodpecker.yaml": "CI definition "
                                                                        "(Woodpecker)",
    ".readthedocs.yml": "docs build definition (Read the Docs)",
    ".readthedocs.yaml": "docs build definition (Read the Docs)",
    "readthedocs.yml": "docs build definition (Read the Docs)",
    "readthedocs.yaml": "docs build definition (Read the Docs)",
    "mkdocs.yml": "docs build configuration (MkDocs hooks and plugins)",
    "mkdocs.yaml": "docs build configuration (MkDocs hooks and plugins)",
    ".gitpod.yml": "workspace definition (Gitpod tasks)",
    ".gitpod.dockerfile": "workspace definition (Gitpod)",
    "renovate.json": "dependency bot configuration (Renovate)",
    "renovate.json5": "dependency bot configuration (Renovate)",
    ".renovaterc": "dependency bot configuration (Renovate)",
    ".renovaterc.json": "dependency bot configuration (Renovate)",
    ".pre-commit-config.yaml": "hook configuration (pre-commit)",
    ".pre-commit-config.yml": "hook configuration (pre-commit)",
    ".pre-commit-hooks.yaml": "hook configuration (pre-commit)",
    "lefthook.yml": "hook configuration (lefthook)", ".lefthook.yml": "hook configuration",
    "lefthook.yaml": "hook configuration (lefthook)", ".huskyrc": "hook configuration",
    ".lintstagedrc": "hook configuration (lint-staged)", ".envrc": "shell hook (direnv)",
    ".env": "environment file (read by compose, direnv and dotenv loaders)",
    ".gitattributes": "git attributes (filters, diff and merge drivers)",
    ".lfsconfig": "git configuration (Git LFS endpoints)",
    ".pdbrc": "debugger start-up commands", ".pdbrc.py": "debugger start-up commands",
    ".gdbinit": "debugger start-up commands",
    "makefile": "task runner (make)", "gnumakefile": "task runner (make)",
    "justfile": "task runner (just)", "taskfile.yml": "task runner (task)",
    "taskfile.yaml": "task runner (task)", "rakefile": "task runner (rake)",
    "tox.ini": "task runner (tox)", "noxfile.py": "task runner (nox)",
    "dodo.py": "task runner (doit)", "fabfile.py": "task runner (Fabric)",
    "sconstruct": "build script (SCons)", "sconscript": "build script (SCons)",
    "setup.py": "build script (setup.py)", "build.gradle": "build script (Gradle)",
    "build.gradle.kts": "build script (Gradle)", "settings.gradle": "build script (Gradle)",
    "settings.gradle.kts": "build script (Gradle)", "gradlew": "build script (Gradle)",
    "mvnw": "build script (Maven wrapper)", "pom.xml": "build configuration (Maven plugins)",
    "build.rs": "build script (Cargo)",
    "cmakelists.txt": "build script (CMake)", "meson.build": "build script (Meson)",
    "build": "build file (Bazel)", "build.bazel": "build file (Bazel)",
    "workspace": "build file (Bazel)", "workspace.bazel": "build file (Bazel)",
    "module.bazel": "build file (Bazel)", ".bazelrc": "build configuration (Bazel)",
    ".bazelversion": "toolchain pin (Bazelisk downloads and runs it)",
    ".bazeliskrc": "toolchain configuration (where Bazelisk downloads Bazel)",
    "pyproject.toml": "build configuration (its build-system and entry-point tables run "
                      "code on install)",
    "package.json": "build configuration (its scripts run on install and by npm)",
    "pipfile": "dependency definition (Pipenv: where packages come from)",
    "pipfile.lock": "dependency lock (Pipenv: what is installed)",
    "environment.yml": "dependency definition (conda)",
    "environment.yaml": "dependency definition (conda)",
    "gemfile": "dependency definition (Bundler runs it as Ruby)",
    "dockerfile": "build script (Docker)",
    "compose.yml": "container definition (Compose)", "compose.yaml": "container definition "
                                                                     "(Compose)",
    ".gitmodules": "submodule definition (CI and git fetch what it names)",
    ".npmrc": "package manager configuration (where dependencies come from)",
    ".yarnrc": "package manager configuration (where dependencies come from)",
    ".yarnrc.yml": "package manager configuration (where dependencies come from)",
    ".pnpmfile.cjs": "package manager hook (pnpm runs it on install)",
    ".pnpmfile.mjs": "package manager hook (pnpm runs it on install)",
    ".pylintrc": "linter configuration (its init-hook and plugins run code)",
    "pylintrc": "linter configuration (its init-hook and plugins run code)",
    ".flake8": "linter configuration (local plugins run code)",
    "mypy.ini": "type checker configuration (plugins run code)",
    ".mypy.ini": "type checker configuration (plugins run code)",
    "procfile": "deploy definition", "netlify.toml": "deploy definition",
    "vercel.json": "deploy definition",    "poetry.lock": "dependency lock (Poetry: what is installed, from where)",
    "uv.lock": "dependency lock (uv: what is installed, from where)",
    "pdm.lock": "dependency lock (PDM: what is installed, from where)",
    "package-lock.json": "dependency lock (npm: what is installed, from where)",
    "npm-shrinkwrap.json": "dependency lock (npm: what is installed, from where)",
    "yarn.lock": "dependency lock (Yarn: what is installed, from where)",
    "pnpm-lock.yaml": "dependency lock (pnpm: what is installed, from where)",
    "gemfile.lock": "dependency lock (Bundler: what is installed, from where)",
    "cargo.lock": "dependency lock (Cargo: what is installed, from where)",
    "composer.json": "dependency definition (Composer scripts run code)",
    "composer.lock": "dependency lock (Composer: what is installed, from where)",
    "hatch.toml": "build and environment configuration (Hatch runs its scripts)",
    "pixi.toml": "task runner and environments (pixi)",
    "deno.json": "task runner (Deno tasks)",
    "deno.jsonc": "task runner (Deno tasks)",
    "mise.toml": "tool manager (mise runs its hooks and tasks)",
    ".mise.toml": "tool manager (mise runs its hooks and tasks)",
    ".tool-versions": "tool manager (asdf/mise install what it names)",
    "devbox.json": "environment definition (Devbox runs its init hooks)",
    "shell.nix": "environment definition (nix-shell evaluates it)",
    "flake.nix": "environment definition (nix evaluates it)",
    "default.nix": "environment definition (nix evaluates it)",
    "gunicorn.conf.py": "server configuration (gunicorn runs it as Python)",
    "tiltfile": "development runner (Tilt runs it)",
    "vagrantfile": "machine definition (Vagrant runs it as Ruby)",
    "earthfile": "build script (Earthly)",
    "fly.toml": "deploy definition",
    "render.yaml": "deploy definition",
    ".replit": "runner configuration (Replit)",
    "replit.nix": "environment definition",
    ".lintstagedrc.json": "hook configuration (lint-staged)",
    ".lintstagedrc.yml": "hook configuration (lint-staged)",
    ".lintstagedrc.yaml": "hook configuration (lint-staged)",
    ".huskyrc.json": "hook configuration",
    ".simple-git-hooks.json": "hook configuration",
    ".simple-git-hooks.js": "hook configuration",
    ".releaserc": "release configuration",
    ".releaserc.json": "release configuration",
    ".releaserc.yml": "release configuration",
    "nodemon.json": "development runner (nodemon)",
    "nx.json": "task runner (Nx)",
    "turbo.json": "task runner (Turborepo)",
    "dangerfile.js": "CI script (Danger)",
    "dangerfile.ts": "CI script (Danger)",
    ".rprofile": "start-up code (R)",
    ".dir-locals.el": "editor start-up code (Emacs)",
    ".exrc": "editor start-up code (vi)",
    ".nvimrc": "editor start-up code (Neovim)",
    ".nvim.lua": "editor start-up code (Neovim)",
    ".lldbinit": "debugger start-up commands",
    "configure": "build script (configure)",
}
# where the tool looks at the top of the repository only: elsewhere the name is ordinary
# code (a Celery app's tasks.py)
RUN_LATER_TOP = {"tasks.py": "task runner (invoke)", "tasks/__init__.py": "task runner (invoke)",
                 "fabfile/__init__.py": "task runner (Fabric)"}
RUN_LATER_PATTERNS = (("*.mk", "task runner (make include)"),
                      ("dockerfile.*", "build script (Docker)"),
                      ("*.dockerfile", "build script (Docker)"),
                      ("docker-compose*.yml", "container definition (Compose)"),
                      ("docker-compose*.yaml", "container definition (Compose)"),
                      ("*.bzl", "build file (Bazel)"),
                      ("sconscript*", "build script (SCons)"),
                      ("*.run.xml", "editor run configuration (IntelliJ)"),
                      (".env.*", "environment file (read by compose, direnv and dotenv "
                                 "loaders)"),
                      ("requirements*.txt", "dependency definition (pip)"),
                      ("constraints*.txt", "dependency definition (pip)"),
                      ("*.gemspec", "build script (RubyGems runs it as Ruby)"),
                      ("gruntfile.*", "task runner (Grunt)"),
                      ("gulpfile.*", "task runner (gulp)"),
                      ("jakefile*", "task runner (Jake)"))
EDITOR_TASKS = {".vscode/tasks.json", ".vscode/launch.json", ".vscode/settings.json",
                ".idea/workspace.xml", ".theia/tasks.json"}
RUN_LATER_PAIRS = {".cargo/config": "build configuration (Cargo runners and aliases)",
                   ".cargo/config.toml": "build configuration (Cargo runners and aliases)"}
# JavaScript and TypeScript tools load their configuration by running it
JS_SUFFIXES = ("js", "cjs", "mjs", "ts", "cts", "mts")
JS_TOOLS = frozenset({
    "webpack", "rollup", "vite", "vitest", "jest", "babel", "eslint", "prettier", "postcss",
    "tailwind", "next", "nuxt", "svelte", "astro", "playwright", "cypress", "karma",
    "stylelint", "commitlint", "lint-staged", "release", "tsup", "esbuild", "gatsby",
    "metro", "craco", "vue", "quasar", "nodemon", "docusaurus", "wdio", "nightwatch",
    "ava", "protractor", "snowpack", "parcel", "electron-builder", "remix", "turbo",
    "knip", "size-limit", "drizzle", "codegen", "lefthook", "histoire", "unocss", "windi"})


def _js_config(name: str) -> str | None:
    """'rc' for `.eslintrc.js`-style files, the tool for `webpack.config.js`-style ones, ""
    for another `NAME.config.js`/`NAME.conf.js`, None when `name` is neither."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or suffix not in JS_SUFFIXES:
        return None
    if stem.startswith(".") and stem.endswith("rc"):
        return "rc"
    tool, dot, kind = stem.rpartition(".")
    if dot and kind in ("config", "conf") and tool:
        return tool if tool in JS_TOOLS else ""
    return None


def run_later_kind(rel: str, tree: set[str] | frozenset[str] = frozenset()) -> str | None:
    """What runs `rel` later, by its name and place (`tree`: the paths around it, before and
    after the change, in lower case), or None when nothing does."""
    parts = _lower_parts(rel)
    name = parts[-1]
    where = "/" + "/".join(parts[:-1]) + "/"
    if "/".join(parts[-2:]) in EDITOR_TASKS:
        return "editor task file (the editor runs what it names)"
    if "/".join(parts[-2:]) in RUN_LATER_PAIRS:
        return RUN_LATER_PAIRS["/".join(parts[-2:])]
    if ".git" in parts[:-1] and parts[parts.index(".git") + 1:][:1] == ["hooks"]:
        return "git hook"
    if name in RUN_LATER_FILES:
        return RUN_LATER_FILES[name]
    if "/".join(parts) in RUN_LATER_TOP:
        return RUN_LATER_TOP["/".join(parts)]
    for pattern, what in RUN_LATER_PATTERNS:
        if fnmatch.fnmatchcase(name, pattern):
            return what
    for sub, what in RUN_LATER_SUBDIRS.items():
        if f"/{sub}/" in where:
            return what
    folder = rel.rpartition("/")[0].lower()
    beside = (lambda other: f"{folder}/{other}" if folder else other)
    if name == "conf.py" and ({"docs", "doc"} & set(parts[:-1]) or
                              {beside("index.rst"), beside("index.md")} & tree):
        return "docs build configuration (Sphinx runs conf.py)"
    tool = _js_config(name)
    if tool:
        return "tool configuration (the JavaScript tool runs it when it loads it)"
    if tool == "" and (len(parts) == 1 or beside("package.json") in tree):
        return "tool configuration (a JavaScript tool beside package.json runs it)"
    if name in ("docs", "doc"):     # a link standing for a docs directory
        return "docs directory (link): Sphinx and MkDocs run the configuration in it"
    # in such a directory, or the directory itself (a link to one elsewhere)
    return next((RUN_LATER_DIRS[p] for p in parts if p in RUN_LATER_DIRS), None)


def run_later(rel: str, kind: str, allowed: tuple[str, ...] | list[str] = (),
              tree: set[str] | frozenset[str] = frozenset(),
              run_by: dict[str, str] | None = None) -> str | None:
    """Why an added or modified `rel` is a file another tool runs later (and so protected),
    or None: it is not one, it was removed, or `allowed` (-allow-change) names it. `tree`
    holds the paths around it in lower case; `run_by` maps a script to the run-later file that
    names it (`named_to_run`)."""
    if kind == "removed" or any(fnmatch.fnmatchcase(rel, glob) for glob in allowed):
        return None
    what = run_later_kind(rel, tree)
    if what is None and run_by and rel in run_by:
        return (f"run later: {rel}: {run_by[rel]} runs it, so other tools execute it after "
                "the change is accepted; allow it with -allow-change")
    if what is None:
        return None
    return (f"run later: {rel}: {what}, which other tools execute after the change is "
            "accepted; allow it with -allow-change")


# What a run-later file names that runs: a word after one of these programs or options...
RUNNERS = frozenset({
    "python", "python3", "python2", "py", "pypy", "pypy3", "node", "nodejs", "deno", "bun",
    "tsx", "ts-node", "ruby", "perl", "php", "lua", "bash", "sh", "zsh", "dash", "ksh", "fish",
    "source", ".", "pwsh", "powershell", "exec", "eval", "env", "sudo", "xargs", "call",
    "run", "start", "nohup", "time", "nice",
    "-f", "--file", "-r", "--requirement", "-c", "--constraint", "--config", "-e",
    "--rcfile", "--init-file", "-x", "include", "-include"})
# ...any word naming a script of these kinds...
SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".fish", ".ksh", ".ps1", ".psm1", ".bat",
                   ".cmd", ".mk", ".bzl")
# ...or the first word of a command, when what it names can run or configure a run
RUNNABLE = (".py", ".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".rb", ".pl", ".php",
            ".lua", ".yml", ".yaml", ".toml", ".cfg", ".ini", ".json", ".xml", ".groovy",
            ".gradle", ".kts", ".nix", ".jl", ".r", ".txt") + SCRIPT_SUFFIXES
_LINE_KEY = re.compile(r"^\s*(?:-\s+)*(?:[A-Za-z0-9_.\-]+\s*[:=](?:\s+|$))?")
_SEPARATORS = re.compile(r"&&|\|\||\$\(|\$\{|[;|`()=<]")
_STRIP = "\"'`,;:()[]{}<>=\\"
_IMPORT = re.compile(r"^\s*(?:from|import)\s+(\w+)", re.M)
NOT_RUN = ("license", "licence", "copying", "readme", "notice", "authors", "changelog")
# run-later files whose words name paths to match, never a program to run: an attribute
# (`pkg/more.py merge=union`, `*.csv linguist-generated`) runs nothing; a filter, diff or
# merge driver it names runs the command git's own configuration gives, not the named file.
# CODEOWNERS names reviewers' files.
LISTS_PATHS = frozenset({".gitattributes", "codeowners"})
NAMED_LIMIT = 1_000_000      # bytes read of one run-later file
NAMED_FILES = 2_000          # run-later files read in one check


def _words_that_run(text: str, make: bool, every: bool) -> list[str]:
    """The words of a run-later file's text in a place where they may name something it
    runs (see RUNNERS, SCRIPT_SUFFIXES, RUNNABLE): in a Makefile, commands on recipe lines
    only; with `every`, every word (a file that lists the hooks it loads)."""
    found = []
    for line in text.splitlines():
        if len(line) > 4000:
            line = line[:4000]
        recipe = not make or line.startswith("\t")
        for n, segment in enumerate(_SEPARATORS.split(line[_LINE_KEY.match(line).end():])):
            words = [w.strip(_STRIP) for w in segment.split()]
            for i, word in enumerate(words):
                if not word or word.startswith(("-", "$", "%")) and "/" not in word:
                    continue
                low = word.lower()
                before = words[i - 1].lower().rpartition("/")[2] if i else ""
                runs = every or low.endswith(SCRIPT_SUFFIXES) or word.startswith("./") or (
                    recipe and (i == 0 or before in RUNNERS or before.startswith("python")))
                if runs:
                    found.append(word)
                if before == "-m" and recipe and re.fullmatch(r"[\w.]+", word):
                    module = word.replace(".", "/")     # python -m tools.ci
                    found += [module + ".py", module + "/__main__.py"]
    return found


def _backend(text: str) -> list[str]:
    """The in-tree build backend a pyproject.toml names (`backend-path` and
    `build-backend`): pip runs it on install."""
    module = re.search(r"^\s*build-backend\s*=\s*[\"']([\w.]+)", text, re.M)
    where = re.search(r"^\s*backend-path\s*=\s*\[([^\]]*)\]", text, re.M)
    if not module or not where:
        return []
    path = module.group(1).partition(":")[0].replace(".", "/")
    return [f"{folder.strip()}/{path}{end}" for folder in re.findall(r"[\"']([^\"']*)[\"']",
                                                                      where.group(1))
            for end in (".py", "/__init__.py")]


def _runnable(path: str) -> bool:
    name = path.rpartition("/")[2].lower()
    suffix = "." + name.rpartition(".")[2] if "." in name.lstrip(".") else ""
    return (not suffix and not name.startswith(NOT_RUN)) or suffix in RUNNABLE


def _resolve(word: str, folder: str, paths: dict[str, str],
             names: dict[str, list[str]]) -> list[str]:
    """The file of the tree (`paths`: lowered path -> path; `names`: lowered file name ->
    paths) that `word`, written in a file in `folder`, names: relative to that folder or to
    the top (after a `$VAR/` or `${{ ... }}/` prefix), a local action directory's
    `action.yml`, or else, for a word that looks like a path run from a directory of its own
    (`cd tools && ./ci.sh`), every file of the tree whose path ends with it."""
    if "://" in word or len(word) > 500:
        return []
    word = re.sub(r"^.*(?:[$}%~][^/]*)/", "", word.replace("\\", "/")).lstrip("/")
    if not word:
        return []
    for base in dict.fromkeys((folder, "")):
        clean = posixpath.normpath(posixpath.join(base, word)).lower()
        if clean.startswith("..") or clean == ".":
            continue
        for candidate in (clean, clean + "/action.yml", clean + "/action.yaml"):
            found = paths.get(candidate)
            if found is not None and _runnable(found):
                return [found]
    clean = posixpath.normpath(word).lower()
    if "." not in clean.rpartition("/")[2] and "/" not in clean or clean.startswith(".."):
        return []
    return [p for p in names.get(clean.rpartition("/")[2], ())
            if p.lower().endswith("/" + clean) and _runnable(p)]


def _own(rel: str) -> bool:
    """Whether `rel` is the project's own, not a dependency's or version control's."""
    return not ({".git", "node_modules", "site-packages", ".venv", "venv", ".tox", ".nox"}
                & set(rel.lower().split("/")[:-1]))


def named_to_run(before: set[str], changes: Changes, original: Callable[[str], bytes | None],
                 current: Callable[[str], bytes | None],
                 drivers: list[tuple[str, str]] = ()) -> dict[str, str]:
    """Every file of the tree that a run-later file names to run (`bash tools/ci.sh`,
    `entry: python tools/lint.py`, `./scripts/deploy.sh`, a Makefile recipe, a hook file
    `mkdocs.yml` lists), or that a command of git's configuration runs (`drivers`: (key,
    command) of filter, diff and merge drivers, run from the top), and the files those name
    in turn: file -> the file (or key) that names it. Read: each run-later file at the base
    (`original`) and as changed (`current`), up to NAMED_LIMIT bytes each and NAMED_FILES
    files in all."""
    removed = set(changes.removed)
    tree = (set(before) | set(changes.added)) - removed
    paths = {p.lower(): p for p in sorted(tree)}
    lowered = frozenset(paths)
    names: dict[str, list[str]] = {}
    for low, path in paths.items():
        names.setdefault(low.rpartition("/")[2], []).append(path)
    changed = set(changes.added) | set(changes.modified)
    runs = lambda p: _own(p) and run_later_kind(p, lowered) and \
        p.rpartition("/")[2].lower() not in LISTS_PATHS
    queue = [(p, original) for p in sorted(before) if runs(p)]
    queue += [(p, current) for p in sorted(changed) if runs(p)]
    run_by: dict[str, str] = {}
    for key, command in drivers:
        for word in _words_that_run(command[:4000], False, False):
            for target in _resolve(word, "", paths, names):
                if target not in run_by:
                    run_by[target] = f"git's configuration ({key})"
                    queue += [(target, read) for read, where in ((original, before),
                                                                 (current, changed))
                              if target in where]
    seen: set[tuple[str, bool]] = set()
    for rel, read in queue:
        if (rel, read is current) in seen or len(seen) >= NAMED_FILES:
            continue
        seen.add((rel, read is current))
        try:
            data = read(rel)
        except OSError:
            data = None
        if not data or len(data) > NAMED_LIMIT or b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", "replace")
        name = rel.rpartition("/")[2].lower()
        make = name in ("makefile", "gnumakefile") or name.endswith(".mk")
        folder = rel.rpartition("/")[0]
        every = name in ("mkdocs.yml", "mkdocs.yaml")
        words = _words_that_run(text, make, every)
        if name == "pyproject.toml":
            words += _backend(text)
        targets = [t for word in words for t in _resolve(word, folder, paths, names)]
        if name.endswith(".py") and folder:
            # a script imports its neighbours first (its directory is sys.path[0]); at the
            # top they are the project's own code
            targets += [paths[low] for module in sorted(set(_IMPORT.findall(text)))
                        for low in (f"{folder}/{module}.py".lower(),
                                    f"{folder}/{module}/__init__.py".lower()) if low in paths]
        for target in targets:
            if target == rel or target in run_by:
                continue
            run_by[target] = rel
            if target in before:
                queue.append((target, original))
            if target in changed:
                queue.append((target, current))
    return run_by


def new_tests(changes: Changes, facts: Facts | None = None) -> list[str]:
    """Added files that are tests, by name or place (allowed, and run in a pass of their own)."""
    dirs = facts.test_dirs if facts else set()
    return sorted(p for p in changes.added
                  if _is_code(p) and (is_test_path(p) or p.rpartition("/")[0] in dirs))


def doctest_text(source: bytes) -> dict[str, object] | None:
    """What a module's doctests are made of: for each docstring holding examples (by
    qualified name, "" for the module), each example's source, expected output and expected
    exception; plus every statement that assigns a docstring or `__test__`. None when the
    source does not parse."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    parser = doctest.DocTestParser()
    found: dict[str, object] = {}
    todo: list[tuple[ast.AST, str]] = [(module, "")]
    while todo:
        node, name = todo.pop()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc and ">>>" in doc:
                try:
                    found[name] = [(e.source, e.want, e.exc_msg)
                                   for e in parser.get_examples(doc, name)]
                except ValueError:
                    found[name] = doc       # examples doctest itself cannot parse
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                todo.append((child, f"{name}.{child.name}" if name else child.name))
            elif hasattr(child, "body") or isinstance(child, ast.excepthandler):
                todo.append((child, name))      # if, try, with, for: definitions inside
    naming = sorted(ast.dump(node) for node in ast.walk(module)
                    if isinstance(node, ast.stmt) and _names_doctests(node))
    if naming:
        found[" assignments"] = naming
    return found


def _names_doctests(statement: ast.stmt) -> bool:
    """A statement whose own expressions (not those of the statements inside it) name
    `__doc__` or `__test__`: an assignment, a setattr, a decorator that could set them."""
    for field_name, value in ast.iter_fields(statement):
        if field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, ast.AST):
                continue
            for inner in ast.walk(item):
                if isinstance(inner, ast.Name) and inner.id in DOCTEST_NAMES or \
                        isinstance(inner, ast.Attribute) and inner.attr in DOCTEST_NAMES or \
                        isinstance(inner, ast.Constant) and inner.value in DOCTEST_NAMES:
                    return True
    return False


def _doctest_names(rel: str, text: dict[str, object]) -> set[str]:
    """The ends of the names doctest gives the tests in module `rel` (`mod`, `mod.func`,
    `mod.Class.method`; the package's name for an `__init__.py`)."""
    parts = rel[:-3].split("/")
    stem = parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]
    names = {f"{stem}.{q}" if q else stem for q in text if not q.startswith(" ")}
    if " assignments" in text:
        names.add(f"{stem}.__test__")
    return names


def _is_doctest_of(test_id: str, names: set[str]) -> bool:
    name = test_id.rsplit("::", 1)[-1]
    return any(name == n or name.endswith("." + n) or n.endswith(".__test__")
               and (name.startswith(n + ".") or f".{n}." in name) for n in names)


def doctest_changes(changes: Changes, tests: dict[str, str], files: dict[str, str],
                    original, current) -> dict[str, str]:
    """For each changed module whose doctests the baseline ran (`tests`: its test ids,
    `files`: test id -> the file it came from): why the change is protected, or "" when the
    doctests' text is as it was (the module is code). `original(rel)` and `current(rel)` give
    the file's content before and now (None when absent or unreadable).

    A module that also gave the baseline tests that are not its doctests stays a test file."""
    found = {}
    for kind, paths in (("modified", changes.modified), ("removed", changes.removed)):
        for rel in paths:
            if not rel.endswith(".py"):
                continue
            old_source = original(rel)
            before = doctest_text(old_source) if old_source is not None else None
            if not before:
                continue
            names = _doctest_names(rel, before)
            ran = [t for t in tests if (files.get(t) in (rel, None) or "::" not in t)
                   and _is_doctest_of(t, names)]
            if not ran:
                continue
            own = [t for t, f in files.items() if f == rel]
            if any(not _is_doctest_of(t, names) for t in own):
                continue            # it holds other tests too: a test file like any other
            if kind == "removed":
                found[rel] = (f"doctest: the baseline ran doctests in {rel} ({ran[0]}), and "
                              "the run deleted it")
                continue
            new_source = current(rel)
            after = doctest_text(new_source) if new_source is not None else None
            if after != before:
                found[rel] = (f"doctest: the run changed the doctests in {rel} (their "
                              "examples, expected output or docstrings are tests the "
                              f"baseline ran, e.g. {ran[0]})")
            else:
                found[rel] = ""
    return found
