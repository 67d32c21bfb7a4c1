"""What golem's test runners share: the `Runner` protocol the registry (runners/__init__.py),
the plan (suite.py) and `-repeat` (repeat.py) consume, the `TestCommand` detection chooses,
the `Tree` a runner's detection reads, the `Call` it turns into a command line, and the
`Outcomes` its evidence parser reads. The runner modules import these from here."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from typing import Protocol

FAILING = ("failed", "error")


@dataclass
class TestCommand:
    """The command that defines success, and how golem reads its results."""

    argv: list[str]
    runner: str         # a name in runners.RUNNERS whose evidence golem reads, or "exit-code"
    origin: str         # "-test" or "detected: <why>"

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


@dataclass
class Candidate:
    """A command a runner's detection proposes for a tree: the strongest one is run."""

    argv: list[str]
    why: str            # what in the tree says so ("go.mod", "tests/ directory")
    strength: int       # which wins: see the table in docs/cli.md ("Test command detection")


@dataclass
class Call:
    """One run of a pinned test command, for a runner to turn into the command line golem
    starts (`Runner.argv`)."""

    command: list[str]          # the test command as given or detected
    program: str                # its program, or the test interpreter, by absolute path
    cwd: str                    # where the suite runs (the workspace or a copy of it)
    scratch: object             # the run's RunScratch: its bytecode cache (`pycache`)
    helpers: str                # golem's read-only helpers directory
    only: str | None = None     # one test to run alone (what `Runner.alone` returned)
    result: str | None = None   # where a runner that writes a result file puts it
    write_cache: bool = False   # the interpreter may write golem's bytecode cache
    pins: dict | None = None    # what the baseline pinned (pytest: rootdir, inifile, ...)

    @property
    def pinned(self) -> list[str]:
        """The test command with its program by absolute path."""
        return [self.program, *self.command[1:]]


@dataclass
class Outcomes:
    """What a runner's evidence says: each test's outcome, the ids that stand for a file,
    package or build that failed as a whole, and why the evidence cannot be trusted."""

    tests: dict[str, str]
    pseudo: set[str]
    problem: str | None = None
    output: str | None = None   # the readable output, when the evidence was the output


class Runner(Protocol):
    """A test runner golem knows: how to find it in a tree, run it, read it and re-run one
    of its tests. Registered by name in `RUNNERS` (runners/__init__.py)."""

    name: str           # its key in RUNNERS; TestCommand.runner for the commands it reads
    evidence: str | None    # SuiteResult.evidence when golem reads its results; None: exit code
    reads: str          # where the evidence is: "stream" (golem's records), "output" (the
                        # command's output), "file" (a result file), "" (none)
    python: bool        # runs under the test interpreter golem pins (its modules, its cache)
    trust: str          # "" or what a verdict adds on how far its evidence is trusted
    looks_for: str      # what detection looks for, said when no runner found anything
    homes: dict[str, str]   # variables naming its toolchain's directories, and where they
                            # are under the user's home when unset (CARGO_HOME: .cargo)

    def claims(self, argv: list[str]) -> bool:
        """Whether golem reads this command's results this runner's way."""
        ...

    def detect(self, tree: Tree) -> list[Candidate]:
        """The commands this runner proposes for `tree`, each with its strength."""
        ...

    def argv(self, call: Call) -> list[str]:
        """The command line golem starts for one run of the suite."""
        ...

    def parse(self, text: str, cwd: str) -> Outcomes:
        """Each test's outcome from the command's output or result file (`reads`); raises
        ValueError, KeyError or TypeError on a file it cannot read."""
        ...

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        """What `Call.only` must be to run `test_id` alone, given the run's `files` (test id
        -> the file it came from); None when the whole suite must run again."""
        ...


def is_python(program: str) -> bool:
    return re.fullmatch(r"python(\d(\.\d+)?)?", os.path.basename(program)) is not None


def options_end(argv: list[str], start: int) -> int:
    """Index of the first argument from `start` on that is not an option."""
    index = start
    while index < len(argv) and argv[index].startswith("-"):
        index += 1
    return index


def merge(tests: dict[str, str], test_id: str, outcome: str) -> None:
    """Record an outcome; a failure is never overwritten by a later success for the same id."""
    if tests.get(test_id) in FAILING and outcome not in FAILING:
        return
    tests[test_id] = outcome


def relative(path: str, root: str) -> str:
    """`path` (a file URL, an absolute path) relative to `root` when it is inside it."""
    if path.startswith("file://"):
        path = path[len("file://"):]
    if os.path.isabs(path):
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return path


def plain(script: str) -> list[str] | None:
    """A script's words when it has no shell syntax (a command golem can run without a
    shell), else None."""
    if re.search(r"[|&;<>()$`\\\n*?\[\]~]", script):
        return None
    try:
        return shlex.split(script) or None
    except ValueError:
        return None


