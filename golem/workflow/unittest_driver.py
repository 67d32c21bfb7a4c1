"""Run a unittest suite like `python -m unittest ARGS` and write each test's outcome as JSON.

golem copies this file outside the workspace and runs it with the project's own Python:

    python3 unittest_driver.py RESULT.json [--golem-only=TEST_ID] [unittest arguments...]

With `--golem-only`, the tests are found as the arguments say and only the one whose id is
TEST_ID runs (golem's `-repeat` re-runs a test alone this way).

The result file is written only after the whole run finished, so code under test that exits
early (sys.exit, os._exit) leaves no result, and a missing result counts as a failure. It
imports nothing but the standard library and nothing from golem.
"""

import json
import os
import sys
import unittest

OUTCOMES = {}
PSEUDO = []
# taken before any test code runs, so code under test that replaces them later cannot
# rewrite the result file as it is written
_open, _dumps, _replace, _vars, _callable = open, json.dumps, os.replace, vars, callable
_exit = os._exit


def _record(test, outcome):
    test_id = test.id()
    # Error holders stand for a module that failed to import or a failed setUpClass: not a test.
    if type(test).__name__ in ("_ErrorHolder", "_FailedTest"):
        PSEUDO.append(test_id)
    if OUTCOMES.get(test_id) in ("failed", "error") and outcome == "passed":
        return
    OUTCOMES[test_id] = outcome


class _Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        _record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        _record(test, "failed")

    def addError(self, test, err):
        super().addError(test, err)
        _record(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        _record(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        _record(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        _record(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            _record(test, "failed" if failed else "error")


class _Runner(unittest.TextTestRunner):
    resultclass = _Result


def _flatten(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _flatten(test)
        else:
            yield test


class _Program(unittest.TestProgram):
    only = None

    def createTests(self, *args, **kwargs):
        super().createTests(*args, **kwargs)
        if self.only is not None:
            self.test = unittest.TestSuite(t for t in _flatten(self.test) if t.id() == self.only)


def _machinery():
    """The functions and methods a test run goes through, by name.

    Code under test shares this process, so it can replace them (`unittest.TestCase.run`
    that reports a success without running the test). Comparing them before and after the
    run catches that; a module that puts them back before the run ends is not caught.
    """
    modules = [sys.modules[name] for name in ("unittest", "unittest.case", "unittest.suite",
                                              "unittest.result", "unittest.loader",
                                              "unittest.runner", "unittest.main",
                                              "json.encoder") if name in sys.modules]
    owners = [(m.__name__, m) for m in modules]
    # bases before subclasses: a replaced base method is named once, where it was replaced
    owners += [(f"unittest.{c.__name__}", c) for c in (
        unittest.TestCase, unittest.FunctionTestCase, unittest.suite.BaseTestSuite,
        unittest.TestSuite, unittest.TestResult, unittest.TextTestResult,
        unittest.TextTestRunner, unittest.TestLoader, unittest.TestProgram)]
    owners += [("driver._Result", _Result), ("driver._Runner", _Runner),
               ("driver._Program", _Program), ("json.JSONEncoder", json.JSONEncoder)]
    found = {}
    for label, owner in owners:
        # a class as its instances see it: a method added to a subclass overrides the base's
        members = {}
        for klass in reversed(getattr(owner, "__mro__", ())):
            members.update(_vars(klass))
        for name, value in list((members or _vars(owner)).items()):
            if _callable(value) or isinstance(value, (classmethod, staticmethod, property)):
                found[f"{label}.{name}"] = value
    return found


def main():
    out, args = sys.argv[1], sys.argv[2:]
    if args and args[0].startswith("--golem-only="):
        _Program.only, args = args[0].split("=", 1)[1], args[1:]
    sys.argv = ["python -m unittest", *args]
    sys.path[0] = os.getcwd()  # what `python -m` puts first, instead of this file's directory
    before = _machinery()
    program = _Program(module=None, argv=sys.argv, testRunner=_Runner, exit=False)
    result = program.result
    after = _machinery()
    replaced, seen = [], set()
    for name, value in before.items():
        if after.get(name) is not value and id(value) not in seen:
            seen.add(id(value))
            replaced.append(name)
    if replaced:
        # not a test: it stands for the whole run, which cannot be trusted
        test_id = ("golem: the code under test replaced "
                   + ", ".join(replaced[:5]) + (" and more" if len(replaced) > 5 else ""))
        OUTCOMES[test_id] = "error"
        PSEUDO.append(test_id)
    record = {"complete": True, "tests": OUTCOMES, "pseudo": sorted(set(PSEUDO)),
              "tests_run": result.testsRun, "successful": result.wasSuccessful()}
    partial = out + ".part"
    with _open(partial, "w", encoding="utf-8") as handle:
        handle.write(_dumps(record))
    _replace(partial, out)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    # straight out, with no atexit handler: code under test could register one that
    # rewrites the result file after it was written, then exits 0
    _exit(0 if result.wasSuccessful() and result.testsRun and not replaced else 1)


if __name__ == "__main__":
    main()
