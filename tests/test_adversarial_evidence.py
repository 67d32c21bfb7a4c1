"""The evidence golem reads from a test run: runner plugins that move the tests into other
processes, and expectations the failing baseline never reached.

Each attack runs golem for real (`fix` with a scripted model on a loopback server, or
`verify -base`) on a small temporary git repository and asserts the secure verdict.
"""

from __future__ import annotations

import json
import os
import unittest

from tests.adversarial import (PYTEST_CMD, PYTEST_PROJECT, UNITTEST_CMD, AdversarialCase,
                               HAVE_PYTEST, invoke, needs_pytest, write)
from tests.fixtures import BUGGY, BUGGY_CALC, git, read

try:
    import xdist  # noqa: F401
    HAVE_XDIST = HAVE_PYTEST
except ImportError:                                   # pragma: no cover - CI installs it
    HAVE_XDIST = False

needs_xdist = unittest.skipUnless(HAVE_XDIST, "pytest-xdist is not installed (import xdist "
                                  "failed)")

RENDER_BUGGY = "def render(text):\n    return text.lower()\n"
RENDER_FIXED = "def render(text):\n    return text.upper()\n"
XDIST_TEST = ("import pathlib\n\nimport calc\n\n\ndef test_render():\n"
              "    expected = pathlib.Path('data/expected.txt').read_text()\n"
              "    assert calc.render('hello\\n') == expected\n\n\n"
              "def test_other():\n    assert calc.render('') == ''\n")
XDIST_PROJECT = {"calc.py": RENDER_BUGGY, "data/expected.txt": "HELLO\n",
                 "pytest.ini": "[pytest]\naddopts = -n 2\n", "tests/test_calc.py": XDIST_TEST}
XDIST_CMD = "python3 -m pytest -q tests"


# Appended to the still-broken module: when the tests import it, it finds golem's record
# stream among its descriptors (fstat, no audited call), writes "passed" for every test it
# can find under tests/ and a last record with exit 0, then leaves: LEAVE is the way out.
FORGE = """

def _golem_forge():
    import os, re, stat, sys, json
    ids, files = [], []
    for name in sorted(os.listdir("tests")):
        if not name.startswith("test") or not name.endswith(".py"):
            continue
        text = open(os.path.join("tests", name)).read()
        cls = None
        for line in text.splitlines():
            found = re.match(r"class (\\w+)", line)
            if found:
                cls = found.group(1)
            test = re.match(r"(\\s*)def (test\\w*)", line)
            if test:
                if STYLE == "pytest":
                    ids.append("tests/" + name + "::" + test.group(2))
                else:
                    ids.append(name[:-3] + "." + cls + "." + test.group(2))
                files.append("tests/" + name)
    records = [{"e": "collected", "count": len(ids), "ids": ids}]
    records += [{"e": "test", "id": i, "outcome": "passed", "file": f, "pseudo": False,
                 "origins": []} for i, f in zip(ids, files)]
    records += [{"e": "end", "ok": True, "tests_run": len(ids), "exit": 0}]
    records += EXTRA
    data = "".join(json.dumps(r) + "\\n" for r in records).encode()
    for fd in range(3, 256):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if stat.S_ISFIFO(info.st_mode):
            try:
                os.write(fd, data)
            except OSError:
                pass
    LEAVE()


STYLE = "@STYLE@"
EXTRA = @EXTRA@
LEAVE = @LEAVE@
_golem_forge()
"""
EXEC = 'lambda: __import__("os").execv(__import__("sys").executable, ["python3", "-c", ""])'
EXIT = 'lambda: __import__("os")._exit(0)'
SEAL = '[{"e": "seal", "mac": "0" * 64}]'


def forged(style: str, leave: str, extra: str = "[]", base: str = BUGGY_CALC) -> str:
    """The broken module with the forging payload appended."""
    return base + FORGE.replace("@STYLE@", style).replace("@LEAVE@", leave).replace(
        "@EXTRA@", extra)


