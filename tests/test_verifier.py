import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from importlib.util import cache_from_source

from golem.errors import UsageError
from golem.tools.process import command_env
from golem.workflow import runs
from golem.workflow.patch import make_patch
from golem.workflow.protect import new_tests, protected_changes, reason
from golem.workflow.snapshot import Changes, Snapshot, compare, fingerprint
from golem.workflow.suite import SuiteResult, TestCommand, detect, parse_command, run_suite
from golem.workflow.verdict import judge

PY = sys.executable
UNITTEST = ["python3", "-m", "unittest", "discover", "-s", "tests"]

try:
    import pytest  # noqa: F401
    HAVE_PYTEST = True
except ImportError:
    HAVE_PYTEST = False


class TempCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.base = os.path.realpath(tmp.name)
        self.root = os.path.join(self.base, "ws")
        os.mkdir(self.root)

    def put(self, rel: str, data: str | bytes, root: str | None = None) -> str:
        full = os.path.join(root or self.root, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(data, str):
            data = textwrap.dedent(data).encode()
        with open(full, "wb") as fh:
            fh.write(data)
        return full

    def read(self, rel: str) -> bytes:
        with open(os.path.join(self.root, rel), "rb") as fh:
            return fh.read()


class DetectTest(TempCase):
    def detect(self, *files: str) -> TestCommand:
        for rel in files:
            if rel.endswith("/"):
                os.makedirs(os.path.join(self.root, rel), exist_ok=True)
            else:
                self.put(rel, "")
        return detect(self.root)

    def test_pytest_ini(self):
        command = self.detect("pytest.ini", "tests/")
        self.assertEqual(command.argv, ["python3", "-m", "pytest"])
        self.assertEqual(command.runner, "pytest")
        self.assertIn("pytest.ini", command.origin)

    def test_pyproject_only_with_pytest_section(self):
        self.put("pyproject.toml", "[project]\nname = 'x'\n")
        self.assertEqual(self.detect("tests/").runner, "unittest")
        self.put("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n")
        self.assertEqual(detect(self.root).runner, "pytest")

    def test_tests_directory(self):
        command = self.detect("tests/")
        self.assertEqual(command.argv, UNITTEST)
        self.assertEqual(command.runner, "unittest")

    def test_tests_package_adds_top_level(self):
        command = self.detect("tests/__init__.py")
        self.assertEqual(command.argv, UNITTEST + ["-t", "."])

    def test_test_directory(self):
        self.assertEqual(self.detect("test/").argv[-2:], ["-s", "test"])

    def test_go(self):
        self.assertEqual(self.detect("go.mod").argv, ["go", "test", "./..."])

    def test_cargo(self):
        command = self.detect("Cargo.toml")
        self.assertEqual((command.argv, command.runner), (["cargo", "test"], "exit-code"))

    def test_package_json_needs_a_test_script(self):
        self.put("package.json", json.dumps({"scripts": {"build": "tsc"}}))
        with self.assertRaises(UsageError):
            detect(self.root)
        self.put("package.json", json.dumps({"scripts": {"test": "jest"}}))
        self.assertEqual(detect(self.root).argv, ["npm", "test"])

    def test_makefile_needs_a_test_target(self):
        self.put("Makefile", "build:\n\tcc -o x x.c\n")
        with self.assertRaises(UsageError):
            detect(self.root)
        self.put("Makefile", "build:\n\tcc -o x x.c\n\ntest: build\n\t./x --selftest\n")
        command = detect(self.root)
        self.assertEqual((command.argv, command.runner), (["make", "test"], "exit-code"))

    def test_nothing(self):
        self.put("README.md", "hello")
        with self.assertRaises(UsageError) as cm:
            detect(self.root)
        self.assertIn("-test", str(cm.exception))

    def test_parse_command(self):
        command = parse_command("python3 -m pytest -k 'not slow'")
        self.assertEqual(command.argv, ["python3", "-m", "pytest", "-k", "not slow"])
        self.assertEqual(command.runner, "pytest")
        self.assertEqual(parse_command("python3.11 -m unittest").runner, "unittest")
        self.assertEqual(parse_command("python3 check.py").runner, "exit-code")
        for bad in ("", "   ", "python3 'unterminated"):
            with self.assertRaises(UsageError):
                parse_command(bad)


MIXED = """\
    import unittest

    class Mixed(unittest.TestCase):
        def test_pass(self):
            pass

        def test_fail(self):
            self.assertEqual(1, 2)

        def test_error(self):
            raise RuntimeError("boom")

        @unittest.skip("not today")
        def test_skip(self):
            pass

        @unittest.expectedFailure
        def test_xfail(self):
            self.assertEqual(1, 2)

        def test_subtests(self):
            for i in range(3):
                with self.subTest(i=i):
                    self.assertNotEqual(i, 1)
    """

GREEN = """\
    import unittest

    class Green(unittest.TestCase):
        def test_one(self):
            self.assertTrue(True)
    """


class SuiteCase(TempCase):
    def setUp(self):
        super().setUp()
        self.scratch = os.path.join(self.base, "scratch")
        home = os.path.join(self.base, "home")
        os.mkdir(self.scratch)
        os.mkdir(home)
        self.env = command_env(home, home)

    def suite(self, argv: list[str], runner: str | None = None) -> SuiteResult:
        if runner is None:
            runner = parse_command(" ".join(argv)).runner
        result = run_suite(TestCommand(argv, runner, "-test"), cwd=self.root, env=self.env,
                           scratch=self.scratch, timeout=60)
        # the result file golem reads never stays behind
        leftovers = [n for n in os.listdir(self.scratch) if n != "golem_unittest_driver.py"]
        self.assertEqual(leftovers, [])
        return result


class UnittestSuiteTest(SuiteCase):
    argv = [PY, "-m", "unittest", "discover", "-s", "tests"]

    def test_per_test_outcomes(self):
        self.put("tests/test_mixed.py", MIXED)
        result = self.suite(self.argv)
        self.assertEqual(result.evidence, "unittest-json")
        self.assertEqual(result.tests, {
            "test_mixed.Mixed.test_pass": "passed",
            "test_mixed.Mixed.test_fail": "failed",
            "test_mixed.Mixed.test_error": "error",
            "test_mixed.Mixed.test_skip": "skipped",
            "test_mixed.Mixed.test_xfail": "xfail",
            "test_mixed.Mixed.test_subtests": "failed",
        })
        self.assertEqual(result.failing, ["test_mixed.Mixed.test_error",
                                          "test_mixed.Mixed.test_fail",
                                          "test_mixed.Mixed.test_subtests"])
        self.assertEqual(result.exit_code, 1)
        self.assertIsNone(result.problem)
        self.assertFalse(result.passed)
        self.assertEqual(result.pseudo, set())
        self.assertTrue(result.summary().startswith("failing (6 tests: "), result.summary())

    def test_green_with_package_and_top_level(self):
        self.put("tests/__init__.py", "")
        self.put("tests/test_green.py", GREEN)
        self.put("calc/__init__.py", "def add(a, b):\n    return a + b\n")
        self.put("tests/test_calc.py", """\
            import unittest
            from calc import add

            class Calc(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 2), 4)
            """)
        result = self.suite(self.argv + ["-t", "."])
        self.assertTrue(result.passed, result.output)
        self.assertEqual(result.tests, {"tests.test_calc.Calc.test_add": "passed",
                                        "tests.test_green.Green.test_one": "passed"})
        self.assertEqual(result.to_json()["counts"], {"passed": 2})

    def test_import_error_is_pseudo(self):
        self.put("tests/test_green.py", GREEN)
        self.put("tests/test_broken.py", "import no_such_module_anywhere\n")
        result = self.suite(self.argv)
        self.assertFalse(result.passed)
        (pseudo,) = result.pseudo
        self.assertIn("test_broken", pseudo)
        self.assertEqual(result.tests[pseudo], "error")
        self.assertIn(pseudo, result.failing)
        self.assertEqual(result.tests["test_green.Green.test_one"], "passed")

    def test_exit_at_import_leaves_no_result(self):
        self.put("tests/test_green.py", GREEN)
        self.put("tests/test_exit.py", "import os\nos._exit(0)\n")
        result = self.suite(self.argv)
        self.assertEqual(result.exit_code, 0)
        self.assertIn("missing", result.problem)
        self.assertFalse(result.passed)
        self.assertEqual(result.tests, {})

    def test_exit_inside_a_test_leaves_no_result(self):
        self.put("tests/test_exit.py", """\
            import os, sys, unittest

            class Quit(unittest.TestCase):
                def test_fails(self):
                    self.fail("real failure")

                def test_zz_quit(self):
                    print("Ran 2 tests\\n\\nOK")
                    sys.stdout.flush()
                    os._exit(0)
            """)
        result = self.suite(self.argv)
        self.assertEqual(result.exit_code, 0)
        self.assertIsNotNone(result.problem)
        self.assertFalse(result.passed)

    FORGE_AT_EXIT = textwrap.dedent("""\
        import atexit, os, sys

        def forge():
            sys.stdout.write("Ran 1 test in 0.000s\\n\\nOK\\n")
            sys.stdout.flush()
            os._exit(0)

        atexit.register(forge)
        """)

    def test_forged_ok_and_exit_zero_at_exit_never_runs(self):
        # the driver leaves with os._exit once the result is written: no atexit hook runs
        self.put("tests/test_forge.py", self.FORGE_AT_EXIT + textwrap.dedent("""\
            import unittest

            class Forged(unittest.TestCase):
                def test_fails(self):
                    self.assertEqual(1, 2)
            """))
        result = self.suite(self.argv)
        self.assertEqual(result.exit_code, 1)
        self.assertFalse(result.output.rstrip().endswith("OK"))
        self.assertEqual(result.failing, ["test_forge.Forged.test_fails"])
        self.assertIsNone(result.problem)
        self.assertFalse(result.passed)

    def test_replaced_unittest_machinery_is_a_failing_pseudo_test(self):
        self.put("tests/test_forge.py", """\
            import unittest

            def _run(self, result=None):
                result.startTest(self)
                result.addSuccess(self)
                result.stopTest(self)

            unittest.TestCase.run = _run

            class Forged(unittest.TestCase):
                def test_fails(self):
                    self.assertEqual(1, 2)
            """)
        result = self.suite(self.argv)
        pseudo = "golem: the code under test replaced unittest.TestCase.run"
        self.assertEqual(result.tests, {"test_forge.Forged.test_fails": "passed",
                                        pseudo: "error"})
        self.assertEqual(result.pseudo, {pseudo})
        self.assertEqual(result.exit_code, 1)
        self.assertFalse(result.passed)

    def test_no_tests_is_not_green(self):
        os.mkdir(os.path.join(self.root, "tests"))
        result = self.suite(self.argv)
        self.assertFalse(result.passed)
        self.assertEqual(result.problem, "no tests ran")

    def test_output_is_kept(self):
        self.put("tests/test_mixed.py", MIXED)
        result = self.suite(self.argv)
        self.assertIn("RuntimeError: boom", result.output)


class ExitCodeSuiteTest(SuiteCase):
    def test_exit_code_only(self):
        self.put("check.py", "import sys\nprint('checked')\nsys.exit(int(open('rc').read()))\n")
        self.put("rc", "0")
        command = parse_command("python3 check.py")
        self.assertEqual(command.runner, "exit-code")
        result = self.suite([PY, "check.py"], "exit-code")
        self.assertEqual(result.evidence, "exit-code")
        self.assertIsNone(result.tests)
        self.assertTrue(result.passed)
        self.assertIn("checked", result.output)
        self.assertIn("exit code only", result.summary())
        self.put("rc", "5")
        result = self.suite([PY, "check.py"], "exit-code")
        self.assertEqual(result.exit_code, 5)
        self.assertFalse(result.passed)


@unittest.skipUnless(HAVE_PYTEST, "pytest is not installed for this Python (`import pytest` "
                     "failed); the junit-xml evidence path cannot be exercised")
class PytestSuiteTest(SuiteCase):
    argv = [PY, "-m", "pytest", "-q"]

    def test_per_test_outcomes_from_junit(self):
        self.put("tests/test_p.py", """\
            import pytest

            def test_pass():
                pass

            def test_fail():
                assert 1 == 2

            @pytest.mark.skip(reason="no")
            def test_skip():
                pass

            @pytest.mark.xfail
            def test_xfail():
                assert 0

            @pytest.fixture
            def broken():
                raise RuntimeError("fixture")

            def test_error(broken):
                pass
            """)
        result = self.suite(self.argv)
        self.assertEqual(result.evidence, "junit-xml")
        self.assertEqual(result.tests, {
            "tests.test_p::test_pass": "passed",
            "tests.test_p::test_fail": "failed",
            "tests.test_p::test_skip": "skipped",
            "tests.test_p::test_xfail": "xfail",
            "tests.test_p::test_error": "error",
        })
        self.assertEqual(result.pseudo, set())
        self.assertIsNone(result.problem)
        self.assertFalse(result.passed)
        self.assertFalse(os.path.exists(os.path.join(self.root, ".pytest_cache")))

    def test_collection_error_is_pseudo(self):
        self.put("tests/test_bad.py", "import no_such_module_anywhere\n")
        result = self.suite(self.argv)
        self.assertEqual(result.pseudo, {"tests.test_bad"})
        self.assertEqual(result.tests, {"tests.test_bad": "error"})
        self.assertFalse(result.passed)

    def test_green(self):
        self.put("test_ok.py", "def test_ok():\n    assert True\n")
        result = self.suite(self.argv)
        self.assertTrue(result.passed, result.output)
        self.assertEqual(result.tests, {"test_ok::test_ok": "passed"})

    def test_forged_exit_zero_with_failures(self):
        self.put("test_forge.py", UnittestSuiteTest.FORGE_AT_EXIT
                 + "\ndef test_fails():\n    assert 1 == 2\n")
        result = self.suite(self.argv)
        self.assertEqual(result.exit_code, 0)
        self.assertTrue(result.output.rstrip().endswith("OK"))
        self.assertEqual(result.failing, ["test_forge::test_fails"])
        self.assertIn("disagrees", result.problem)
        self.assertFalse(result.passed)


class ProtectTest(unittest.TestCase):
    def test_protected_kinds(self):
        unittest_argv = ["python3", "-m", "unittest"]
        cases = [
            ("tests/test_calc.py", "modified", unittest_argv, "existing test file modified"),
            ("tests/test_calc.py", "removed", unittest_argv, "existing test file deleted"),
            ("test_top.py", "modified", unittest_argv, "existing test file"),
            ("tests/data/expected.json", "modified", unittest_argv, "existing test file"),
            ("conftest.py", "added", unittest_argv, "conftest.py"),
            ("src/deep/conftest.py", "added", unittest_argv, "conftest.py"),
            ("src/conftest.py", "modified", unittest_argv, "conftest.py"),
            ("sitecustomize.py", "added", unittest_argv, "start-up"),
            ("lib/usercustomize.py", "added", unittest_argv, "start-up"),
            ("foo.pth", "added", unittest_argv, "start-up"),
            ("unittest.py", "added", unittest_argv, "shadows the 'unittest' module"),
            ("pkg/unittest.py", "added", unittest_argv, "shadows the 'unittest' module"),
            ("pytest.py", "added", unittest_argv, "shadows the 'pytest' module"),
            ("lib/pytest.py", "added", unittest_argv, "shadows the 'pytest' module"),
            ("json/__init__.py", "added", unittest_argv, "shadows the 'json' module"),
            ("pyproject.toml", "modified", unittest_argv, "configuration"),
            ("setup.cfg", "added", unittest_argv, "configuration"),
            ("tox.ini", "modified", unittest_argv, "configuration"),
            ("pytest.ini", "removed", unittest_argv, "configuration"),
            ("Makefile", "modified", ["make", "test"], "used by the test command"),
            ("tests/__init__.py", "added", unittest_argv, "__init__.py"),
        ]
        for rel, kind, argv, fragment in cases:
            with self.subTest(rel=rel, kind=kind):
                why = reason(rel, kind, argv)
                self.assertIsNotNone(why)
                self.assertIn(fragment, why)

    def test_allowed_kinds(self):
        argv = ["python3", "-m", "unittest"]
        cases = [
            ("tests/test_new.py", "added", argv),
            ("calc/core.py", "modified", argv),
            ("calc/core.py", "added", argv),
            ("calc/old.py", "removed", argv),
            ("README.md", "modified", argv),
            ("Makefile", "modified", argv),         # the test command does not use make
            ("docs/pyproject.toml", "modified", argv),
            ("calc/__init__.py", "added", argv),
        ]
        for rel, kind, argv in cases:
            with self.subTest(rel=rel, kind=kind):
                self.assertIsNone(reason(rel, kind, argv))

    def test_protected_changes_and_new_tests(self):
        changes = Changes(added=["tests/test_new.py", "conftest.py"],
                          modified=["calc/core.py", "tests/test_old.py"], removed=[])
        found = protected_changes(changes, ["python3", "-m", "pytest"])
        self.assertEqual([p for p, _ in found], ["conftest.py", "tests/test_old.py"])
        self.assertEqual(new_tests(changes), ["tests/test_new.py"])

    def test_new_runner_config_in_the_test_directory(self):
        self.assertIsNotNone(reason("tests/pytest.ini", "added",
                                    ["python3", "-m", "pytest", "tests"]))


def result(tests: dict[str, str] | None, exit_code: int = 0, pseudo=(),
           problem: str | None = None) -> SuiteResult:
    return SuiteResult(exit_code, False, "", 0.1,
                       "exit-code" if tests is None else "unittest-json", tests,
                       set(pseudo), problem)


class VerdictTest(unittest.TestCase):
    before = {"t.a": "failed", "t.b": "passed", "t.c": "error"}

    def test_fixed(self):
        verdict = judge(result(self.before, 1),
                        result({"t.a": "passed", "t.b": "passed", "t.c": "passed"}), [])
        self.assertEqual(verdict.name, "VERIFIED")
        self.assertEqual(verdict.exit_code, 0)
        self.assertEqual(verdict.fixed, ["t.a", "t.c"])
        self.assertIn("2 fixed", verdict.summary)

    def test_new_passing_test_is_fine(self):
        after = {"t.a": "passed", "t.b": "passed", "t.c": "passed", "t.new": "passed"}
        self.assertEqual(judge(result(self.before, 1), result(after), []).name, "VERIFIED")

    def test_still_failing(self):
        after = {"t.a": "passed", "t.b": "passed", "t.c": "skipped"}
        verdict = judge(result(self.before, 1), result(after, 0), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.exit_code, 1)
        self.assertEqual(verdict.still_failing, ["t.c"])
        self.assertIn("1 still failing: t.c", verdict.summary)

    def test_newly_failing(self):
        after = {"t.a": "passed", "t.b": "failed", "t.c": "passed"}
        verdict = judge(result(self.before, 1), result(after, 1), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.newly_failing, ["t.b"])
        self.assertIn("1 newly failing: t.b", verdict.summary)

    def test_missing_test(self):
        verdict = judge(result(self.before, 1), result({"t.a": "passed", "t.c": "passed"}), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.missing, ["t.b"])
        self.assertIn("went missing: t.b", verdict.summary)

    def test_new_failing_test_counts(self):
        after = {"t.a": "passed", "t.b": "passed", "t.c": "passed", "t.new": "failed"}
        verdict = judge(result(self.before, 1), result(after, 1), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.still_failing, ["t.new"])

    def test_pseudo_before_is_not_required_after(self):
        before = result({"t.a": "failed", "loader.test_x": "error"}, 1, pseudo={"loader.test_x"})
        verdict = judge(before, result({"t.a": "passed", "x.T.test_1": "passed"}), [])
        self.assertEqual(verdict.name, "VERIFIED")

    def test_untrustworthy_evidence_fails(self):
        after = result({"t.a": "passed", "t.b": "passed", "t.c": "passed"}, 0,
                       problem="the result file was missing: the suite did not run to the end")
        verdict = judge(result(self.before, 1), after, [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertIn("result file was missing", verdict.summary)

    def test_protected_is_rejected_even_when_passing(self):
        after = result({"t.a": "passed", "t.b": "passed", "t.c": "passed"})
        protected = [("tests/test_t.py", "existing test file modified")]
        verdict = judge(result(self.before, 1), after, protected)
        self.assertEqual(verdict.name, "REJECTED")
        self.assertEqual(verdict.exit_code, 3)
        self.assertIn("the suite passes, but", verdict.summary)
        self.assertIn("tests/test_t.py (existing test file modified)", verdict.summary)
        verdict = judge(result(self.before, 1), result({"t.a": "failed"}, 1), protected)
        self.assertEqual(verdict.name, "REJECTED")
        self.assertNotIn("passes", verdict.summary)

    def test_exit_code_only(self):
        verdict = judge(result(None, 1), result(None, 0), [])
        self.assertEqual(verdict.name, "VERIFIED")
        self.assertIn("judged by exit code only", verdict.summary)
        verdict = judge(result(None, 1), result(None, 2), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertIn("suite still fails", verdict.summary)
        self.assertIn("exit 2", verdict.summary)


class SnapshotTest(TempCase):
    def test_compare(self):
        self.put("same.txt", "same")
        self.put("edit.txt", "old")
        mode = self.put("mode.sh", "#!/bin/sh\n")
        self.put("gone.txt", "bye")
        os.symlink("same.txt", os.path.join(self.root, "link"))
        self.put("__pycache__/x.pyc", b"\0")
        self.put(".git/HEAD", "ref")
        before = fingerprint(self.root)
        self.assertNotIn("__pycache__/x.pyc", before)
        self.assertNotIn(".git/HEAD", before)
        self.put("edit.txt", "new")
        os.chmod(mode, 0o755)
        os.unlink(os.path.join(self.root, "gone.txt"))
        self.put("sub/added.txt", "hi")
        os.unlink(os.path.join(self.root, "link"))
        os.symlink("edit.txt", os.path.join(self.root, "link"))
        self.put("__pycache__/x.pyc", b"\1")
        changes = compare(before, fingerprint(self.root))
        self.assertEqual(changes.added, ["sub/added.txt"])
        self.assertEqual(changes.modified, ["edit.txt", "link", "mode.sh"])
        self.assertEqual(changes.removed, ["gone.txt"])
        self.assertEqual(changes.all, ["edit.txt", "gone.txt", "link", "mode.sh",
                                       "sub/added.txt"])
        self.assertEqual(compare(before, before).all, [])

    def test_take_and_load(self):
        self.put("a.txt", "alpha")
        self.put("b/c.txt", "alpha")
        snap = Snapshot.take(self.root, os.path.join(self.base, "run"))
        self.put("a.txt", "changed")
        loaded = Snapshot.load(os.path.join(self.base, "run"))
        self.assertEqual(loaded.entries, snap.entries)
        self.assertEqual(loaded.original("a.txt"), b"alpha")
        self.assertIsNone(loaded.original("nope.txt"))
        # one copy per distinct content
        self.assertEqual(len(os.listdir(os.path.join(self.base, "run", "store"))), 1)


class UndoTest(TempCase):
    def setUp(self):
        super().setUp()
        old = os.environ.get("GOLEM_STATE_DIR")
        os.environ["GOLEM_STATE_DIR"] = os.path.join(self.base, "state")
        self.addCleanup(self.restore_env, old)
        self.put("keep.txt", "untouched\n")
        self.put("edit.txt", "original\n")
        self.put("dir/gone.txt", "deleted by the run\n")
        os.chmod(self.put("tool.sh", "#!/bin/sh\n"), 0o755)

    @staticmethod
    def restore_env(old):
        if old is None:
            os.environ.pop("GOLEM_STATE_DIR", None)
        else:
            os.environ["GOLEM_STATE_DIR"] = old

    def run_that_changes_things(self) -> str:
        run_id, path = runs.new_run(self.root)
        snap = Snapshot.take(self.root, path)
        self.put("edit.txt", "changed by the run\n")
        shutil.rmtree(os.path.join(self.root, "dir"))
        self.put("new/created.txt", "created by the run\n")
        os.chmod(os.path.join(self.root, "tool.sh"), 0o644)
        after = fingerprint(self.root)
        changes = compare(snap.entries, after)
        self.assertEqual(changes.all, ["dir/gone.txt", "edit.txt", "new/created.txt",
                                       "tool.sh"])
        runs.finish_run(path, changes, after)
        self.assertTrue(path.startswith(os.path.join(self.base, "state", "runs")))
        self.assertEqual(os.path.basename(path), run_id)
        return path

    def test_undo_restores_everything(self):
        path = self.run_that_changes_things()
        self.assertEqual(runs.find_run(self.root, None), path)
        restored, skipped = runs.undo(path)
        self.assertEqual(restored, ["dir/gone.txt", "edit.txt", "new/created.txt", "tool.sh"])
        self.assertEqual(skipped, [])
        self.assertEqual(self.read("edit.txt"), b"original\n")
        self.assertEqual(self.read("dir/gone.txt"), b"deleted by the run\n")
        self.assertEqual(self.read("keep.txt"), b"untouched\n")
        self.assertFalse(os.path.exists(os.path.join(self.root, "new", "created.txt")))
        self.assertEqual(os.stat(os.path.join(self.root, "tool.sh")).st_mode & 0o777, 0o755)
        with self.assertRaises(UsageError):
            runs.undo(path)
        with self.assertRaises(UsageError):
            runs.find_run(self.root, None)

    def test_file_edited_after_the_run_is_kept_unless_forced(self):
        path = self.run_that_changes_things()
        self.put("edit.txt", "the person's later work\n")
        restored, skipped = runs.undo(path)
        self.assertEqual(skipped, ["edit.txt"])
        self.assertIn("dir/gone.txt", restored)
        self.assertEqual(self.read("edit.txt"), b"the person's later work\n")
        self.assertEqual(self.read("dir/gone.txt"), b"deleted by the run\n")

    def test_force_puts_back_a_file_edited_after_the_run(self):
        path = self.run_that_changes_things()
        self.put("edit.txt", "the person's later work\n")
        restored, skipped = runs.undo(path, force=True)
        self.assertEqual(skipped, [])
        self.assertIn("edit.txt", restored)
        self.assertEqual(self.read("edit.txt"), b"original\n")

    def test_force_after_a_partial_undo(self):
        path = self.run_that_changes_things()
        self.put("edit.txt", "the person's later work\n")
        _, skipped = runs.undo(path)
        self.assertEqual(skipped, ["edit.txt"])
        restored, skipped = runs.undo(path, force=True)
        self.assertIn("edit.txt", restored)
        self.assertEqual(self.read("edit.txt"), b"original\n")

    def test_find_run_by_id_and_workspace(self):
        path = self.run_that_changes_things()
        self.assertEqual(runs.find_run(self.root, os.path.basename(path)), path)
        with self.assertRaises(UsageError):
            runs.find_run(self.root, "19700101-000000-abcdef")
        with self.assertRaises(UsageError):
            runs.find_run(os.path.join(self.base, "elsewhere"), None)


class PatchTest(TempCase):
    """make_patch's output must apply with `git apply` to a copy of the original tree."""

    def setUp(self):
        super().setUp()
        self.git_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                        "HOME": self.base, "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_CONFIG_GLOBAL": os.devnull}

    def git(self, *args: str, cwd: str, data: bytes | None = None):
        return subprocess.run(["git", *args], cwd=cwd, env=self.git_env, input=data,
                              capture_output=True, timeout=60)

    def apply(self, original: dict[str, bytes], change) -> tuple[str, str]:
        """Apply `change` to the workspace, patch a copy of the original; both trees' paths."""
        for rel, data in original.items():
            self.put(rel, data)
        copy = os.path.join(self.base, "copy")
        shutil.copytree(self.root, copy, symlinks=True)
        self.assertEqual(self.git("init", "-q", cwd=copy).returncode, 0)
        snap = Snapshot.take(self.root, os.path.join(self.base, "run"))
        change()
        changes = compare(snap.entries, fingerprint(self.root))
        patch = make_patch(self.root, snap, changes.all)
        applied = self.git("apply", "-v", "-", cwd=copy,
                           data=patch.encode("utf-8", "surrogateescape"))
        self.assertEqual(applied.returncode, 0, applied.stderr.decode() + "\n" + patch)
        return patch, copy

    def tree(self, root: str) -> dict[str, bytes]:
        out = {}
        for rel, _ in sorted(fingerprint(root).items()):
            with open(os.path.join(root, rel), "rb") as fh:
                out[rel] = fh.read()
        return out

    def test_modified_created_deleted_and_no_trailing_newline(self):
        original = {"a.txt": b"one\ntwo\nthree\n",
                    "noeol.txt": b"first\nlast without newline",
                    "gone.py": b"print('bye')\n",
                    "keep.txt": b"keep\n"}

        def change():
            self.put("a.txt", b"one\nTWO\nthree\n")
            self.put("noeol.txt", b"first\nlast, still without newline")
            os.unlink(os.path.join(self.root, "gone.py"))
            self.put("pkg/new.py", b"def f():\n    return 1\n")
            self.put("tail.txt", b"no newline at all")

        patch, copy = self.apply(original, change)
        self.assertIn("diff --git a/a.txt b/a.txt\n", patch)
        self.assertIn("deleted file mode", patch)
        self.assertIn("new file mode", patch)
        self.assertIn("\\ No newline at end of file", patch)
        self.assertNotIn("keep.txt", patch)
        self.assertEqual(self.tree(copy), self.tree(self.root))

    def test_only_the_given_paths(self):
        def change():
            self.put("a.txt", b"allowed change\n")
            self.put("tests/test_a.py", b"tampered\n")

        original = {"a.txt": b"x\n", "tests/test_a.py": b"import unittest\n"}
        for rel, data in original.items():
            self.put(rel, data)
        snap = Snapshot.take(self.root, os.path.join(self.base, "run"))
        change()
        patch = make_patch(self.root, snap, ["a.txt"])
        self.assertIn("a/a.txt", patch)
        self.assertNotIn("test_a.py", patch)

    def test_created_empty_file(self):
        def change():
            self.put("pkg/__init__.py", b"")
            self.put("pkg/mod.py", b"X = 1\n")

        _, copy = self.apply({"README": b"r\n"}, change)
        self.assertEqual(self.tree(copy), self.tree(self.root))

    def test_lines_with_form_feed_or_carriage_return(self):
        def change():
            self.put("ff.py", b"a = 1\n\x0c\nb = 3\n")
            self.put("cr.txt", b"progress\r50%\ndone!\n")

        self.apply({"ff.py": b"a = 1\n\x0c\nb = 2\n", "cr.txt": b"progress\r50%\ndone\n"},
                   change)

    def test_binary_change(self):
        def change():
            self.put("data.bin", b"\x00\x01\x03")
            self.put("a.txt", b"after\n")

        _, copy = self.apply({"data.bin": b"\x00\x01\x02", "a.txt": b"before\n"}, change)
        self.assertEqual(self.tree(copy), self.tree(self.root))


class TamperingTest(SuiteCase):
    """Changes the verifier cannot see must not let a failing suite be VERIFIED."""

    def test_forged_bytecode_for_an_existing_test(self):
        real = self.put("tests/test_a.py", """\
            import unittest


            class T(unittest.TestCase):
                def test_x(self):
                    self.assertEqual(1, 2)
            """)
        argv = [PY, "-m", "unittest", "discover", "-s", "tests"]
        before = self.suite(argv)
        self.assertEqual(before.failing, ["test_a.T.test_x"])
        entries = fingerprint(self.root)

        fake = os.path.join(self.base, "fake.py")
        body = ("import unittest\nclass T(unittest.TestCase):\n"
                "    def test_x(self):\n        pass\n")
        size = os.path.getsize(real)
        with open(fake, "w") as fh:
            fh.write(body + "#" * (size - len(body) - 1) + "\n")
        st = os.stat(real)
        os.utime(fake, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.assertEqual(os.path.getsize(fake), size)
        py_compile.compile(fake, cfile=cache_from_source(real), dfile=real, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)

        after = self.suite(argv)
        changes = compare(entries, fingerprint(self.root))
        verdict = judge(before, after, protected_changes(changes, argv))
        self.assertNotEqual(verdict.name, "VERIFIED", verdict.summary)

    @unittest.skipUnless(HAVE_PYTEST, "pytest is not installed for this Python")
    def test_plugin_registered_through_new_package_metadata(self):
        self.put("test_a.py", "def test_x():\n    assert 1 == 2\n")
        argv = [PY, "-m", "pytest", "-q"]
        before = self.suite(argv)
        self.assertEqual(before.failing, ["test_a::test_x"])
        entries = fingerprint(self.root)
        self.put("helper.egg-info/PKG-INFO", "Metadata-Version: 2.1\nName: helper\nVersion: 1\n")
        self.put("helper.egg-info/entry_points.txt", "[pytest11]\nhelper = helper_plugin\n")
        self.put("helper_plugin.py", """\
            import pytest

            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_makereport(item, call):
                report = (yield).get_result()
                report.outcome = "passed"
                report.longrepr = None
            """)
        after = self.suite(argv)
        changes = compare(entries, fingerprint(self.root))
        verdict = judge(before, after, protected_changes(changes, argv))
        self.assertNotEqual(verdict.name, "VERIFIED", verdict.summary)


if __name__ == "__main__":
    unittest.main()
