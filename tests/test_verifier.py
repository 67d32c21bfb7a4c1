import importlib.machinery
import json
import os
import py_compile
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from importlib.util import cache_from_source

from golem.core.errors import UsageError
from golem.tools.process import command_env
from golem.trace import Trace
from golem.workflow import runs
from golem.workflow.patch import diffstat, file_diffs, make_patch
from golem.workflow.verifier import Environment, run_baseline
from golem.workflow.verifier.grade import judge, judge_new_tests, tampered
from golem.workflow.verifier.interpreter import locate, probe
from golem.workflow.verifier.protect import (Facts, import_roots, new_tests, protected_changes,
                                             reason)
from golem.workflow.verifier.scratch import HELPERS, Phase, cache_dir
from golem.workflow.verifier.snapshot import (MAX_COPY, Changes, Snapshot, compare,
                                              dependency_trees, fingerprint)
from golem.workflow.verifier.suite import (SuiteResult, TestCommand, detect, parse_command,
                                           plan_for, run_suite)

PY = sys.executable
UNITTEST = ["python3", "-m", "unittest", "discover", "-s", "tests"]
UNITTEST_FACTS = Facts(test_argv=["python3", "-m", "unittest"])

try:
    import pytest  # noqa: F401
    HAVE_PYTEST = True
except ImportError:
    HAVE_PYTEST = False
NO_PYTEST = ("pytest is not installed for this Python (`import pytest` failed); golem's pytest "
             "plugin cannot be exercised")


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
        self.assertEqual(self.detect("tests/test_a.py").runner, "unittest")
        self.put("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-q'\n")
        self.assertEqual(detect(self.root).runner, "pytest")

    def test_test_files_written_for_pytest(self):
        self.put("tests/test_a.py", "import unittest\n\nclass A(unittest.TestCase):\n    pass\n")
        self.assertEqual(detect(self.root).runner, "unittest")
        self.put("tests/sub/test_b.py", "def test_b():\n    assert True\n")
        command = detect(self.root)
        self.assertEqual((command.argv, command.runner), (["python3", "-m", "pytest"], "pytest"))
        self.assertIn("tests/sub/test_b.py has module-level test functions", command.origin)
        os.unlink(os.path.join(self.root, "tests", "sub", "test_b.py"))
        self.put("tests/test_c.py", "import pytest\n")
        self.assertIn("tests/test_c.py imports pytest", detect(self.root).origin)

    def test_tests_directory(self):
        command = self.detect("tests/test_a.py")
        self.assertEqual(command.argv, UNITTEST)
        self.assertEqual(command.runner, "unittest")

    def test_tests_package_adds_top_level(self):
        command = self.detect("tests/__init__.py")
        self.assertEqual(command.argv, UNITTEST + ["-t", "."])

    def test_test_directory(self):
        self.assertEqual(self.detect("test/test_a.py").argv[-2:], ["-s", "test"])

    def test_go(self):
        self.assertEqual(self.detect("go.mod").argv, ["go", "test", "./..."])

    def test_cargo(self):
        command = self.detect("Cargo.toml")
        self.assertEqual((command.argv, command.runner), (["cargo", "test"], "cargo"))

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
        self.assertEqual(parse_command("pytest -q").runner, "pytest")
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
    """Runs the suite the way golem does: a Plan from plan_for (the interpreter pinned), a
    phase with golem's read-only helpers, and a fresh run scratch for every run."""

    def setUp(self):
        super().setUp()
        home = os.path.join(self.base, "home")
        os.mkdir(home)
        self.env = command_env(home, home)
        self.phase = Phase("test")
        self.addCleanup(self.phase.close)

    def listing(self) -> set[str]:
        found = set()
        for top, dirs, files in os.walk(self.root):
            found.update(os.path.relpath(os.path.join(top, n), self.root) for n in dirs + files)
        return found

    def suite(self, argv: list[str], runner: str | None = None,
              only: str | None = None) -> SuiteResult:
        if runner is None:
            runner = parse_command(shlex.join(argv)).runner
        plan = plan_for(TestCommand(argv, runner, "-test"), self.env, self.root)
        before = self.listing()
        result = run_suite(plan, cwd=self.root, env=self.env, run=self.phase.run(),
                           helpers=self.phase.helpers(), timeout=120, only=only)
        # nothing of golem's lands in the workspace: no result file, no bytecode, no runner
        # cache (a plugin of this machine's pytest may write its own, e.g. `.benchmarks`)
        new = sorted(self.listing() - before)
        self.assertEqual([p for p in new if os.path.basename(p).startswith("result-") or
                          p.endswith((".pyc", ".xml", ".json")) or
                          {"__pycache__", ".pytest_cache"} & set(p.split(os.sep))], [])
        return result


