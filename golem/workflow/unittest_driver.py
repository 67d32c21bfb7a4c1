"""Run a unittest suite like `python -m unittest ARGS` and write each test's outcome as JSON.

golem copies this file outside the workspace and runs it with the project's own Python:

    python3 unittest_driver.py RESULT.json [unittest arguments...]

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


def main():
    out, args = sys.argv[1], sys.argv[2:]
    sys.argv = ["python -m unittest", *args]
    sys.path[0] = os.getcwd()  # what `python -m` puts first, instead of this file's directory
    program = unittest.main(module=None, argv=sys.argv, testRunner=_Runner, exit=False)
    result = program.result
    record = {"complete": True, "tests": OUTCOMES, "pseudo": sorted(set(PSEUDO)),
              "tests_run": result.testsRun, "successful": result.wasSuccessful()}
    partial = out + ".part"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(partial, out)
    sys.exit(0 if result.wasSuccessful() and result.testsRun else 1)


if __name__ == "__main__":
    main()
