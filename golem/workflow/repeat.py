"""`-repeat N`: re-run the tests that failed before, N more times each, to catch a fix that
only passes sometimes.

unittest and pytest tests run alone, each in a fresh process: unittest through golem's driver
with the test id, pytest with the test's node id in place of the command's test paths. Other
runners cannot isolate one test the same way everywhere, so the whole suite runs again and
each previously failing test's outcome is read from it; a runner judged by exit code alone
is compared by that. Any outcome that differs from the graded run makes the test flaky.
"""

from __future__ import annotations

import os
from typing import Callable

from golem.workflow.suite import SuiteResult, TestCommand, run_suite

WHOLE_SUITE = "(whole suite)"
# pytest options whose value is the next argument: that value is not a test path
PYTEST_VALUE_OPTIONS = {
    "-k", "-m", "-p", "-c", "-o", "-W", "-r", "-n", "--rootdir", "--confcutdir", "--basetemp",
    "--deselect", "--ignore", "--ignore-glob", "--tb", "--maxfail", "--durations",
    "--import-mode", "--log-level", "--log-file", "--junit-xml", "--junitxml", "--capture",
    "--override-ini", "--config-file", "--dist", "--cov", "--cov-report", "--cov-config"}


def _pytest_paths(argv: list[str], root: str) -> tuple[list[str], list[str]]:
    """The pytest command split into its options (with their values) and its test paths."""
    start = 3 if argv[1:3] == ["-m", "pytest"] else 1
    options, paths = list(argv[:start]), []
    takes_value = False
    for arg in argv[start:]:
        if takes_value:
            options.append(arg)
            takes_value = False
        elif arg.startswith("-"):
            options.append(arg)
            takes_value = arg in PYTEST_VALUE_OPTIONS
        elif os.path.exists(os.path.join(root, arg.split("::")[0])):
            paths.append(arg)
        else:
            options.append(arg)     # not a path: leave it to pytest
    return options, paths


def pytest_alone(argv: list[str], test_id: str, root: str) -> list[str] | None:
    """The pytest command that runs one test, given its JUnit id (`pkg.test_mod.Class::name`),
    or None when the test's file cannot be found.

    The JUnit class name is the node id's path made dotted, relative to pytest's rootdir,
    which is the directory the suite ran in or one of its test directories; the file is
    looked for in each, and that directory is passed as `--rootdir` so the ids stay the same.
    """
    classname, _, name = test_id.rpartition("::")
    if not classname:
        return None
    options, paths = _pytest_paths(argv, root)
    bases = [""] + [p.rstrip("/") for p in paths
                    if "::" not in p and os.path.isdir(os.path.join(root, p))]
    parts = classname.split(".")
    for base in bases:
        for cut in range(len(parts), 0, -1):
            path = os.path.join(base, *parts[:cut]) + ".py"
            if os.path.isfile(os.path.join(root, path)):
                node_id = "::".join([path, *parts[cut:], name])
                rootdir = os.path.normpath(os.path.join(root, base))
                return [*options, f"--rootdir={rootdir}", node_id]
    return None


def flaky_tests(command: TestCommand, before: SuiteResult, after: SuiteResult, times: int, *,
                cwd: str, env: dict[str, str], scratch: str, timeout: float, wrap=None,
                note: Callable[[str], None] = lambda message: None) -> list[str]:
    """Ids of previously failing tests whose outcome changed in any of `times` re-runs."""
    if times <= 0:
        return []

    def again(cmd: TestCommand = command, only: str | None = None) -> SuiteResult:
        return run_suite(cmd, cwd=cwd, env=env, scratch=scratch, timeout=timeout, wrap=wrap,
                         only=only)

    if after.tests is None:
        for round_ in range(1, times + 1):
            result = again()
            note(f"repeat {round_}/{times}: the whole suite {result.summary()}")
            if result.passed != after.passed:
                return [WHOLE_SUITE]
        return []
    ids = sorted(t for t in before.failing if t not in before.pseudo and t in after.tests)
    flaky: list[str] = []
    if command.runner not in ("unittest", "pytest"):
        for round_ in range(1, times + 1):
            result = again()
            changed = [t for t in ids if t not in flaky and result.tests.get(t) != after.tests[t]]
            note(f"repeat {round_}/{times}: the whole suite again; "
                 f"{len(changed)} previously failing test(s) changed outcome")
            flaky += changed
        return sorted(flaky)
    for test_id in ids:
        for round_ in range(1, times + 1):
            if command.runner == "unittest":
                result = again(only=test_id)
            else:
                argv = pytest_alone(command.argv, test_id, cwd)
                result = again(TestCommand(argv, "pytest", command.origin) if argv else command)
            outcome = (result.tests or {}).get(test_id)
            note(f"repeat {round_}/{times}: {test_id} alone: {outcome or 'did not run'}")
            if outcome != after.tests[test_id]:
                flaky.append(test_id)
                break
    return flaky


def after_grading(setup, cwd: str, wrap, before: SuiteResult, after: SuiteResult,
                  verdict_name: str) -> list[str]:
    """`-repeat` for a graded run: flaky test ids (none when off, or the run was REJECTED)."""
    if setup.options.repeat <= 0 or verdict_name == "REJECTED":
        return []
    flaky = flaky_tests(setup.command, before, after, setup.options.repeat, cwd=cwd,
                        env=setup.env, scratch=setup.scratch,
                        timeout=setup.options.suite_timeout, wrap=wrap,
                        note=lambda message: setup.trace.emit("note", message=message))
    if flaky:
        setup.trace.emit("note", message=f"flaky: {', '.join(flaky)}", flaky=flaky)
    return flaky
