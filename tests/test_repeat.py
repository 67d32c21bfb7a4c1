"""`-repeat N`: tests that failed before are re-run, alone, and a changed outcome is flaky."""

from __future__ import annotations

import os
import unittest

from golem.workflow.verifier.grade import judge, mark_flaky
from golem.workflow.verifier.repeat import WHOLE_SUITE, alone, flaky_tests
from golem.workflow.verifier.suite import SuiteResult
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


def result(tests, exit_code, evidence="unittest-json", files=None, pseudo=()):
    return SuiteResult(exit_code, False, "", 0.1, evidence, tests, set(pseudo), files or {})


class MarkFlakyTest(unittest.TestCase):
    def test_flaky_turns_verified_into_failed(self):
        before = result({"t.a": "failed"}, 1)
        verdict = mark_flaky(judge(before, result({"t.a": "passed"}, 0), []), ["t.a"])
        self.assertEqual((verdict.name, verdict.exit_code), ("FAILED", 1))
        self.assertIn("flaky: [t.a]", verdict.summary)
        self.assertEqual(mark_flaky(judge(before, result({"t.a": "passed"}, 0), []),
                                    []).name, "VERIFIED")


class FlakyTestsTest(unittest.TestCase):
    """repeat.flaky_tests decides what runs again and how; `again` here plays the runs."""

    def replay(self, *results):
        calls = []
        queue = list(results)

        def again(only):
            calls.append(only)
            return queue.pop(0)
        return calls, again

    def test_unittest_and_pytest_select_one_test_by_its_id(self):
        files = {"tests/test_c.py::TestC::test_a": "tests/test_c.py",
                 "tests/test_c.py::test_b[1-2]": "tests/test_c.py"}
        after = result({t: "passed" for t in files}, 0, "pytest-json", files)
        self.assertEqual(alone("tests/test_c.py::TestC::test_a", after, "pytest"),
                         "tests/test_c.py::TestC::test_a")
        self.assertEqual(alone("tests/test_c.py::test_b[1-2]", after, "pytest"),
                         "tests/test_c.py::test_b[1-2]")
        self.assertIsNone(alone("tests/test_gone.py::test_x", after, "pytest"))
        self.assertEqual(alone("test_c.C.test_a", after, "unittest"), "test_c.C.test_a")
        self.assertIsNone(alone("pkg::TestA", after, "go"))

    def test_previously_failing_tests_run_alone_and_a_change_is_flaky(self):
        before = result({"t.C.a": "failed", "t.C.b": "error", "t.C.c": "passed",
                         "t_broken": "error"}, 1, pseudo={"t_broken"})
        after = result({"t.C.a": "passed", "t.C.b": "passed", "t.C.c": "passed",
                        "t_broken.T.x": "passed"}, 0)
        calls, again = self.replay(result({"t.C.a": "passed"}, 0),
                                   result({"t.C.a": "passed"}, 0),
                                   result({"t.C.b": "failed"}, 1))
        notes = []
        self.assertEqual(flaky_tests("unittest", before, after, 2, again, notes.append),
                         ["t.C.b"])
        # the pseudo test (an import failure) is not a test to re-run; t.C.b stops at its
        # first different outcome; t.C.c never failed
        self.assertEqual(calls, ["t.C.a", "t.C.a", "t.C.b"])
        self.assertEqual(notes[-1], "repeat 1/2: t.C.b alone: failed")
        # a test that does not run at all when re-run is flaky too
        calls, again = self.replay(result({}, 5), result({"t.C.b": "passed"}, 0),
                                   result({"t.C.b": "passed"}, 0))
        self.assertEqual(flaky_tests("unittest", before, after, 2, again), ["t.C.a"])
        self.assertEqual(flaky_tests("unittest", before, after, 0, again), [])

    def test_other_runners_run_the_whole_suite_again(self):
        before = result({"p::TestA": "failed", "p::TestB": "failed"}, 1, "go-json")
        after = result({"p::TestA": "passed", "p::TestB": "passed"}, 0, "go-json")
        calls, again = self.replay(result({"p::TestA": "passed", "p::TestB": "passed"}, 0),
                                   result({"p::TestA": "passed", "p::TestB": "failed"}, 1))
        self.assertEqual(flaky_tests("go", before, after, 2, again), ["p::TestB"])
        self.assertEqual(calls, [None, None])

    def test_exit_code_only_compares_the_exit_code(self):
        before, after = result(None, 1, "exit-code"), result(None, 0, "exit-code")
        calls, again = self.replay(result(None, 0, "exit-code"), result(None, 2, "exit-code"))
        self.assertEqual(flaky_tests("exit-code", before, after, 3, again), [WHOLE_SUITE])
        self.assertEqual(calls, [None, None])


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
        # pytest node ids name the file the test was collected from
        self.assertEqual(report["fixed"], ["tests/test_calc.py::TestAdd::test_add"])
        self.assertEqual(read(log).split(), ["add", "zero", "add", "zero", "add", "add"])

    def test_negative_repeat_is_a_usage_error(self):
        code, out, err = run_cli(["fix", "-dir", self.tmp, "-provider", "demo", "-repeat", "-1"])
        self.assertEqual(code, 2)
        self.assertIn("-repeat: give 0 or more", err)


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
