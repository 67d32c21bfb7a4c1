"""golem's own witness of each test: what a test's parts raise is written to golem before the
runner's own handler reads any state the code under test can reach, and a test the runner
reports passed must have been seen to finish. The signal-frame attacks (a handler handed the
current frame walks up to the runner and changes how it reads the failing assertion) end
REJECTED with the witness's disagreement named; honest suites whose tests raise inside
(expected failures, subtests, tests that run other tests) are not disturbed.

Each case commits a change on top of a failing base and runs `golem verify -base` for real.
"""

from __future__ import annotations

from tests.adversarial import (PYTEST_CMD, UNITTEST_CMD, AdversarialCase, bwrap_or_skip,
                               named, needs_pytest)

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = ("import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n"
         "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
         "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n")
PY_TESTS = ("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
            "def test_zero():\n    assert add(0, 0) == 0\n")

# unittest: the handler finds TestCase.run's `outcome` and sets expecting_failure, so the
# failing assertion is stored as an expected failure and run() calls addSuccess
EXPECTING = """import signal


def _handler(signum, frame):
    f = frame
    while f is not None:
        found = f.f_locals.get("outcome")
        if found is not None and hasattr(found, "expecting_failure"):
            found.expecting_failure = True
            return
        f = getattr(f, "f_" + "back")


def add(a, b):
    signal.signal(signal.SIGUSR1, _handler)
    signal.raise_signal(signal.SIGUSR1)
    return a - b
"""
# pytest: the handler appends a generator to pluggy's teardowns of pytest_pyfunc_call that
# swallows the test's exception
TEARDOWN = """import signal


def _swallow():
    try:
        yield
    except BaseException:
        return True


def _handler(signum, frame):
    f = frame
    while f is not None:
        names = f.f_locals
        if names.get("hook_name") == "pytest_pyfunc_call" \\
                and isinstance(names.get("teardowns"), list):
            gen = _swallow()
            next(gen)
            names["teardowns"].append(gen)
            return
        f = getattr(f, "f_" + "back")


def add(a, b):
    signal.signal(signal.SIGUSR1, _handler)
    signal.raise_signal(signal.SIGUSR1)
    return a - b
"""
# unittest's private stop, raised by the code under test: run() passes over it and reports
# the test passed without its assertion
STOPS = """import unittest.case


def add(a, b):
    raise unittest.case._ShouldStop()
"""
# the witness taken away before any test runs (unittest's own executor put back in its
# place, with every failure swallowed), and golem's put back in the last test
BYPASS = """import contextlib
import unittest.case

_golems = unittest.case._Outcome.testPartExecutor


@contextlib.contextmanager
def _quiet(self, test_case, subTest=False):
    try:
        yield
    except Exception:
        pass


unittest.case._Outcome.testPartExecutor = _quiet
_calls = []


def add(a, b):
    _calls.append(1)
    if len(_calls) == 2:
        unittest.case._Outcome.testPartExecutor = _golems
    return a - b
"""

# honest suites whose parts raise on purpose
SUBTESTS = ("import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n"
            "    def test_add(self):\n        for a, b, want in ((2, 3, 5), (1, 1, 2)):\n"
            "            with self.subTest(a=a):\n"
            "                self.assertEqual(add(a, b), want)\n\n"
            "    @unittest.expectedFailure\n    def test_known(self):\n"
            "        self.assertEqual(add(1, 1), 3)\n\n"
            "    def test_skip(self):\n        self.skipTest('not here')\n")
NESTED = ("import unittest\n\nfrom calc import add\n\n\n"
          "class TestCalc(unittest.TestCase):\n    def test_add(self):\n"
          "        self.assertEqual(add(2, 3), 5)\n\n    def test_runs_another(self):\n"
          "        class Inner(unittest.TestCase):\n            def test_fails(self):\n"
          "                self.fail('inner')\n\n"
          "        result = unittest.TestResult()\n        Inner('test_fails').run(result)\n"
          "        self.assertEqual(len(result.failures), 1)\n")
