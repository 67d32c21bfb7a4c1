"""The test command: which one to run, and what each test did when it ran.

Outcomes are read from files golem owns, outside the workspace, never from stdout that the
code under test could forge: unittest runs under golem's driver, which writes JSON; pytest
writes JUnit XML; `node --test` and jest write JSON (golem/workflow/runners.py). `go test`
is the exception: its `-json` event stream comes from stdout. Any other runner is judged by
its exit code alone, and the verdict says so.

Detection, when `-test` is absent (first rule that matches wins):
1. pytest configuration (`pytest.ini`, `conftest.py` at the top, `[tool.pytest.ini_options]`
   in pyproject.toml, `[tool:pytest]` in setup.cfg, `[pytest]` in tox.ini): `python3 -m pytest`
2. a `tests/` or `test/` directory, or `test*.py` at the top: `python3 -m unittest discover`
   (`-s DIR`, plus `-t .` when DIR is a package)
3. `go.mod`: `go test ./...`; `Cargo.toml`: `cargo test`; `package.json` with a test script:
   `npm test`; a Makefile with a `test:` target: `make test`
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from importlib import resources

from golem.errors import UsageError
from golem.tools import process
from golem.workflow import runners

FAILING = ("failed", "error")
EVIDENCE = {"unittest": "unittest-json", "pytest": "junit-xml", "go": "go-json",
            "node": "node-json", "jest": "jest-json"}
GO_CAP = 32_000_000     # the go event stream is the evidence: keep far more of it


@dataclass
class TestCommand:
    """The command that defines success, and how golem reads its results."""

    argv: list[str]
    runner: str         # "unittest", "pytest", "go", "node", "jest" or "exit-code"
    origin: str         # "-test" or "detected: <why>"

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


@dataclass
class SuiteResult:
    """One run of the suite. `tests` is None when only the exit code is known."""

    exit_code: int | None
    timed_out: bool
    output: str
    elapsed: float
    evidence: str                               # a value of EVIDENCE, or "exit-code"
    tests: dict[str, str] | None = None         # test id -> passed/failed/error/skipped/xfail/xpass
    pseudo: set[str] = field(default_factory=set)   # ids that stand for import or setup errors
    problem: str | None = None                  # why the evidence cannot be trusted

    @property
    def failing(self) -> list[str]:
        return sorted(t for t, o in (self.tests or {}).items() if o in FAILING)

    @property
    def passed(self) -> bool:
        """Green: exit 0, no failing test, trustworthy evidence."""
        return (self.exit_code == 0 and not self.timed_out and self.problem is None
                and not self.failing)

    def summary(self) -> str:
        if self.tests is not None:
            counts = _counts(self.tests) or {}
            parts = [f"{n} {o}" for o, n in sorted(counts.items())] or ["no tests"]
            text = f"{len(self.tests)} tests: " + ", ".join(parts)
        else:
            text = "exit code only"
        state = "timed out" if self.timed_out else f"exit {self.exit_code}"
        problem = f"; {self.problem}" if self.problem else ""
        return f"{'passing' if self.passed else 'failing'} ({text}; {state}{problem})"

    def to_json(self) -> dict:
        return {"passed": self.passed, "exit_code": self.exit_code, "timed_out": self.timed_out,
                "evidence": self.evidence, "failing": self.failing,
                "counts": _counts(self.tests), "problem": self.problem}


def _counts(tests: dict[str, str] | None) -> dict[str, int] | None:
    if tests is None:
        return None
    counts: dict[str, int] = {}
    for outcome in tests.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def _is_python(program: str) -> bool:
    return re.fullmatch(r"python(\d(\.\d+)?)?", os.path.basename(program)) is not None


def runner_of(argv: list[str]) -> str:
    """Which result format golem can read from this command."""
    if not argv:
        return "exit-code"
    name = os.path.basename(argv[0])
    if name in ("pytest", "py.test") or (_is_python(argv[0]) and argv[1:3] == ["-m", "pytest"]):
        return "pytest"
    if _is_python(argv[0]) and argv[1:3] == ["-m", "unittest"]:
        return "unittest"
    if runners.is_go(argv):
        return "go"
    if runners.is_node(argv):
        return "node"
    if runners.is_jest(argv):
        return "jest"
    return "exit-code"


def parse_command(text: str) -> TestCommand:
    """The `-test` flag: split like a shell would, run without one."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"cannot parse -test {text!r}: {exc}") from None
    if not argv:
        raise UsageError("-test is empty; give the command that runs the suite")
    return TestCommand(argv, runner_of(argv), "-test")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(1_000_000)
    except OSError:
        return ""


