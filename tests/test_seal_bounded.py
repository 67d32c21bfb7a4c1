"""The seal cannot be made to hang: the code under test shares the test process with golem's
driver and can write one byte into any descriptor it holds (the seal's ask and answer
pipes, the evidence stream). Whatever it writes, the graded run ends within seconds of the
suite, never at -wall, and a seal that did not come is named.

Each case runs `golem verify -base` for real on a small git repository whose change writes
one byte into one descriptor, under unittest and under pytest.
"""

from __future__ import annotations

import time

from tests.adversarial import (PYTEST_CMD, UNITTEST_CMD, AdversarialCase, HAVE_PYTEST,
                               named)
from tests.fixtures import BUGGY_CALC

TESTS = ("import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n"
         "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
         "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n")
# the honest fix, plus one byte into descriptor N while the tests run
POKE = """import os


def add(a, b):
    try:
        os.write({fd}, b"x")
    except OSError:
        pass
    return a + b
"""
# how long a graded run of this two-test suite may take, the baseline and golem's own work
# included, on a loaded machine: far below the seal's wait plus any hang
BOUND = 40.0


class OneByteTest(AdversarialCase):
    def runs(self, command: str, label: str) -> None:
        for fd in range(3, 13):
            with self.subTest(runner=label, fd=fd):
                repo = self.project({"calc.py": BUGGY_CALC, "tests/test_calc.py": TESTS},
                                    git_repo=True)
                self.commit_change(repo, {"calc.py": POKE.format(fd=fd)}, "poke")
                start = time.monotonic()
                outcome = self.verify(repo, command=command)
                took = time.monotonic() - start
                report = self.assertRan(outcome)
                self.assertLess(took, BOUND, outcome.describe())
                if report["verdict"] != "VERIFIED":
                    # a write that spoiled the stream or the seal is said, by name
                    self.assertRegex(report["summary"], r"evidence|seal", outcome.describe())
                else:
                    self.assertEqual(named(report["fixed"], "test_add"), report["fixed"])

    def test_unittest(self):
        self.runs(UNITTEST_CMD, "unittest")

    def test_pytest(self):
        if not HAVE_PYTEST:
            self.skipTest("pytest is not installed (import pytest failed)")
        self.runs(PYTEST_CMD, "pytest")