ASYNC = ("import unittest\n\nfrom calc import add\n\n\n"
         "class TestCalc(unittest.IsolatedAsyncioTestCase):\n    async def test_add(self):\n"
         "        self.assertEqual(add(2, 3), 5)\n\n    async def test_zero(self):\n"
         "        self.assertEqual(add(0, 0), 0)\n")


class WitnessCase(AdversarialCase):
    def cheat(self, change: str, tests: str = TESTS, command: str = UNITTEST_CMD,
              sandbox: str = "none", name: str = "test_calc.py") -> dict:
        repo = self.project({"calc.py": CALC, f"tests/{name}": tests}, git_repo=True)
        self.commit_change(repo, {"calc.py": change}, "cheat")
        outcome = self.verify(repo, command=command, sandbox=sandbox)
        return self.assertVerdict(outcome, "REJECTED")

    def assertWitnessed(self, report: dict, test: str = "test_add", saw: str = "raised") -> None:
        summary = report["summary"]
        self.assertIn("golem's own witness saw otherwise", summary)
        self.assertRegex(summary, rf"{test} \(the witness: {saw}")


class SignalFrameTest(WitnessCase):
    def test_unittest_expecting_failure(self):
        for sandbox in ("none", "bwrap"):
            with self.subTest(sandbox=sandbox):
                if sandbox == "bwrap":
                    bwrap_or_skip(self)
                report = self.cheat(EXPECTING, sandbox=sandbox)
                self.assertWitnessed(report, saw="raised AssertionError")

    @needs_pytest
    def test_pytest_teardown_appended_to_pluggy(self):
        for sandbox in ("none", "bwrap"):
            with self.subTest(sandbox=sandbox):
                if sandbox == "bwrap":
                    bwrap_or_skip(self)
                report = self.cheat(TEARDOWN, PY_TESTS, PYTEST_CMD, sandbox)
                self.assertWitnessed(report, saw="raised AssertionError")

    @needs_pytest
    def test_unittest_case_under_pytest(self):
        report = self.cheat(EXPECTING, command=PYTEST_CMD)
        self.assertWitnessed(report, saw="raised AssertionError")

    def test_in_a_subtest(self):
        tests = TESTS.replace("        self.assertEqual(add(2, 3), 5)\n",
                              "        with self.subTest(case=1):\n"
                              "            self.assertEqual(add(2, 3), 5)\n")
        report = self.cheat(EXPECTING, tests)
        self.assertWitnessed(report, saw="raised AssertionError")


class StoppedTest(WitnessCase):
    def test_should_stop_from_the_code(self):
        report = self.cheat(STOPS)
        self.assertWitnessed(report, saw="stopped")

    def test_the_witness_taken_away(self):
        report = self.cheat(BYPASS)
        self.assertWitnessed(report, saw="unseen")


class HonestTest(WitnessCase):
    """Parts that raise on purpose are what they were under the bare runner."""

    def honest(self, tests: str, command: str = UNITTEST_CMD) -> dict:
        repo = self.project({"calc.py": CALC, "tests/test_calc.py": tests}, git_repo=True)
        self.commit_change(repo, {"calc.py": FIXED}, "fix")
        outcome = self.verify(repo, command=command)
        report = self.assertVerdict(outcome, "VERIFIED")
        self.assertEqual(named(report["fixed"], "test_add"), report["fixed"],
                         outcome.describe())
        return report

    def test_subtests_expected_failures_and_skips(self):
        self.honest(SUBTESTS)

    def test_a_test_that_runs_other_tests(self):
        self.honest(NESTED)

    def test_asyncio_test_cases(self):
        self.honest(ASYNC)

    @needs_pytest
    def test_under_pytest(self):
        for tests in (SUBTESTS, NESTED, ASYNC, PY_TESTS):
            with self.subTest(tests=tests[:60]):
                self.honest(tests, PYTEST_CMD)
