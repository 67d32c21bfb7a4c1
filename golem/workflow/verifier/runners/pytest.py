"""pytest: `python3 -m pytest ...` or a `pytest` script, run under golem's launcher and
plugin (helpers/pytest_launcher.py, pytest_plugin.py), which stream one sealed record per
finished test; suite.py's `_StreamReader` reads them. The configuration file, rootdir and
confcutdir the baseline used are given explicitly to every later run (`Call.pins`).

Detection, strongest first: pytest's own configuration (`pytest.ini`, `.pytest.ini`,
`pytest.toml`, `conftest.py` at the top, `[tool.pytest` in pyproject.toml, `[tool:pytest]`
in setup.cfg, `[pytest]` in tox.ini); test files written for pytest (module-level `test_`
functions, an import of pytest); a tox.ini or noxfile.py that runs pytest, strong when
pytest is installed where the tests run and weak (below unittest) when it is not.
"""

from __future__ import annotations

import configparser
import os
import re

from golem.tools import tree as files
from golem.workflow.verifier.runners.base import Call, Candidate, Outcomes, Tree, is_python
from golem.workflow.verifier.runners.unittest import isolated

PYTHON_PYTEST = ["python3", "-m", "pytest"]
SIGNS = [("pytest.ini", None), (".pytest.ini", None), ("pytest.toml", None),
         ("conftest.py", None), ("pyproject.toml", "[tool.pytest"),
         ("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]")]
_PYTEST_IMPORT = re.compile(r"^\s*(import pytest\b|from pytest\b|from _pytest\b|import _pytest\b)",
                            re.M)
# `def test_suite():` is unittest's and setuptools' idiom (a function that builds a
# TestSuite), not a pytest test
_MODULE_TEST = re.compile(r"^(async\s+)?def test(?!_suite\s*\()\w*\s*\(", re.M)
_TEST_FILE = re.compile(r"(^test_.*|.*_test)\.py$")
# a command that starts pytest (`pytest`, `py.test`, `python -m pytest`, `coverage run -m
# pytest`), in a tox `commands` value or a nox session's `session.run`
_RUNS = re.compile(r"(^|[\s/])(pytest|py\.test)(\s|$)|-m\s+pytest\b", re.M)
_NOX_RUNS = re.compile(r"""\.run\(\s*['"](pytest|py\.test)['"]|['"]-m['"]\s*,\s*['"]pytest['"]""")

# pytest options whose value is the next argument: that value is not a test path
PYTEST_VALUE_OPTIONS = {
    "-k", "-m", "-p", "-c", "-o", "-W", "-r", "-n", "--rootdir", "--confcutdir", "--basetemp",
    "--deselect", "--ignore", "--ignore-glob", "--tb", "--maxfail", "--durations",
    "--import-mode", "--log-level", "--log-file", "--junit-xml", "--junitxml", "--capture",
    "--override-ini", "--config-file", "--dist", "--cov", "--cov-report", "--cov-config"}


def pytest_split(args: list[str], cwd: str) -> tuple[list[str], list[str]]:
    """pytest's arguments split into its options (with their values) and its test paths."""
    options, paths = [], []
    takes_value = False
    for arg in args:
        if takes_value:
            options.append(arg)
            takes_value = False
        elif arg.startswith("-"):
            options.append(arg)
            takes_value = arg in PYTEST_VALUE_OPTIONS
        elif os.path.exists(os.path.join(cwd, arg.split("::")[0])):
            paths.append(arg)
        else:
            options.append(arg)     # not a path: leave it to pytest
    return options, paths


