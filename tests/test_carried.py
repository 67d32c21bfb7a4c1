"""Test tools' state (Hypothesis's `.hypothesis/`) as the baseline left it, carried into every
graded copy: a failing example saved before the run is tried again by the verification, and
nothing the agent writes there reaches it."""

from __future__ import annotations

import os
import unittest

from golem.workflow.verifier import carried
from tests import devenv
from tests.fixtures import GolemCase, read_trace, write_files
from tests.provider_server import chat
from tests.test_environments import SANDBOXES, EnvironmentCase

# Works as Hypothesis does: the inputs that failed are saved in `.hypothesis/`, and every run
# tries them before its own.
SAVED_TEST = """\
import os
import unittest

from calc import mul

SAVED = os.path.join(".hypothesis", "examples", "mul")


class SavedTest(unittest.TestCase):
    def test_saved_examples(self):
        saved = []
        if os.path.exists(SAVED):
            with open(SAVED) as handle:
                saved = [tuple(map(int, line.split())) for line in handle if line.strip()]
        for a, b in [(2, 3), *saved]:
            if mul(a, b) != a * b:
                if (a, b) not in saved:
                    os.makedirs(os.path.dirname(SAVED), exist_ok=True)
                    with open(SAVED, "a") as handle:
                        handle.write(f"{a} {b}\\n")
                self.fail(f"mul({a}, {b}) is not {a * b}")
"""
# right for the inputs the tests name, wrong for the one a run saved
SPECIAL_CASED = ("def add(a, b):\n    return a + b\n\n\n"
                 "def mul(a, b):\n    return 6 if (a, b) == (2, 3) else a + b\n")


class CarriedStateTest(EnvironmentCase):
    def project(self, name):
        project = devenv.make(self.tmp, "src-pth", name=name,
                              extra={"tests/test_saved.py": SAVED_TEST})
        # an earlier run of the developer's found that mul(0, 5) fails
        write_files(project.root, {".hypothesis/examples/mul": "0 5\n"})
        return project

    def test_the_verification_tries_the_examples_saved_before_the_run(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-{mode}.jsonl")
                project = self.project(f"saved-{mode}")
                # the model special-cases the tests' own input, and overwrites the saved
                # examples with that one
                server = self.serve([
                    chat(tool_calls=[("write_file", {"path": project.core,
                                                     "content": SPECIAL_CASED})]),
                    chat(tool_calls=[("write_file", {"path": ".hypothesis/examples/mul",
                                                     "content": "2 3\n"})]),
                    chat(tool_calls=[("run_tests", {})]),
                    chat("fixed mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertEqual(report.get("verdict"), "FAILED", out + err)
                self.assertNotEqual(code, 0)
                events = read_trace(self.trace)
                after = next(e for e in events if e["event"] == "verification")
                self.assertEqual(after["counts"], {"passed": 3, "failed": 1}, after)
                self.assertIn("test_saved.SavedTest.test_saved_examples",
                              after["failing"])
                self.assertTrue(any("test tools' state as the baseline left it" in
                                    e.get("message", "") for e in events), events)

    def test_a_run_that_throws_the_state_away_unread_is_no_evidence(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-discard-{mode}.jsonl")
                project = self.project(f"discard-{mode}")
                # the code under test removes the saved examples before any test reads them
                server = self.serve([
                    chat(tool_calls=[("write_file", {
                        "path": project.core,
                        "content": "import shutil\nshutil.rmtree('.hypothesis', "
                                   "ignore_errors=True)\n" + SPECIAL_CASED})]),
                    chat("fixed mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertEqual(report.get("verdict"), "FAILED", out + err)
                self.assertIn("the run read none of it", out + err)

    def test_an_honest_fix_passes_with_the_state_carried(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-honest-{mode}.jsonl")
                project = self.project(f"honest-{mode}")
                server = self.serve([
                    chat(tool_calls=[("write_file", {"path": project.core,
                                                     "content": devenv.FIXED_CORE})]),
                    chat(tool_calls=[("run_tests", {})]),
                    chat("fixed add and mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
                self.assertEqual(code, 0)


PROPERTY_TEST = """\
import unittest

from hypothesis import given, strategies as st

from calc import mul


class PropertyTest(unittest.TestCase):
    @given(st.integers(), st.integers())
    def test_mul(self, a, b):
        self.assertEqual(mul(a, b), a * b)
"""


def _has_hypothesis() -> bool:
    import importlib.util
    return importlib.util.find_spec("hypothesis") is not None


@unittest.skipUnless(_has_hypothesis(), "hypothesis is not installed")
class RealHypothesisTest(EnvironmentCase):
    """With Hypothesis itself: the baseline saves the failing example it found, the
    verification replays it, and Hypothesis, having read it, deletes it once it passes."""

    def test_an_honest_fix_of_a_property_is_verified(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-real-{mode}.jsonl")
                project = devenv.make(self.tmp, "src-pth", name=f"real-{mode}",
                                      extra={"tests/test_property.py": PROPERTY_TEST})
                server = self.serve([
                    chat(tool_calls=[("write_file", {"path": project.core,
                                                     "content": devenv.FIXED_CORE})]),
                    chat("fixed add and mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
                events = read_trace(self.trace)
                baseline = next(e for e in events if e["event"] == "baseline")
                self.assertIn("test_property.PropertyTest.test_mul", baseline["failing"])
                self.assertTrue(any("test tools' state as the baseline left it" in
                                    e.get("message", "") for e in events), events)


class TakeTest(GolemCase):

    def test_regular_files_only_never_through_a_link(self):
        write_files(self.tmp, {".hypothesis/examples/a": "1", "secret": "s"})
        os.symlink(os.path.join(self.tmp, "secret"),
                   os.path.join(self.tmp, ".hypothesis", "examples", "link"))
        found, why = carried.take(self.tmp)
        self.assertEqual((found, why), ({".hypothesis/examples/a": b"1"}, None))

    def test_a_linked_directory_is_not_taken(self):
        write_files(self.tmp, {"elsewhere/a": "1"})
        os.symlink(os.path.join(self.tmp, "elsewhere"), os.path.join(self.tmp, ".hypothesis"))
        self.assertEqual(carried.take(self.tmp), ({}, None))

    def test_too_much_state_is_not_carried_and_says_why(self):
        write_files(self.tmp, {".hypothesis/big": "x" * (carried.MAX_BYTES + 1)})
        found, why = carried.take(self.tmp)
        self.assertEqual(found, {})
        self.assertIn("MiB", why)

    def test_place_writes_into_the_copy_and_never_through_a_link(self):
        copy = os.path.join(self.tmp, "copy")
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(copy)
        os.makedirs(outside)
        os.symlink(outside, os.path.join(copy, ".hypothesis"))
        carried.place(copy, {".hypothesis/examples/a": b"1"})
        self.assertEqual(os.listdir(outside), [])


if __name__ == "__main__":
    unittest.main()
