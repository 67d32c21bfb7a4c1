"""`-repeat N`: tests that failed before are re-run, alone, and a changed outcome is flaky."""

from __future__ import annotations

import os
import unittest

from golem.workflow.suite import SuiteResult
from golem.workflow.verdict import judge, mark_flaky
from tests.fixtures import (BUGGY, BUGGY_CALC, FIX_EDIT, TEST_CMD, GolemCase, last_json,
                            make_repo, read, run_cli, write_files)
from tests.provider_server import chat

try:
    import pytest  # noqa: F401
    HAVE_PYTEST = True
except ImportError:
    HAVE_PYTEST = False

# passes only on odd-numbered runs: the counter lives next to the code, so the verification
# copy carries it from run to run
FLAKY_TESTS = """\
import os
import unittest

from calc import add

COUNTER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runs.txt")


class AddTest(unittest.TestCase):
    def test_add(self):
        runs = int(open(COUNTER).read()) if os.path.exists(COUNTER) else 0
        with open(COUNTER, "w") as handle:
            handle.write(str(runs + 1))
        self.assertEqual(add(2, 3), 5)
        self.assertEqual(runs % 2, 1, f"run {runs} is even")

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
# each test appends its name to a log outside the workspace, to show which ran when
LOGGING_TESTS = """\
import unittest

from calc import add


def log(name):
    with open({log!r}, "a") as handle:
        handle.write(name + "\\n")


class AddTest(unittest.TestCase):
    def test_add(self):
        log("add")
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        log("zero")
        self.assertEqual(add(0, 0), 0)
"""
LOGGING_PYTESTS = """\
from calc import add


def log(name):
    with open({log!r}, "a") as handle:
        handle.write(name + "\\n")


class TestAdd:
    def test_add(self):
        log("add")
        assert add(2, 3) == 5

    def test_zero(self):
        log("zero")
        assert add(0, 0) == 0
"""


class MarkFlakyTest(unittest.TestCase):
    def result(self, tests, exit_code):
        return SuiteResult(exit_code, False, "", 0.1, "unittest-json", tests)

    def test_flaky_turns_verified_into_failed(self):
        before = self.result({"t.a": "failed"}, 1)
        verdict = mark_flaky(judge(before, self.result({"t.a": "passed"}, 0), []), ["t.a"])
        self.assertEqual((verdict.name, verdict.exit_code), ("FAILED", 1))
        self.assertIn("flaky: [t.a]", verdict.summary)
        self.assertEqual(mark_flaky(judge(before, self.result({"t.a": "passed"}, 0), []),
                                    []).name, "VERIFIED")


class RepeatTest(GolemCase):
    """`-repeat N`: previously failing tests re-run alone; a changed outcome is flaky."""

    def run_fix(self, files, *extra, test: str = TEST_CMD):
        self.repos = getattr(self, "repos", 0) + 1
        repo = make_repo(self.tmp, files, name=f"repo{self.repos}")
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", test, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", "none", "-json", *extra])
        return code, last_json(out)

    def test_a_fix_that_passes_only_every_other_run_is_flaky(self):
        files = {"calc.py": BUGGY_CALC, "tests/test_calc.py": FLAKY_TESTS}
        code, report = self.run_fix(files)
        self.assertEqual(report["verdict"], "VERIFIED", "without -repeat it looks fixed")
        self.assertEqual(report["flaky"], [])
        code, report = self.run_fix(files, "-repeat", "1")
        self.assertEqual((report["verdict"], code), ("FAILED", 1), report["summary"])
        self.assertEqual(report["flaky"], ["test_calc.AddTest.test_add"])
        self.assertIn("flaky: [test_calc.AddTest.test_add]", report["summary"])

    def test_each_repeat_runs_the_previously_failing_test_alone(self):
        log = os.path.join(self.tmp, "ran.log")
        files = {**BUGGY, "tests/test_calc.py": LOGGING_TESTS.format(log=log)}
        code, report = self.run_fix(files, "-repeat", "2")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["flaky"], [])
        # baseline, verification, then test_add twice on its own
        self.assertEqual(read(log).split(), ["add", "zero", "add", "zero", "add", "add"])

    @unittest.skipUnless(HAVE_PYTEST, "pytest is not installed (import pytest failed)")
    def test_pytest_repeats_run_the_node_id_alone(self):
        log = os.path.join(self.tmp, "ran.log")
        files = {**BUGGY, "tests/test_calc.py": LOGGING_PYTESTS.format(log=log)}
        code, report = self.run_fix(files, "-repeat", "2", test="python3 -m pytest -q tests")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["fixed"], ["tests.test_calc.TestAdd::test_add"])
        self.assertEqual(read(log).split(), ["add", "zero", "add", "zero", "add", "add"])

    def test_negative_repeat_is_a_usage_error(self):
        code, out, err = run_cli(["fix", "-dir", self.tmp, "-provider", "demo", "-repeat", "-1"])
        self.assertEqual(code, 2)
        self.assertIn("-repeat must be 0", err)


class VerifyRepeatTest(GolemCase):
    def verify(self, repo: str, *extra: str) -> tuple[int, dict]:
        code, out, err = run_cli(["verify", "-dir", repo, "-base", "HEAD", "-test", TEST_CMD,
                                  "-sandbox", "none", "-json", *extra])
        self.assertIn(code, (0, 1, 3), err)
        return code, last_json(out)

    def test_repeat_finds_a_flaky_fix(self):
        repo = make_repo(self.tmp, {"calc.py": BUGGY_CALC, "tests/test_calc.py": FLAKY_TESTS,
                                    "runs.txt": "1"}, git_repo=True)
        write_files(repo, {"calc.py": BUGGY_CALC.replace("a - b", "a + b")})
        code, report = self.verify(repo)
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
        code, report = self.verify(repo, "-repeat", "1")
        self.assertEqual((report["verdict"], code), ("FAILED", 1), report["summary"])
        self.assertEqual(report["flaky"], ["test_calc.AddTest.test_add"])


if __name__ == "__main__":
    unittest.main()