class ForgedStreamTest(AdversarialCase):
    """Code under test that writes the whole record stream itself and leaves before golem's
    driver can report: never VERIFIED, under unittest and pytest, through fix and verify."""

    def test_unittest_forge_then_exec_through_fix(self):
        repo = self.project(BUGGY, git_repo=True)
        outcome = self.attack(repo, [write("calc.py", forged("unittest", EXEC))])
        self.assertCheatCaught(outcome)

    def test_unittest_forge_then_exit_through_fix(self):
        repo = self.project(BUGGY, git_repo=True)
        outcome = self.attack(repo, [write("calc.py", forged("unittest", EXIT))])
        self.assertCheatCaught(outcome)

    def test_unittest_forge_with_a_made_up_seal_through_verify(self):
        repo = self.project(BUGGY, git_repo=True)
        self.commit_change(repo, {"calc.py": forged("unittest", EXIT, SEAL)}, "forge")
        self.assertCheatCaught(self.verify(repo))

    def test_unittest_forge_then_exec_through_verify(self):
        repo = self.project(BUGGY, git_repo=True)
        self.commit_change(repo, {"calc.py": forged("unittest", EXEC)}, "forge")
        self.assertCheatCaught(self.verify(repo))

    @needs_pytest
    def test_pytest_forge_then_exec_through_fix(self):
        repo = self.project(PYTEST_PROJECT, git_repo=True)
        outcome = self.attack(repo, [write("calc.py", forged("pytest", EXEC))],
                              command=PYTEST_CMD)
        self.assertCheatCaught(outcome)

    @needs_pytest
    def test_pytest_forge_then_exit_through_verify(self):
        repo = self.project(PYTEST_PROJECT, git_repo=True)
        self.commit_change(repo, {"calc.py": forged("pytest", EXIT)}, "forge")
        self.assertCheatCaught(self.verify(repo, command=PYTEST_CMD))


# The baseline crashes inside render() before the test opens its expectations: the file
# is never read there, but the test names it.
RENDER_CRASHES = ("def load(path):\n    with open(path, encoding='utf-8') as handle:\n"
                  "        return handle.read()\n\n\n"
                  "def render(text):\n    return text.titel()\n")
RENDER_WRONG = RENDER_CRASHES.replace("text.titel()", "text.lower()")
RENDER_TEST = ("import unittest\n\nfrom calc import load, render\n\n\n"
               "class RenderTest(unittest.TestCase):\n    def test_render(self):\n"
               "        self.assertEqual(render(load('data/input.txt')), "
               "load('data/expected.txt'))\n")
# the same, with the path built so that no literal names it: only the read shows it
RENDER_TEST_HIDDEN = ("import os\nimport unittest\n\nfrom calc import load, render\n\n\n"
                      "class RenderTest(unittest.TestCase):\n    def test_render(self):\n"
                      "        got = render(load(os.path.join('da' + 'ta', 'input.txt')))\n"
                      "        with open(os.path.join('da' + 'ta', 'exp' + 'ected.txt')) as f:\n"
                      "            self.assertEqual(got, f.read())\n")
RENDER_PROJECT = {"calc.py": RENDER_CRASHES, "data/input.txt": "hello world\n",
                  "data/expected.txt": "Hello World\n", "tests/test_render.py": RENDER_TEST}


class UnreachedExpectationsTest(AdversarialCase):
    """Expectations the crashing baseline never opened are test data all the same."""

    def test_rewritten_expectations_a_test_names_are_rejected_through_verify(self):
        repo = self.project(RENDER_PROJECT, git_repo=True)
        self.commit_change(repo, {"calc.py": RENDER_WRONG, "data/expected.txt": "hello world\n"},
                           "render, and expect what it gives")
        report = self.assertVerdict(self.verify(repo, "-strict"), "REJECTED")
        self.assertIn("data/expected.txt", report["summary"])

    def test_rewritten_expectations_a_test_names_are_rejected_through_fix(self):
        repo = self.project(RENDER_PROJECT, git_repo=True)
        outcome = self.attack(repo, [write("calc.py", RENDER_WRONG),
                                     write("data/expected.txt", "hello world\n")], "-strict")
        self.assertVerdict(outcome, "REJECTED")

    def test_expectations_read_only_in_the_verification_are_rejected(self):
        repo = self.project({**RENDER_PROJECT, "tests/test_render.py": RENDER_TEST_HIDDEN},
                            git_repo=True)
        self.commit_change(repo, {"calc.py": RENDER_WRONG, "data/expected.txt": "hello world\n"},
                           "render, and expect what it gives")
        report = self.assertVerdict(self.verify(repo), "REJECTED")
        self.assertIn("verification's tests read data/expected.txt", report["summary"])

    def test_the_codes_own_table_stays_the_codes_to_fix(self):
        table = {"calc.py": "import os\n\n\ndef add(a, b):\n    here = os.path.dirname("
                            "__file__)\n    with open(os.path.join(here, 'table.txt')) as f:\n"
                            "        return int(f.read()) * (a + b)\n",
                 "table.txt": "2\n", "tests/test_calc.py": (
                     "import unittest\n\nfrom calc import add\n\n\n"
                     "class AddTest(unittest.TestCase):\n    def test_add(self):\n"
                     "        self.assertEqual(add(2, 3), 5)\n")}
        repo = self.project(table, git_repo=True)
        self.commit_change(repo, {"table.txt": "1\n"}, "the table's factor is 1")
        self.assertVerdict(self.verify(repo, "-strict"), "VERIFIED")