def detect(root: str) -> TestCommand:
    """Choose the test command for the repository at `root` (rules in the module docstring)."""
    def exists(*parts: str) -> bool:
        return os.path.exists(os.path.join(root, *parts))

    pytest_signs = [("pytest.ini", None), ("conftest.py", None),
                    ("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"),
                    ("tox.ini", "[pytest]")]
    for name, marker in pytest_signs:
        if exists(name) and (marker is None or marker in _read(os.path.join(root, name))):
            argv = ["python3", "-m", "pytest"]
            return TestCommand(argv, "pytest", f"detected: {name}")
    for folder in ("tests", "test"):
        if os.path.isdir(os.path.join(root, folder)):
            argv = ["python3", "-m", "unittest", "discover", "-s", folder]
            if exists(folder, "__init__.py"):
                argv += ["-t", "."]
            return TestCommand(argv, "unittest", f"detected: {folder}/ directory")
    if any(n.startswith("test") and n.endswith(".py") for n in os.listdir(root)):
        return TestCommand(["python3", "-m", "unittest", "discover"], "unittest",
                           "detected: test*.py files")
    if exists("go.mod"):
        return TestCommand(["go", "test", "./..."], "go", "detected: go.mod")
    if exists("Cargo.toml"):
        return TestCommand(["cargo", "test"], "exit-code", "detected: Cargo.toml")
    if exists("package.json"):
        try:
            scripts = json.loads(_read(os.path.join(root, "package.json"))).get("scripts", {})
        except (ValueError, AttributeError):
            scripts = {}
        if isinstance(scripts, dict) and "test" in scripts:
            return TestCommand(["npm", "test"], "exit-code", "detected: package.json test script")
    for name in ("Makefile", "makefile", "GNUmakefile"):
        if exists(name) and re.search(r"^test\s*:", _read(os.path.join(root, name)), re.M):
            return TestCommand(["make", "test"], "exit-code", f"detected: {name} test target")
    raise UsageError(f"cannot tell how to run the tests in {root}; pass -test 'COMMAND'")


def _scratch_file(scratch: str, stem: str, suffix: str) -> str:
    return os.path.join(scratch, f"{stem}-{os.urandom(6).hex()}{suffix}")


def _instrument(command: TestCommand, scratch: str,
                only: str | None = None) -> tuple[list[str], str | None, list[str]]:
    """The argv to run so results land where golem reads them, the result file's path, and
    helper files to remove afterwards. `only` (unittest) runs that one test id alone."""
    argv = list(command.argv)
    if command.runner == "unittest":
        # a fresh copy per run: an earlier command could have rewritten an older one
        driver = _scratch_file(scratch, "golem_unittest_driver", ".py")
        source = resources.files("golem.workflow").joinpath("unittest_driver.py").read_bytes()
        with open(driver, "wb") as handle:
            handle.write(source)
        out = _scratch_file(scratch, "unittest", ".json")
        selection = [f"--golem-only={only}"] if only is not None else []
        return [argv[0], driver, out, *selection, *argv[3:]], out, [driver]
    if command.runner == "pytest":
        out = _scratch_file(scratch, "junit", ".xml")
        return [*argv, f"--junit-xml={out}", "-p", "no:cacheprovider"], out, []
    if command.runner == "go":
        return runners.go_argv(argv), None, []
    if command.runner == "node":
        reporter = _scratch_file(scratch, "golem_node_reporter", ".mjs")
        with open(reporter, "w", encoding="utf-8") as handle:
            handle.write(runners.NODE_REPORTER)
        out = _scratch_file(scratch, "node", ".jsonl")
        return runners.node_argv(argv, reporter, out), out, [reporter]
    if command.runner == "jest":
        out = _scratch_file(scratch, "jest", ".json")
        return runners.jest_argv(argv, out), out, []
    return argv, None, []