class HelpersTest(SuiteCase):
    """golem's code that runs inside the test process comes from a read-only directory of
    the phase, outside the workspace, started with the interpreter pinned and isolated."""

    def test_the_helpers_directory(self):
        phase = Phase("helpers")
        helpers = phase.helpers()
        self.assertEqual(phase.helpers(), helpers)
        self.assertTrue(helpers.startswith(phase.root + os.sep))
        self.assertEqual(sorted(os.listdir(helpers)), sorted(HELPERS))
        self.assertEqual(os.stat(helpers).st_mode & 0o777, 0o555)
        for name in HELPERS:
            self.assertEqual(os.stat(os.path.join(helpers, name)).st_mode & 0o777, 0o444, name)
        phase.close()
        self.assertFalse(os.path.exists(phase.root))

    def test_the_plan_pins_the_interpreter_and_runs_it_isolated(self):
        plan = plan_for(TestCommand(UNITTEST, "unittest", "-test"), self.env, self.root)
        self.assertTrue(os.path.isabs(plan.program))
        self.assertEqual(plan.program, plan.interpreter.executable)
        self.assertEqual(plan.interpreter.version, tuple(sys.version_info[:3]))
        run = self.phase.run()
        helpers = self.phase.helpers()
        argv = plan.argv(self.root, run, helpers)
        self.assertEqual(argv, [plan.program, "-I", "-B", "-X", f"pycache_prefix={run.pycache}",
                                os.path.join(helpers, "unittest_driver.py"), "discover", "-s",
                                "tests"])
        # only a baseline writes golem's bytecode cache
        self.assertNotIn("-B", plan.argv(self.root, run, helpers, write_cache=True))
        with self.assertRaises(UsageError) as cm:
            plan_for(TestCommand(["no-such-python3"], "exit-code", "-test"), self.env, self.root)
        self.assertIn("not on PATH", str(cm.exception))

    def test_runs_do_not_share_a_scratch(self):
        first, second = self.phase.run(), self.phase.run()
        self.assertEqual(len({first.root, second.root}), 2)
        env = first.env(self.env)
        self.assertEqual((env["HOME"], env["TMPDIR"], env["PYTHONPYCACHEPREFIX"]),
                         (first.home, first.tmp, first.pycache))
        for path in (first.home, first.tmp, first.pycache):
            self.assertTrue(os.path.isdir(path))

    def test_a_workspace_module_cannot_stand_in_for_the_runner(self):
        # the driver imports unittest before the working directory is on sys.path
        self.put("unittest.py", "raise SystemExit('the workspace unittest.py was imported')\n")
        self.put("golem_evidence.py", "raise SystemExit('the workspace evidence was imported')\n")
        self.put("tests/test_green.py", GREEN)
        result = self.suite([PY, "-m", "unittest", "discover", "-s", "tests"])
        self.assertTrue(result.passed, result.output)
        self.assertEqual(result.tests, {"test_green.Green.test_one": "passed"})


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
        self.assertEqual(set(result.files.values()), {"tests/test_mixed.py"})
        self.assertEqual(set(result.files), set(result.tests))
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
        self.assertEqual(result.files, {"tests.test_calc.Calc.test_add": "tests/test_calc.py",
                                        "tests.test_green.Green.test_one": "tests/test_green.py"})
        self.assertEqual(result.to_json()["counts"], {"passed": 2})

    def test_import_error_is_pseudo_and_names_its_file(self):
        self.put("tests/test_green.py", GREEN)
        self.put("tests/test_broken.py", "import no_such_module_anywhere\n")
        result = self.suite(self.argv)
        self.assertFalse(result.passed)
        (pseudo,) = result.pseudo
        self.assertIn("test_broken", pseudo)
        self.assertEqual(result.tests[pseudo], "error")
        self.assertIn(pseudo, result.failing)
        self.assertEqual(result.files[pseudo], "tests/test_broken.py")
        self.assertEqual(result.tests["test_green.Green.test_one"], "passed")

    def test_code_origins_name_every_file_a_test_runs_code_from(self):
        self.put("checks.py", "class Checks:\n    def check(self):\n        pass\n")
        self.put("tests/test_mixin.py", """\
            import unittest
            from checks import Checks

            class T(Checks, unittest.TestCase):
                def test_own(self):
                    self.check()
            """)
        result = self.suite(self.argv)
        self.assertEqual(result.tests, {"test_mixin.T.test_own": "passed"})
        self.assertEqual(sorted(result.origins["test_mixin.T.test_own"]),
                         ["checks.py", "tests/test_mixin.py"])

    def test_only_runs_one_test(self):
        self.put("tests/test_mixed.py", MIXED)
        result = self.suite(self.argv, only="test_mixed.Mixed.test_fail")
        self.assertEqual(result.tests, {"test_mixed.Mixed.test_fail": "failed"})
        self.assertIsNone(result.problem)

    def test_exit_at_import_leaves_no_result(self):
        self.put("tests/test_green.py", GREEN)
        self.put("tests/test_exit.py", "import os\nos._exit(0)\n")
        result = self.suite(self.argv)
        self.assertEqual(result.exit_code, 0)
        self.assertIn("did not finish", result.problem)
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
        self.assertIn("did not finish", result.problem)
        # what was recorded before the exit stays recorded
        self.assertEqual(result.tests, {"test_exit.Quit.test_fails": "failed"})
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
        # the driver leaves with os._exit after its last record: no atexit hook runs
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

    def test_printed_records_are_not_evidence(self):
        # the records travel over a pipe of their own; stdout is only output
        self.put("tests/test_forge.py", """\
            import unittest

            class Forged(unittest.TestCase):
                def test_fails(self):
                    print('{"e": "test", "id": "test_forge.Forged.test_fails", '
                          '"outcome": "passed"}')
                    print('{"e": "end", "ok": true, "exit": 0}')
                    self.assertEqual(1, 2)
            """)
        result = self.suite(self.argv)
        self.assertEqual(result.tests, {"test_forge.Forged.test_fails": "failed"})
        self.assertIsNone(result.problem)

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
        pseudo = "golem: the code under test replaced unittest.case.TestCase.run"
        self.assertEqual(result.tests, {"test_forge.Forged.test_fails": "passed",
                                        pseudo: "error"})
        self.assertEqual(result.pseudo, {pseudo})
        self.assertEqual(result.exit_code, 1)
        self.assertFalse(result.passed)

    def test_a_test_rebound_in_its_module_is_a_failing_pseudo_test(self):
        self.put("tests/test_forge.py", """\
            import sys
            import unittest

            class Forged(unittest.TestCase):
                def test_fails(self):
                    self.assertEqual(1, 2)

                def test_a_rebind(self):
                    Forged.test_fails = lambda self: None
            """)
        result = self.suite(self.argv)
        self.assertEqual(result.tests["test_forge.Forged.test_fails"], "passed")
        [pseudo] = result.pseudo
        self.assertTrue(pseudo.startswith("golem: the code under test replaced "), pseudo)
        self.assertIn("test_forge.Forged.test_fails", pseudo)
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