# what `npm init` writes when there are no tests: not a test script
NPM_PLACEHOLDER = re.compile(r"echo\s.*no test specified")
SKIPPED_DIRS = frozenset({"node_modules", "venv", "__pycache__", "build", "dist",
                          "site-packages", "target"})


class Tree:
    """The repository as detection reads it: files read once each, at most so much of
    each; nothing in it is run. `env` is the environment test commands get (the project's
    virtual environment activated), for what is installed where the tests will run."""

    def __init__(self, root: str, env: dict[str, str]):
        self.root, self.env = root, env
        self._texts: dict[str, str] = {}
        self._package_tests: list[tuple[str, str]] | None = None

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.path(rel))

    def isdir(self, rel: str) -> bool:
        return os.path.isdir(self.path(rel)) and not os.path.islink(self.path(rel))

    def read(self, rel: str, limit: int = 1_000_000) -> str:
        """The start of a file as text ("" when it cannot be read)."""
        if rel not in self._texts:
            try:
                with open(self.path(rel), "rb") as handle:
                    text = handle.read(limit).decode("utf-8", errors="replace")
            except OSError:
                text = ""
            self._texts[rel] = text
        return self._texts[rel]

    def listing(self, rel: str = "") -> list[str]:
        """The names in a directory of the tree, sorted (at most a few thousand)."""
        try:
            return sorted(os.listdir(self.path(rel) if rel else self.root))[:5000]
        except OSError:
            return []

    def holds_python(self, rel: str) -> bool:
        """Whether a directory has a Python file in it or one level down."""
        for name in self.listing(rel):
            if name.endswith(".py"):
                return True
            sub = f"{rel}/{name}"
            if name not in SKIPPED_DIRS and self.isdir(sub) and \
                    any(n.endswith(".py") for n in self.listing(sub)):
                return True
        return False

    def package_tests(self) -> list[tuple[str, str]]:
        """The test directories inside the tree's packages, as (the directory a package
        is imported from, the test directory): `pkg/tests` is ("", "pkg/tests"),
        `src/pkg/test` is ("src", "src/pkg/test"). A test directory holds `test*.py` files,
        in it or one level down."""
        if self._package_tests is None:
            self._package_tests = self._find_package_tests()
        return self._package_tests

    def _find_package_tests(self) -> list[tuple[str, str]]:
        found = []
        tops = [""] + (["src"] if self.isdir("src") and not self.exists("src/__init__.py")
                       else [])
        for top in tops:
            for name in self.listing(top)[:500]:
                package = f"{top}/{name}" if top else name
                if name.startswith(".") or name in SKIPPED_DIRS or \
                        not os.path.isfile(self.path(f"{package}/__init__.py")):
                    continue
                for sub in ("tests", "test"):
                    folder = f"{package}/{sub}"
                    if self.isdir(folder) and self._has_tests(folder):
                        found.append((top, folder))
        return found

    def _has_tests(self, folder: str) -> bool:
        for name in self.listing(folder):
            if name.startswith("test") and name.endswith(".py"):
                return True
            if self.isdir(f"{folder}/{name}") and any(
                    n.startswith("test") and n.endswith(".py")
                    for n in self.listing(f"{folder}/{name}")):
                return True
        return False

    def package_script(self) -> str | None:
        """The test script of `package.json`, if it has a real one (not npm's placeholder)."""
        if not os.path.isfile(self.path("package.json")):
            return None
        try:
            scripts = json.loads(self.read("package.json")).get("scripts", {})
        except (ValueError, AttributeError):
            return None
        script = scripts.get("test") if isinstance(scripts, dict) else None
        if not isinstance(script, str) or not script.strip() or NPM_PLACEHOLDER.search(script):
            return None
        return script

    def installed(self, module: str) -> bool:
        """Whether `module` is installed for the `python3` the tests run with (the first on
        the environment's PATH): its console script beside that python, or the package in
        its prefix's site-packages (and its base's, for a virtual environment that includes
        the system's). Read from the file system: nothing is run."""
        python = shutil.which("python3", path=self.env.get("PATH"))
        if not python:
            return False
        folders = [os.path.dirname(python)]
        config = os.path.join(os.path.dirname(folders[0]), "pyvenv.cfg")
        try:
            with open(config, encoding="utf-8", errors="replace") as handle:
                settings = dict(line.split("=", 1) for line in handle.read(10_000).splitlines()
                                if "=" in line)
        except OSError:
            settings = {}
        settings = {k.strip(): v.strip() for k, v in settings.items()}
        if settings.get("include-system-site-packages", "").lower() == "true" and \
                settings.get("home"):
            folders.append(settings["home"])
        for folder in folders:
            if os.path.isfile(os.path.join(folder, module)):
                return True
            prefix = os.path.dirname(folder)
            for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages",
                            "lib/python3/dist-packages"):
                for site in glob.glob(os.path.join(glob.escape(prefix), pattern)):
                    if os.path.isfile(os.path.join(site, module, "__init__.py")):
                        return True
        return False