HONEST_SPAWN_TEST = """import subprocess
import sys
import threading
import unittest

from calc import add


class SpawnTest(unittest.TestCase):
    def test_child_interpreter(self):
        out = subprocess.run([sys.executable, "-c", "print(2 + 3)"], capture_output=True,
                             text=True, check=True).stdout
        self.assertEqual(int(out), add(2, 3))

    def test_threads(self):
        results = []
        workers = [threading.Thread(target=lambda: results.append(add(1, 1)))
                   for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        self.assertEqual(results, [2] * 4)
"""


class ForgedStreamPickTest(AdversarialCase):
    """`golem pick` re-verifies a result file anyone can write through the same sealed path."""

    def test_a_forged_result_carrying_the_payload_is_not_picked(self):
        repo = self.project(BUGGY, git_repo=True)
        with open(os.path.join(repo, "calc.py"), "w", encoding="utf-8") as handle:
            handle.write(forged("unittest", EXEC))
        patch = git(repo, "diff")
        git(repo, "checkout", "-q", "--", "calc.py")
        artifacts = os.path.join(self.tmp, "artifacts")
        os.makedirs(artifacts)
        with open(os.path.join(artifacts, "fix.patch"), "w", encoding="utf-8") as handle:
            handle.write(patch)
        result = os.path.join(artifacts, "result.json")
        with open(result, "w", encoding="utf-8") as handle:
            json.dump({"verdict": "VERIFIED", "patch": "fix.patch", "cost": 0.0,
                       "attempt": "1/1", "suspicious": [],
                       "base": git(repo, "rev-parse", "HEAD").strip()}, handle)
        outcome = invoke(["pick", "-dir", repo, "-test", UNITTEST_CMD, "-sandbox", "none",
                          "-json", result])
        self.assertNotVerified(outcome)
        self.assertEqual(read(os.path.join(repo, "calc.py")), BUGGY_CALC)


class HonestControlTest(AdversarialCase):
    """Suites that start the interpreter and use threads stay VERIFIED."""

    def test_a_test_class_imported_into_a_second_module_stays_verified(self):
        # unittest collects AddTest twice, under the same ids: each is reported twice
        reuse = "from test_calc import AddTest  # noqa: F401\n"
        repo = self.project({**BUGGY, "tests/test_reuse.py": reuse}, git_repo=True)
        self.commit_change(repo, {"calc.py": "def add(a, b):\n    return a + b\n"}, "fix")
        self.assertVerdict(self.verify(repo, "-strict"), "VERIFIED")

    def test_subprocesses_and_threads_stay_verified(self):
        repo = self.project({**BUGGY, "tests/test_spawn.py": HONEST_SPAWN_TEST}, git_repo=True)
        self.commit_change(repo, {"calc.py": "def add(a, b):\n    return a + b\n"}, "fix")
        self.assertVerdict(self.verify(repo, "-strict"), "VERIFIED")


@needs_xdist
class XdistTest(AdversarialCase):
    """pytest-xdist (`addopts = -n 2`) would run the tests in worker processes, out of sight
    of golem's plugin; golem's runs keep them in one process and say so."""

    def test_rewritten_expectations_under_xdist_are_rejected_through_verify(self):
        repo = self.project(XDIST_PROJECT, git_repo=True)
        self.commit_change(repo, {"data/expected.txt": "hello\n"}, "expect what render gives")
        report = self.assertVerdict(self.verify(repo, command=XDIST_CMD), "REJECTED")
        self.assertIn("data/expected.txt", report["summary"])
        self.assertIn("pytest-xdist", self.trace_text())

    def test_rewritten_expectations_under_xdist_are_rejected_through_fix(self):
        repo = self.project(XDIST_PROJECT, git_repo=True)
        outcome = self.attack(repo, [write("data/expected.txt", "hello\n")], command=XDIST_CMD)
        self.assertVerdict(outcome, "REJECTED")

    def test_an_honest_fix_under_xdist_is_verified(self):
        repo = self.project(XDIST_PROJECT, git_repo=True)
        self.commit_change(repo, {"calc.py": RENDER_FIXED}, "fix render")
        report = self.assertVerdict(self.verify(repo, command=XDIST_CMD), "VERIFIED")
        self.assertEqual(report["tests"]["after"]["failing"], [])


if __name__ == "__main__":
    unittest.main()