@unittest.skipUnless(HAVE_PYTEST, NO_PYTEST)
class PytestSuiteTest(SuiteCase):
    argv = [PY, "-m", "pytest", "-q"]

    def test_per_test_outcomes_from_the_record_stream(self):
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

            @pytest.mark.parametrize("n", [1, 2])
            def test_param(n):
                assert n == 1
            """)
        result = self.suite(self.argv)
        self.assertEqual(result.evidence, "pytest-json")
        self.assertEqual(result.tests, {
            "tests/test_p.py::test_pass": "passed",
            "tests/test_p.py::test_fail": "failed",
            "tests/test_p.py::test_skip": "skipped",
            "tests/test_p.py::test_xfail": "xfail",
            "tests/test_p.py::test_error": "error",
            "tests/test_p.py::test_param[1]": "passed",
            "tests/test_p.py::test_param[2]": "failed",
        })
        self.assertEqual(set(result.files.values()), {"tests/test_p.py"})
        self.assertEqual(result.pseudo, set())
        self.assertIsNone(result.problem)
        self.assertFalse(result.passed)
        self.assertEqual(result.config, {"rootdir": self.root, "inifile": None,
                                         "confcutdir": self.root})

    def test_collection_error_is_pseudo(self):
        self.put("tests/test_bad.py", "import no_such_module_anywhere\n")
        result = self.suite(self.argv)
        self.assertEqual(result.pseudo, {"tests/test_bad.py"})
        self.assertEqual(result.tests, {"tests/test_bad.py": "error"})
        self.assertEqual(result.files, {"tests/test_bad.py": "tests/test_bad.py"})
        self.assertFalse(result.passed)

    def test_green(self):
        self.put("test_ok.py", "def test_ok():\n    assert True\n")
        result = self.suite(self.argv)
        self.assertTrue(result.passed, result.output)
        self.assertEqual(result.tests, {"test_ok.py::test_ok": "passed"})

    def test_the_configuration_file_is_reported_and_pinned(self):
        self.put("setup.cfg", "[tool:pytest]\ntestpaths = checks\n")
        self.put("checks/test_c.py", "def test_c():\n    assert True\n")
        self.put("other/test_o.py", "def test_o():\n    assert False\n")
        result = self.suite(self.argv)
        self.assertEqual(result.tests, {"checks/test_c.py::test_c": "passed"})
        self.assertEqual(result.config["inifile"], os.path.join(self.root, "setup.cfg"))

    def test_only_runs_one_node_id(self):
        self.put("tests/test_k.py", "class TestK:\n    def test_a(self):\n        assert False\n"
                                    "    def test_b(self):\n        assert True\n")
        result = self.suite(self.argv + ["tests"], only="tests/test_k.py::TestK::test_b")
        self.assertEqual(result.tests, {"tests/test_k.py::TestK::test_b": "passed"})

    def test_forged_exit_zero_at_exit_never_runs(self):
        # streamed evidence, and the launcher leaves with os._exit after the last record:
        # the atexit hook cannot turn the run green (it once made JUnit XML and exit code
        # disagree; now it does not run at all)
        self.put("test_forge.py", UnittestSuiteTest.FORGE_AT_EXIT
                 + "\ndef test_fails():\n    assert 1 == 2\n")
        result = self.suite(self.argv)
        self.assertEqual(result.exit_code, 1)
        self.assertFalse(result.output.rstrip().endswith("OK"))
        self.assertEqual(result.failing, ["test_forge.py::test_fails"])
        self.assertIsNone(result.problem)
        self.assertFalse(result.passed)

    def test_replaced_pytest_machinery_during_a_test_is_a_failing_pseudo_test(self):
        self.put("tests/test_p.py", """\
            import _pytest.reports

            def test_a_patch():
                _pytest.reports.BaseReport.failed = property(lambda self: False)

            def test_fail():
                assert 1 == 2
            """)
        result = self.suite(self.argv)
        pseudo = "golem: the code under test replaced _pytest.reports.BaseReport.failed"
        self.assertEqual(result.tests[pseudo], "error")
        self.assertIn(pseudo, result.pseudo)
        self.assertFalse(result.passed)

    def test_replaced_pytest_machinery_at_import_is_a_failing_pseudo_test(self):
        # the same replacement made while the test module is imported (collection), as a
        # source module the tests import could do it
        self.put("tests/test_p.py", """\
            import _pytest.reports
            _pytest.reports.BaseReport.failed = property(lambda self: False)

            def test_fail():
                assert 1 == 2
            """)
        result = self.suite(self.argv)
        self.assertFalse(result.passed, f"{result.tests} exit {result.exit_code}")
        pseudo = "golem: the code under test replaced _pytest.reports.BaseReport.failed"
        self.assertEqual(result.tests.get(pseudo), "error", result.tests)


class BaselineTest(TempCase):
    """run_baseline refuses a baseline golem cannot grade against (a UsageError: exit 2)."""

    def setUp(self):
        super().setUp()
        home = os.path.join(self.base, "home")
        os.mkdir(home)
        self.verifier = Environment("none", command_env(home, home), Trace(), 120.0)

    def baseline(self, argv: list[str]):
        command = TestCommand(argv, parse_command(shlex.join(argv)).runner, "-test")
        baseline = run_baseline(self.verifier, command, self.root)
        self.addCleanup(baseline.phase.close)
        return baseline

    def cached_baseline(self):
        """A unittest baseline with golem's persistent bytecode cache, as `fix` runs it."""
        state = os.path.join(self.base, "state")
        os.mkdir(state)
        command = TestCommand([PY, "-m", "unittest", "discover", "-s", "tests"], "unittest",
                              "-test")
        baseline = run_baseline(self.verifier, command, self.root,
                                cache=lambda interp: cache_dir(state, interp, self.root))
        self.addCleanup(baseline.phase.close)
        return baseline

    def refused(self, argv: list[str]) -> str:
        with self.assertRaises(UsageError) as cm:
            self.baseline(argv)
        return str(cm.exception)

    def test_a_baseline_with_evidence(self):
        self.put("calc.py", "def add(a, b):\n    return a - b\n")
        self.put("tests/test_calc.py", """\
            import unittest
            from calc import add

            class AddTest(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)
            """)
        baseline = self.baseline([PY, "-m", "unittest", "discover", "-s", "tests"])
        self.assertEqual(baseline.result.failing, ["test_calc.AddTest.test_add"])
        self.assertEqual(baseline.test_files, {"tests/test_calc.py"})
        self.assertTrue(os.path.isdir(baseline.master))
        # the probe: names importable from outside the workspace, not the workspace's own
        names = baseline.plan.interpreter.names
        self.assertIn("json", names)
        self.assertIn("unittest", names)
        self.assertNotIn("calc", names)

    def test_the_suite_s_own_sources_are_never_cached(self):
        # Python checks cached bytecode against its source's modification time in whole
        # seconds and its size: an edit of the same size within the second the baseline saw
        # would otherwise run the baseline's code, in the agent's runs and in the verdict
        calc = self.put("calc.py", "def add(a, b):\n    return a - b\n")
        old = self.put("old.py", "VALUE = 1\n")
        os.utime(old, (time.time() - 3600,) * 2)
        self.put("tests/test_calc.py", """\
            import unittest
            import old
            from calc import add

            class AddTest(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)
            """)
        os.utime(os.path.join(self.root, "tests/test_calc.py"), (time.time() - 3600,) * 2)
        baseline = self.cached_baseline()
        self.assertEqual(baseline.result.failing, ["test_calc.AddTest.test_add"])
        # the suite writes no bytecode at all: only golem's warm-up fills the cache
        self.assertEqual(cached(baseline.master, self.root), [])
        self.assertTrue(cached(baseline.master, os.path.dirname(unittest.__file__)))
        # the same-size fix, stamped with the very time the baseline saw, runs as written
        before = os.stat(calc)
        self.put("calc.py", "def add(a, b):\n    return a + b\n")
        os.utime(calc, ns=(before.st_atime_ns, before.st_mtime_ns))
        result = run_suite(baseline.plan, cwd=self.root, env=self.verifier.env,
                           run=baseline.phase.run(pycache=baseline.master),
                           helpers=baseline.phase.helpers(), timeout=120)
        self.assertEqual(result.tests, {"test_calc.AddTest.test_add": "passed"})

    def test_a_baseline_that_writes_the_cache_loses_it(self):
        # unconfined (-sandbox none), the suite can reach the cache through the links of its
        # bytecode view: whatever it planted there is thrown away with the rest, never
        # loaded by a later run
        self.put("tests/test_plant.py", """\
            import os, sys, unittest

            class PlantTest(unittest.TestCase):
                def test_plant(self):
                    for name in os.listdir(sys.pycache_prefix):
                        linked = os.path.join(sys.pycache_prefix, name)
                        if os.path.islink(linked) and os.path.isdir(linked):
                            with open(os.path.join(linked, "planted.pyc"), "wb") as f:
                                f.write(b"x")
                    self.fail("the bug")
            """)
        baseline = self.cached_baseline()
        self.assertEqual(os.listdir(baseline.master), [])
        self.assertEqual(baseline.trusted_master(), baseline.master)

    def test_no_tests_is_refused(self):
        os.mkdir(os.path.join(self.root, "tests"))
        self.assertIn("gives no evidence: no tests ran",
                      self.refused([PY, "-m", "unittest", "discover", "-s", "tests"]))

    def test_a_run_cut_short_is_refused(self):
        self.put("tests/test_exit.py", "import os\nos._exit(0)\n")
        self.assertIn("gives no evidence: the run did not finish",
                      self.refused([PY, "-m", "unittest", "discover", "-s", "tests"]))

    def test_a_suite_that_replaces_the_runner_is_refused(self):
        self.put("tests/test_forge.py", """\
            import unittest
            unittest.TestCase.run = lambda self, result=None: None

            class T(unittest.TestCase):
                def test_x(self):
                    pass
            """)
        self.assertIn("changes the test runner's machinery",
                      self.refused([PY, "-m", "unittest", "discover", "-s", "tests"]))

    def test_a_command_that_cannot_start_is_refused(self):
        self.assertIn("cannot start", self.refused([os.path.join(self.base, "nope"), "x"]))