def written_for_pytest(tree: Tree) -> str | None:
    """Why the test files look written for pytest (module-level test functions, an import
    of pytest), or None. Reads at most a few hundred files."""
    seen = 0
    inside = [folder for _, folder in tree.package_tests()]
    for top in ("tests", "test", "testing", "", *inside):
        base = os.path.join(tree.root, top) if top else tree.root
        if not os.path.isdir(base) or os.path.islink(base):
            continue
        skip = lambda rel, name: name.startswith(".") or name in (
            "node_modules", "venv", "__pycache__", "build", "dist", "site-packages")
        try:
            items = list(files.walk(base, skip, max_depth=1 if not top else 6,
                                    max_entries=20_000))
        except files.TreeError:
            items = []
        for item in items:
            if item.kind != "file" or not _TEST_FILE.match(item.name) or seen > 300:
                continue
            seen += 1
            rel = f"{top}/{item.rel}" if top else item.rel
            text = tree.read(rel, 200_000)
            if _MODULE_TEST.search(text):
                return f"{rel} has module-level test functions"
            if _PYTEST_IMPORT.search(text):
                return f"{rel} imports pytest"
    return None


class Pytest:
    name = "pytest"
    evidence = "pytest-json"
    reads = "stream"
    python = True
    trust = ""
    looks_for = ("python3 -m pytest (pytest configuration, pytest-style tests, tox or nox "
                 "running pytest)")
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return os.path.basename(argv[0]) in ("pytest", "py.test") or \
            (is_python(argv[0]) and argv[1:3] == ["-m", "pytest"])

    def detect(self, tree: Tree) -> list[Candidate]:
        for name, marker in SIGNS:
            if tree.exists(name) and (marker is None or marker in tree.read(name)):
                return [Candidate(list(PYTHON_PYTEST), name, 100)]
        why = written_for_pytest(tree)
        if why:
            return [Candidate(list(PYTHON_PYTEST), why, 90)]
        runs = [name for name, found in (("tox.ini", _tox_runs), ("noxfile.py", _nox_runs))
                if tree.exists(name) and found(tree.read(name))]
        if not runs:
            return []
        if tree.installed("pytest"):
            return [Candidate(list(PYTHON_PYTEST), f"{runs[0]} runs pytest, and pytest is "
                              "installed where the tests run", 80)]
        return [Candidate(list(PYTHON_PYTEST), f"{runs[0]} runs pytest (not installed where "
                          "the tests run)", 30)]

    def argv(self, call: Call) -> list[str]:
        args, cwd_first = _pytest_args(call.command)
        pins = _pins(call, args)
        if call.only is not None:
            args = [*pytest_split(args, call.cwd)[0], call.only]
        return [*isolated(call), os.path.join(call.helpers, "pytest_launcher.py"),
                *(["--golem-cwd"] if cwd_first else []), *args, *pins,
                "-p", "no:cacheprovider", "--continue-on-collection-errors"]

    def parse(self, text: str, cwd: str) -> Outcomes:
        raise TypeError("pytest's evidence is golem's record stream (suite.py)")

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        file = files.get(test_id)
        if file and "::" in test_id:
            return f"{file}::{test_id.split('::', 1)[1]}"
        return None


def _tox_runs(text: str) -> bool:
    """Whether a tox.ini's test environments run pytest (their `commands`, not `deps`)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return False
    return any(_RUNS.search(parser.get(section, "commands", fallback=""))
               for section in parser.sections() if section.startswith("testenv"))


def _nox_runs(text: str) -> bool:
    return _NOX_RUNS.search(text) is not None


def _pytest_args(argv: list[str]) -> tuple[list[str], bool]:
    if argv[1:3] == ["-m", "pytest"]:
        return list(argv[3:]), True
    return list(argv[1:]), False


def _pins(call: Call, args: list[str]) -> list[str]:
    """-c, --rootdir and --confcutdir as the baseline found them, inside `call.cwd`."""
    config, cwd, helpers = call.pins, call.cwd, call.helpers
    if config is None:
        return []
    given = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    pins = []
    if not given & {"-c", "--config-file"}:
        ini = config.get("inifile")
        pins += ["-c", os.path.join(cwd, ini) if ini else os.path.join(helpers, "pytest.ini")]
    if "--rootdir" not in given:
        pins.append("--rootdir=" + os.path.normpath(os.path.join(cwd, config["rootdir"])))
    if "--confcutdir" not in given:
        pins.append("--confcutdir=" + os.path.normpath(
            os.path.join(cwd, config.get("confcutdir") or config["rootdir"])))
    return pins


RUNNER = Pytest()