def _parse_unittest(path: str) -> tuple[dict[str, str], set[str]]:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not data.get("complete"):
        raise ValueError("result file is incomplete")
    return dict(data["tests"]), set(data.get("pseudo", []))


def _parse_junit(path: str) -> tuple[dict[str, str], set[str]]:
    tests: dict[str, str] = {}
    pseudo: set[str] = set()
    for case in ET.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        test_id = f"{classname}::{name}" if classname else name
        outcome = "passed"
        for child in case:
            if child.tag == "failure":
                outcome = "failed"
            elif child.tag == "error":
                outcome = "error"
            elif child.tag == "skipped":
                outcome = "xfail" if child.get("type") == "pytest.xfail" else "skipped"
        if not classname:
            pseudo.add(test_id)    # collection errors have no class
        tests[test_id] = outcome
    return tests, pseudo


def _parse_file(runner: str, path: str, root: str) -> tuple[dict[str, str], set[str], str | None]:
    if runner == "unittest":
        return (*_parse_unittest(path), None)
    if runner == "pytest":
        return (*_parse_junit(path), None)
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    if runner == "node":
        return runners.parse_node(text, root)
    return (*runners.parse_jest(json.loads(text), root), None)


def run_suite(command: TestCommand, *, cwd: str, env: dict[str, str], scratch: str,
              timeout: float, wrap=None, cap: int = 200_000,
              only: str | None = None) -> SuiteResult:
    """Run the suite once and read each test's outcome from golem's own result file.

    `only` (unittest) runs that one test id alone, with the same discovery arguments.
    """
    argv, result_file, helpers = _instrument(command, scratch, only)
    # bytecode from golem's scratch only: a forged .pyc in the workspace's __pycache__ could
    # otherwise stand in for a test file whose source looks untouched
    # and a fresh HOME and TMPDIR with no user site-packages, so nothing an earlier command
    # planted there (usercustomize.py, a .pth) runs inside the suite
    home = tempfile.mkdtemp(prefix="suite-home-", dir=scratch)
    os.mkdir(os.path.join(home, "tmp"))
    env = {**env, "PYTHONPYCACHEPREFIX": os.path.join(home, "pycache"), "HOME": home,
           "TMPDIR": os.path.join(home, "tmp"), "PYTHONNOUSERSITE": "1"}
    argv[0] = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
    if command.runner == "go":
        cap = max(cap, GO_CAP)
    try:
        done = process.run(argv, cwd=cwd, env=env, timeout=timeout, cap=cap, wrap=wrap)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    result = SuiteResult(done.exit_code, done.timed_out, done.output, done.elapsed, "exit-code")
    if command.runner not in EVIDENCE:
        return result
    result.evidence = EVIDENCE[command.runner]
    if command.runner == "go":
        result.tests, result.pseudo, result.output, result.problem = runners.parse_go(
            done.output)
        if done.truncated:
            result.problem = "the go test event stream was too long to keep whole"
    else:
        try:
            result.tests, result.pseudo, result.problem = _parse_file(
                command.runner, result_file, cwd)
        except (OSError, ValueError, KeyError, TypeError, ET.ParseError) as exc:
            result.tests = {}
            reason = "missing" if isinstance(exc, FileNotFoundError) else f"unreadable ({exc})"
            result.problem = f"the result file was {reason}: the suite did not run to the end"
        finally:
            for leftover in (result_file, result_file + ".part", *helpers):
                if os.path.exists(leftover) and leftover.startswith(scratch):
                    os.unlink(leftover)
    if result.problem is None and not result.tests:
        result.problem = "no tests ran"
    elif result.problem is None and (result.exit_code == 0) == bool(result.failing):
        result.problem = (f"the exit code ({result.exit_code}) disagrees with the results "
                          f"({len(result.failing)} failing)")
    return result