def cached(cache: str, root: str) -> list[str]:
    """The bytecode files a cache holds for the sources under `root`."""
    mirror = os.path.join(cache, root.lstrip(os.sep))
    return [os.path.join(top, name) for top, _, names in os.walk(mirror) for name in names
            if name.endswith(".pyc")]


def suffixes() -> tuple[str, ...]:
    return tuple(importlib.machinery.all_suffixes())


class ProtectTest(unittest.TestCase):
    def test_files_named_by_test_literals_are_test_data(self):
        sources = {
            "tests/test_a.py": b'HERE = pathlib.Path(__file__).parent\n'
                               b'EXPECTED = (HERE / "data" / "expected.txt").read_text()\n',
            "tests/test_b.py": b'import unittest\nclass B(unittest.TestCase):\n'
                               b'    def test_b(self):\n        open(f"{ROOT}/fixtures/b.json")\n',
            "tests/test_c.py": b'SPACED = "my data.csv"\n',
            "tests/test_d.py": b'import calc\nNOTHING = "names no file"\n',
            # literals over more than one line: implicit concatenation, a backslash inside
            "tests/test_e.py": b'P = ("data/"\n     "joined.txt")\n',
            "tests/test_g.py": b'Q = "more/\\\nslash.txt\\\n"\n',
            # a name in a comment alone
            "tests/test_f.py": b'# notes/commented.txt is made by hand\n',
        }
        data = {"tests/data/expected.txt", "fixtures/b.json", "tests/my data.csv",
                "other/expected.txt", "notes/unnamed.txt", "tests/data/joined.txt",
                "more/slash.txt", "notes/commented.txt"}
        many = {f"pad/unnamed{i}.txt" for i in range(70)}     # names looked for as words
        for extra in (set(), {"odd name+1.txt"}, many, many | {"odd name+1.txt"}):
            with self.subTest(extra=extra):
                facts = Facts(test_argv=UNITTEST, test_files=set(sources),
                              before=set(sources) | data | extra | {"calc.py"})
                facts.named_by_tests(sources.get)
                self.assertEqual(facts.named_data, {"tests/data/expected.txt": "tests/test_a.py",
                                                    "fixtures/b.json": "tests/test_b.py",
                                                    "tests/my data.csv": "tests/test_c.py",
                                                    "tests/data/joined.txt": "tests/test_e.py",
                                                    "more/slash.txt": "tests/test_g.py"})

    def test_protected_kinds(self):
        make = Facts(test_argv=["make", "test"])
        collected = Facts(test_argv=UNITTEST, test_files={"tests/checks.py"})
        lib_root = Facts(test_argv=UNITTEST, import_roots={"", "lib"})
        probed = Facts(test_argv=UNITTEST, outside_names=frozenset({"requests", "json"}),
                       suffixes=suffixes())
        provided = Facts(test_argv=UNITTEST, import_roots={"", "src"},
                         before={"src/calc.py", "tests/test_calc.py"})
        cases = [
            ("tests/test_calc.py", "modified", UNITTEST_FACTS, "an existing test file, modified"),
            ("tests/test_calc.py", "removed", UNITTEST_FACTS, "an existing test file, deleted"),
            ("test_top.py", "modified", UNITTEST_FACTS, "an existing test file"),
            # what the baseline collected tests from is a test file, whatever its name
            ("tests/checks.py", "modified", collected, "the baseline collected tests from"),
            ("tests/checks.py", "removed", collected, "and the run deleted it"),
            ("tests/data/expected.json", "modified", UNITTEST_FACTS, "not code, in a test dir"),
            ("tests/data/new.json", "added", UNITTEST_FACTS, "not code, in a test directory"),
            ("fixtures/golden.txt", "modified", UNITTEST_FACTS, "under a test-data directory"),
            ("conftest.py", "added", UNITTEST_FACTS, "conftest.py"),
            ("src/deep/conftest.py", "added", UNITTEST_FACTS, "conftest.py"),
            ("src/conftest.py", "modified", UNITTEST_FACTS, "conftest.py"),
            ("sitecustomize.py", "added", UNITTEST_FACTS, "start-up hook"),
            ("lib/usercustomize.py", "added", UNITTEST_FACTS, "start-up hook"),
            ("foo.pth", "added", UNITTEST_FACTS, "start-up hook"),
            ("unittest.py", "added", UNITTEST_FACTS, "creates module 'unittest'"),
            ("pytest.py", "added", UNITTEST_FACTS, "creates module 'pytest'"),
            ("json/__init__.py", "added", UNITTEST_FACTS, "creates module 'json'"),
            ("json.pyc", "added", UNITTEST_FACTS, "creates module 'json'"),
            # shadowing follows where the tests import from
            ("lib/unittest.py", "added", lib_root, "a new 'unittest.py' at lib/"),
            ("lib/pytest.py", "added", lib_root, "creates module 'pytest'"),
            # ... and what the test interpreter imports from outside, with its suffixes
            ("requests.py", "added", probed, "creates module 'requests'"),
            ("json.cpython-311-x86_64-linux-gnu.so", "added", probed, "creates module 'json'"),
            ("json.abi3.so", "added", probed, "creates module 'json'"),
            # compiled code that shadows nothing is still code golem cannot judge
            ("json.cpython-311-x86_64-linux-gnu.so", "added", UNITTEST_FACTS,
             "compiled extension"),
            ("pkg/__pycache__/mod.cpython-311.pyc", "added", UNITTEST_FACTS,
             "compiled bytecode"),
            # ... and a name the workspace provides elsewhere on sys.path
            ("calc.py", "added", provided, "which the workspace provides at src/"),
            ("pyproject.toml", "modified", UNITTEST_FACTS, "configuration"),
            ("docs/pyproject.toml", "modified", UNITTEST_FACTS, "configuration"),
            ("setup.cfg", "added", UNITTEST_FACTS, "configuration"),
            ("tox.ini", "modified", UNITTEST_FACTS, "configuration"),
            ("pytest.ini", "removed", UNITTEST_FACTS, "configuration"),
            ("tests/pytest.ini", "added", UNITTEST_FACTS, "configuration"),
            ("jest.config.js", "modified", UNITTEST_FACTS, "configuration"),
            (".python-version", "added", UNITTEST_FACTS, "toolchain pin"),
            ("helper.egg-info/entry_points.txt", "added", UNITTEST_FACTS, "package metadata"),
            ("Makefile", "modified", make, "used by the test command"),
            ("tests/__init__.py", "added", UNITTEST_FACTS, "__init__.py"),
        ]
        for rel, kind, facts, fragment in cases:
            with self.subTest(rel=rel, kind=kind):
                why = reason(rel, kind, facts)
                self.assertIsNotNone(why)
                self.assertIn(fragment, why)

    def test_allowed_kinds(self):
        provided_here = Facts(test_argv=UNITTEST, before={"calc.py"})
        cases = [
            ("tests/test_new.py", "added", UNITTEST_FACTS),
            ("calc/core.py", "modified", UNITTEST_FACTS),
            ("calc/core.py", "added", UNITTEST_FACTS),
            ("calc/old.py", "removed", UNITTEST_FACTS),
            ("README.md", "modified", UNITTEST_FACTS),
            ("Makefile", "modified", UNITTEST_FACTS),    # the test command does not use make
            ("calc/__init__.py", "added", UNITTEST_FACTS),
            # below a directory that is not on sys.path, a stdlib name shadows nothing
            ("pkg/unittest.py", "added", UNITTEST_FACTS),
            ("pkg/json/__init__.py", "added", UNITTEST_FACTS),
            ("calc.py", "modified", provided_here),
            ("calc_helpers.py", "added", provided_here),
        ]
        for rel, kind, facts in cases:
            with self.subTest(rel=rel, kind=kind):
                self.assertIsNone(reason(rel, kind, facts))

    def test_protected_changes_and_new_tests(self):
        changes = Changes(added=["tests/test_new.py", "conftest.py", "tests/helper_new.py",
                                 "tests/data.json"],
                          modified=["calc/core.py", "tests/test_old.py"], removed=[])
        facts = Facts(test_argv=["python3", "-m", "pytest"],
                      trees_changed={".venv": "added .venv/lib/x.pth"})
        found = protected_changes(changes, facts)
        self.assertEqual([p for p, _ in found],
                         [".venv", "conftest.py", "tests/data.json", "tests/test_old.py"])
        self.assertIn("dependency tree changed during the run (added .venv/lib/x.pth)",
                      dict(found)[".venv"])
        # new code in a test directory is a new test; data there is not
        self.assertEqual(new_tests(changes), ["tests/helper_new.py", "tests/test_new.py"])
        # a file beside the ones the baseline collected counts as a new test too
        beside = Changes(["checks/more.py", "calc/new.py"], [], [])
        self.assertEqual(new_tests(beside, Facts(test_files={"checks/first.py"})),
                         ["checks/more.py"])
        self.assertEqual(new_tests(beside), [])

    def test_import_roots(self):
        paths = {"src/calc.py", "pkg/__init__.py", "pkg/tests/__init__.py",
                 "pkg/tests/test_a.py", "loose/test_b.py"}
        self.assertEqual(import_roots({"pkg/tests/test_a.py", "loose/test_b.py"}, paths),
                         {"", "src", "loose"})
        self.assertEqual(import_roots(set(), {"calc.py"}, {"extra"}), {"", "extra"})

    def test_the_probe_reports_names_from_outside_the_workspace(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.realpath(tmp)
            with open(os.path.join(root, "calc.py"), "w") as fh:
                fh.write("X = 1\n")
            env = command_env(root, root)
            interp = probe(locate(PY, env, root), root, [], env)
        self.assertIn("json", interp.names)
        self.assertNotIn("calc", interp.names)
        self.assertEqual(set(interp.suffixes), set(suffixes()))
        if HAVE_PYTEST:
            self.assertIn("pytest", interp.names)


def result(tests: dict[str, str] | None, exit_code: int = 0, pseudo=(),
           problem: str | None = None, files=None, origins=None) -> SuiteResult:
    return SuiteResult(exit_code, False, "", 0.1,
                       "exit-code" if tests is None else "unittest-json", tests,
                       set(pseudo), dict(files or {}), dict(origins or {}), problem=problem)


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
        # it did not fail before: newly failing, never "still" failing
        self.assertEqual((verdict.still_failing, verdict.newly_failing), ([], ["t.new"]))

    def test_an_import_failure_is_fixed_only_when_its_file_passes_whole(self):
        # the module failed to import: it is tracked by its file, not by the pseudo id
        before = result({"t.a": "failed", "loader.test_x": "error"}, 1,
                        pseudo={"loader.test_x"},
                        files={"t.a": "tests/t.py", "loader.test_x": "tests/test_x.py"})
        files = {"t.a": "tests/t.py", "x.T.test_1": "tests/test_x.py",
                 "x.T.test_2": "tests/test_x.py"}
        fixed = judge(before, result({"t.a": "passed", "x.T.test_1": "passed",
                                      "x.T.test_2": "passed"}, files=files), [])
        self.assertEqual(fixed.name, "VERIFIED", fixed.summary)
        self.assertEqual(fixed.fixed, ["loader.test_x", "t.a"])
        # its tests still not collected: not fixed
        verdict = judge(before, result({"t.a": "passed"}, files=files), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.still_failing, ["loader.test_x"])
        # collected, but one of them skipped: not fixed either
        verdict = judge(before, result({"t.a": "passed", "x.T.test_1": "passed",
                                        "x.T.test_2": "skipped"}, files=files), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.still_failing, ["loader.test_x"])
        # a pseudo test golem cannot place in a file is never fixed
        before.files.pop("loader.test_x")
        verdict = judge(before, result({"t.a": "passed", "x.T.test_1": "passed",
                                        "x.T.test_2": "passed"}, files=files), [])
        self.assertEqual(verdict.still_failing, ["loader.test_x"])

    def test_a_test_whose_code_now_comes_from_a_changed_file_is_failing(self):
        before = result({"t.T.a": "failed", "t.T.b": "passed"}, 1)
        files = {"t.T.a": "tests/t.py", "t.T.b": "tests/t.py"}
        origins = {"t.T.a": ["tests/t.py", "checks.py"], "t.T.b": ["tests/t.py"]}
        after = result({"t.T.a": "passed", "t.T.b": "passed"}, files=files, origins=origins)
        self.assertEqual(judge(before, after, []).name, "VERIFIED")
        self.assertEqual(tampered(after, {"checks.py"}), {"t.T.a": "checks.py"})
        # the test's own file changing is not tampering (it would be protected anyway)
        self.assertEqual(tampered(after, {"tests/t.py"}), {})
        verdict = judge(before, after, [], {"checks.py", "calc.py"})
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.still_failing, ["t.T.a"])
        self.assertEqual(verdict.fixed, [])
        self.assertIn("1 test(s) ran code from checks.py, which the run changed", verdict.summary)

    def test_the_guard_pseudo_test_is_never_fixed(self):
        guard = "golem: the code under test replaced unittest.case.TestCase.run"
        before = result({"t.a": "passed", guard: "error"}, 1, pseudo={guard})
        verdict = judge(before, result({"t.a": "passed"}), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.fixed, [])
        self.assertIn(guard, verdict.still_failing + verdict.missing)

    def test_untrustworthy_evidence_fails(self):
        after = result({"t.a": "passed", "t.b": "passed", "t.c": "passed"}, 0,
                       problem="the run did not finish (no last record)")
        verdict = judge(result(self.before, 1), after, [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertIn("the run did not finish", verdict.summary)

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

    def test_the_new_tests_pass(self):
        files = {"t.a": "tests/t.py", "n.b": "tests/test_n.py", "n.c": "tests/test_n.py"}
        second = result({"t.a": "passed", "n.b": "passed", "n.c": "passed"}, files=files)
        self.assertEqual(judge_new_tests(second, {"tests/test_n.py"}),
                         ({"n.b": "passed", "n.c": "passed"}, None))
        second.tests["n.c"] = "failed"
        outcomes, problem = judge_new_tests(second, {"tests/test_n.py"})
        self.assertEqual(problem, "1 new test(s) fail: n.c")
        second.tests["n.c"] = "passed"
        second.problem = "the run did not finish (no last record)"
        self.assertIn("did not finish", judge_new_tests(second, {"tests/test_n.py"})[1])


class SnapshotTest(TempCase):
    def test_compare(self):
        self.put("same.txt", "same")
        self.put("edit.txt", "old")
        mode = self.put("mode.sh", "#!/bin/sh\n")
        self.put("gone.txt", "bye")
        os.symlink("same.txt", os.path.join(self.root, "link"))
        self.put("__pycache__/x.pyc", b"\0")
        self.put(".git/HEAD", "ref")
        before = fingerprint(self.root).entries
        self.assertNotIn("__pycache__/x.pyc", before)
        self.assertNotIn(".git/HEAD", before)
        self.put("edit.txt", "new")
        os.chmod(mode, 0o755)
        os.unlink(os.path.join(self.root, "gone.txt"))
        self.put("sub/added.txt", "hi")
        os.unlink(os.path.join(self.root, "link"))
        os.symlink("edit.txt", os.path.join(self.root, "link"))
        self.put("__pycache__/x.pyc", b"\1")
        changes = compare(before, fingerprint(self.root).entries)
        self.assertEqual(changes.added, ["sub/added.txt"])
        self.assertEqual(changes.modified, ["edit.txt", "link", "mode.sh"])
        self.assertEqual(changes.removed, ["gone.txt"])
        self.assertEqual(changes.all, ["edit.txt", "gone.txt", "link", "mode.sh",
                                       "sub/added.txt"])
        self.assertEqual(compare(before, before).all, [])
        self.assertEqual(changes.without({"edit.txt", "gone.txt"}).all,
                         ["link", "mode.sh", "sub/added.txt"])

    def test_what_is_left_out(self):
        # caches and version control at any depth; dependency trees only at the top, and
        # only those given (`deps`); below the top, venv and node_modules are content
        for rel in ("a/__pycache__/m.pyc", "a/.pytest_cache/v", "a/.mypy_cache/x",
                    "a/.hypothesis/db", "vendor/.git/HEAD", "b/.hg/store", "c/.svn/entries",
                    ".venv/lib/dep.py", "node_modules/dep/index.js", "env/pyvenv.cfg",
                    "web/node_modules/left-pad/index.js", "tools/venv/lib/x.py", "keep.py"):
            self.put(rel, "x")
        os.mkfifo(os.path.join(self.root, "fifo"))
        deps = dependency_trees(self.root)
        self.assertEqual(deps, [".venv", "env", "node_modules"])
        found = fingerprint(self.root, deps=deps)
        self.assertEqual(sorted(found.entries), ["keep.py", "tools/venv/lib/x.py",
                                                 "web/node_modules/left-pad/index.js"])
        self.assertNotIn(".venv", found.dirs)
        self.assertIn("web/node_modules", found.dirs)
        self.assertIn("a", found.dirs)
        self.assertNotIn("a/__pycache__", found.dirs)
        # without `deps`, a top-level dependency tree is walked like anything else
        self.assertIn(".venv/lib/dep.py", fingerprint(self.root).entries)

    def test_a_link_is_never_a_dependency_tree(self):
        outside = os.path.join(self.base, "outside")
        os.makedirs(outside)
        os.symlink(outside, os.path.join(self.root, "node_modules"))
        self.put("venv", "a file, not a directory")
        self.assertEqual(dependency_trees(self.root), [])
        entries = fingerprint(self.root).entries
        self.assertTrue(entries["node_modules"].is_link)
        self.assertEqual(entries["node_modules"].link_target, outside)

    def test_a_large_file_is_fingerprinted_by_its_metadata(self):
        big = self.put("big.bin", b"\0" * (MAX_COPY + 1))
        snap = Snapshot.take(self.root, os.path.join(self.base, "run"))
        entry = snap.entries["big.bin"]
        self.assertTrue(entry.sha.startswith("large:"))
        self.assertFalse(entry.stored)
        self.assertIsNone(snap.original("big.bin"))
        with open(big, "r+b") as fh:
            fh.write(b"\1")
        self.assertEqual(compare(snap.entries, fingerprint(self.root).entries).modified,
                         ["big.bin"])

    def test_take_and_load(self):
        self.put("a.txt", "alpha")
        self.put("b/c.txt", "alpha")
        self.put(".venv/pyvenv.cfg", "home = /usr\n")
        snap = Snapshot.take(self.root, os.path.join(self.base, "run"))
        self.put("a.txt", "changed")
        loaded = Snapshot.load(os.path.join(self.base, "run"))
        self.assertEqual(loaded.entries, snap.entries)
        self.assertEqual(loaded.dirs, {"b"})
        self.assertEqual(loaded.deps, [".venv"])
        info = os.stat(self.root)
        self.assertEqual(loaded.root_id, (info.st_dev, info.st_ino))
        self.assertEqual(loaded.original("a.txt"), b"alpha")
        self.assertEqual(loaded.original("a.txt", limit=2), b"al")
        self.assertIsNone(loaded.original("nope.txt"))
        # one copy per distinct content
        self.assertEqual(len(os.listdir(os.path.join(self.base, "run", "store"))), 1)
        self.assertIn(".venv/pyvenv.cfg", snap.manifest)


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

    def run_that_changes_things(self, record: bool = True) -> str:
        run_id, path = runs.new_run(self.root)
        snap = Snapshot.take(self.root, path)
        runs.record_root(path, snap.root_id)
        self.put("edit.txt", "changed by the run\n")
        shutil.rmtree(os.path.join(self.root, "dir"))
        self.put("new/created.txt", "created by the run\n")
        os.chmod(os.path.join(self.root, "tool.sh"), 0o644)
        after = fingerprint(self.root).entries
        changes = compare(snap.entries, after)
        self.assertEqual(changes.all, ["dir/gone.txt", "edit.txt", "new/created.txt",
                                       "tool.sh"])
        if record:
            runs.finish_run(path, changes, after)
        runs.release_all()      # the run's command has ended (killed, where not recorded)
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
        self.assertFalse(os.path.exists(os.path.join(self.root, "new")))
        self.assertEqual(os.stat(os.path.join(self.root, "tool.sh")).st_mode & 0o777, 0o755)
        with self.assertRaises(UsageError):
            runs.undo(path)
        with self.assertRaises(UsageError):
            runs.find_run(self.root, None)

    def test_a_run_that_never_recorded_its_changes(self):
        # killed before finish_run: undo compares the workspace with the snapshot itself
        path = self.run_that_changes_things(record=False)
        restored, skipped = runs.undo(path)
        self.assertEqual(restored, ["dir/gone.txt", "edit.txt", "new/created.txt", "tool.sh"])
        self.assertEqual(self.read("edit.txt"), b"original\n")
        self.assertFalse(os.path.exists(os.path.join(self.root, "new")))

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

    def test_a_directory_swapped_for_a_link_is_refused_and_nothing_is_written_outside(self):
        path = self.run_that_changes_things()
        outside = os.path.join(self.base, "outside")
        os.mkdir(outside)
        os.symlink(outside, os.path.join(self.root, "dir"))
        with self.assertRaises(UsageError) as cm:
            runs.undo(path)
        message = str(cm.exception)
        self.assertIn("dir/gone.txt", message)
        self.assertIn("nothing written outside", message)
        self.assertEqual(os.listdir(outside), [])
        # the rest was put back; the run stays open for the refused path
        self.assertEqual(self.read("edit.txt"), b"original\n")
        self.assertEqual(runs.find_run(self.root, None), path)

    def test_a_workspace_that_was_replaced_is_refused_whole(self):
        path = self.run_that_changes_things()
        os.rename(self.root, self.root + "-moved")
        os.mkdir(self.root)
        with self.assertRaises(UsageError) as cm:
            runs.undo(path)
        self.assertIn("no longer the directory the run worked in", str(cm.exception))
        self.assertEqual(os.listdir(self.root), [])

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
        changes = compare(snap.entries, fingerprint(self.root).entries)
        patch = make_patch(self.root, snap, changes.all)
        applied = self.git("apply", "-v", "-", cwd=copy,
                           data=patch.encode("utf-8", "surrogateescape"))
        self.assertEqual(applied.returncode, 0, applied.stderr.decode() + "\n" + patch)
        return patch, copy

    def tree(self, root: str) -> dict[str, tuple]:
        """path -> (content or link target, executable bit), as git keeps them."""
        out = {}
        for rel, entry in sorted(fingerprint(root).entries.items()):
            full = os.path.join(root, rel)
            if entry.is_link:
                out[rel] = ("link", os.readlink(full))
                continue
            with open(full, "rb") as fh:
                out[rel] = (fh.read(), bool(entry.mode & 0o111))
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

        _, copy = self.apply({"ff.py": b"a = 1\n\x0c\nb = 2\n",
                              "cr.txt": b"progress\r50%\ndone\n"}, change)
        self.assertEqual(self.tree(copy), self.tree(self.root))

    def test_binary_change(self):
        def change():
            self.put("data.bin", b"\x00\x01\x03")
            self.put("a.txt", b"after\n")

        _, copy = self.apply({"data.bin": b"\x00\x01\x02", "a.txt": b"before\n"}, change)
        self.assertEqual(self.tree(copy), self.tree(self.root))

    def test_names_git_quotes(self):
        names = ["with space.txt", "tab\there.txt", 'quote".txt', "back\\slash.txt",
                 "caf\u00e9.txt", "new\nline.txt"]

        def change():
            for name in names:
                self.put(name, f"new {name!r}\n")
            self.put("plain.txt", b"changed\n")

        patch, copy = self.apply({"plain.txt": b"old\n", "with space.txt": b"old\n"}, change)
        self.assertIn('"b/caf\\303\\251.txt"', patch)
        self.assertIn('"b/new\\nline.txt"', patch)
        self.assertIn("+++ b/with space.txt\t\n", patch)
        # exactly these names, nothing smuggled in by a name with a newline
        self.assertEqual(self.tree(copy), self.tree(self.root))
        self.assertEqual(sorted(os.listdir(copy)), sorted([".git", "plain.txt", *names]))

    def test_modes_and_links(self):
        def change():
            os.chmod(os.path.join(self.root, "run.sh"), 0o755)
            os.chmod(os.path.join(self.root, "tool.sh"), 0o644)
            self.put("both.sh", b"#!/bin/sh\necho new\n")
            os.chmod(os.path.join(self.root, "both.sh"), 0o755)
            os.symlink("run.sh", os.path.join(self.root, "new-link"))
            os.unlink(os.path.join(self.root, "old-link"))
            os.symlink("tool.sh", os.path.join(self.root, "old-link"))
            os.unlink(os.path.join(self.root, "gone-link"))

        for rel in ("run.sh", "tool.sh", "both.sh"):
            self.put(rel, b"#!/bin/sh\n")
        os.chmod(os.path.join(self.root, "tool.sh"), 0o755)
        os.symlink("run.sh", os.path.join(self.root, "old-link"))
        os.symlink("missing", os.path.join(self.root, "gone-link"))
        patch, copy = self.apply({}, change)
        self.assertIn("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n", patch)
        self.assertIn("new file mode 120000", patch)
        self.assertIn("deleted file mode 120000", patch)
        self.assertEqual(self.tree(copy), self.tree(self.root))

    def test_diffstat_from_file_diffs(self):
        self.put("a.txt", b"one\ntwo\nthree\n")
        self.put("gone.txt", b"x\ny\n")
        snap = Snapshot.take(self.root, os.path.join(self.base, "run"))
        self.put("a.txt", b"one\n2\nthree\nfour\n")
        os.unlink(os.path.join(self.root, "gone.txt"))
        self.put("new.txt", b"n\n")
        diffs = file_diffs(self.root, snap, ["new.txt", "gone.txt", "a.txt", "same.txt"])
        self.assertEqual(list(diffs), ["a.txt", "gone.txt", "new.txt"])
        self.assertEqual(diffstat(diffs), {"a.txt": [2, 1], "gone.txt": [0, 2],
                                           "new.txt": [1, 0]})
        self.assertEqual("".join(diffs.values()),
                         make_patch(self.root, snap, ["a.txt", "gone.txt", "new.txt"]))


class TamperingTest(SuiteCase):
    """Changes the verifier cannot see must not let a failing suite be VERIFIED."""

    def facts(self, argv: list[str], before: SuiteResult, entries) -> Facts:
        test_files = {f for f in before.files.values() if f}
        return Facts(test_argv=argv, test_files=test_files, before=set(entries),
                     import_roots=import_roots(test_files, set(entries)))

    def grade(self, argv: list[str], before: SuiteResult, entries, after: SuiteResult):
        changes = compare(entries, fingerprint(self.root).entries)
        protected = protected_changes(changes, self.facts(argv, before, entries))
        return judge(before, after, protected, set(changes.added) | set(changes.modified))

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
        entries = fingerprint(self.root).entries

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
        self.assertEqual(after.failing, ["test_a.T.test_x"])
        verdict = self.grade(argv, before, entries, after)
        self.assertNotEqual(verdict.name, "VERIFIED", verdict.summary)

    def test_a_changed_mixin_that_makes_the_test_pass_is_not_a_fix(self):
        self.put("checks.py", "class Checks:\n    def check_sum(self, got, want):\n"
                              "        self.assertEqual(got, want)\n")
        self.put("tests/test_a.py", """\
            import unittest
            from checks import Checks


            class T(Checks, unittest.TestCase):
                def test_x(self):
                    self.check_sum(1 + 1, 3)
            """)
        argv = [PY, "-m", "unittest", "discover", "-s", "tests"]
        before = self.suite(argv)
        self.assertEqual(before.failing, ["test_a.T.test_x"])
        entries = fingerprint(self.root).entries
        # checks.py is not a test file by name or by what the baseline collected
        self.put("checks.py", "class Checks:\n    def check_sum(self, got, want):\n"
                              "        pass\n")
        after = self.suite(argv)
        self.assertTrue(after.passed, after.output)
        verdict = self.grade(argv, before, entries, after)
        self.assertEqual(verdict.name, "FAILED", verdict.summary)
        self.assertIn("ran code from checks.py", verdict.summary)

    def test_source_that_replaces_unittest_at_import_is_not_a_fix(self):
        self.put("calc.py", "def add(a, b):\n    return a - b\n")
        self.put("tests/test_a.py", """\
            import unittest
            from calc import add


            class T(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)
            """)
        argv = [PY, "-m", "unittest", "discover", "-s", "tests"]
        before = self.suite(argv)
        entries = fingerprint(self.root).entries
        self.put("calc.py", """\
            import unittest

            unittest.TestCase.assertEqual = lambda self, *args, **kwargs: None


            def add(a, b):
                return a - b
            """)
        after = self.suite(argv)
        self.assertEqual(after.tests["test_a.T.test_add"], "passed")
        verdict = self.grade(argv, before, entries, after)
        self.assertEqual(verdict.name, "FAILED", verdict.summary)
        self.assertIn("golem: the code under test replaced unittest.case.TestCase.assertEqual",
                      verdict.newly_failing)

    @unittest.skipUnless(HAVE_PYTEST, NO_PYTEST)
    def test_source_that_replaces_pytest_at_import_is_not_a_fix(self):
        self.put("calc.py", "def add(a, b):\n    return a - b\n")
        self.put("tests/test_a.py", "from calc import add\n\n\ndef test_add():\n"
                                    "    assert add(2, 3) == 5\n")
        argv = [PY, "-m", "pytest", "-q"]
        before = self.suite(argv)
        self.assertEqual(before.failing, ["tests/test_a.py::test_add"])
        entries = fingerprint(self.root).entries
        self.put("calc.py", """\
            import _pytest.reports

            _pytest.reports.BaseReport.failed = property(lambda self: False)


            def add(a, b):
                return a - b
            """)
        after = self.suite(argv)
        verdict = self.grade(argv, before, entries, after)
        self.assertNotEqual(verdict.name, "VERIFIED",
                            f"{verdict.summary}; {after.tests}; exit {after.exit_code}")

    @unittest.skipUnless(HAVE_PYTEST, NO_PYTEST)
    def test_plugin_registered_through_new_package_metadata(self):
        self.put("test_a.py", "def test_x():\n    assert 1 == 2\n")
        argv = [PY, "-m", "pytest", "-q"]
        before = self.suite(argv)
        self.assertEqual(before.failing, ["test_a.py::test_x"])
        entries = fingerprint(self.root).entries
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
        verdict = self.grade(argv, before, entries, after)
        self.assertEqual(verdict.name, "REJECTED", verdict.summary)
        self.assertIn("package metadata", verdict.summary)


if __name__ == "__main__":
    unittest.main()
