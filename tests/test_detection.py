"""Test command detection on projects as users have them (git checkouts, a `.venv` inside,
active or not, flat and src/ layouts): the command each runner proposes, which proposal wins,
what the error says when none does, and that the detected command's baseline runs."""

from __future__ import annotations

import json
import os
import shutil
import unittest

from golem.core.errors import UsageError
from golem.tools.process import command_env
from golem.workflow.verifier.interpreter import activate
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.suite import detect, plan_for, run_suite
from tests import devenv, layouts
from tests.fixtures import CALC_TESTS, GolemCase, last_json, run_cli, write_files

DISCOVER = ["python3", "-m", "unittest", "discover"]
PYTEST = ["python3", "-m", "pytest"]
PYTEST_DISTS = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")
PACKAGE = {"calc/__init__.py": devenv.INIT, "calc/core.py": devenv.BUGGY_CORE}
TOX = "[tox]\nenvlist = py311\n\n[testenv]\ndeps = pytest\ncommands = pytest {posargs}\n"
NOX = ('import nox\n\n\n@nox.session\ndef tests(session):\n    session.install("pytest")\n'
       '    session.run("pytest", *session.posargs)\n')
CARGO = "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"
CRATE = {"Cargo.toml": CARGO, ".gitignore": "target/\n",
         "src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 { a - b }\n",
         "tests/api.rs": "#[test]\nfn adds() { assert_eq!(adder::add(2, 3), 5); }\n"
                         "#[test]\nfn zero() { assert_eq!(adder::add(0, 0), 0); }\n"}
CARGO_MISSING = "cargo is not installed: the Rust crate's baseline needs cargo on PATH"
NODE_MISSING = "node is not installed: the Node project's baseline needs node on PATH"


class DetectCase(GolemCase):
    def build(self, files: dict[str, str], layout: str = "git+venv", name: str = "repo",
              pytest: bool = False) -> str:
        """The project `files` in `layout`; with `pytest`, pytest installed in its `.venv`."""
        root = layouts.build(layout, self.tmp, files, name)
        if pytest:
            layouts.install(os.path.join(root, ".venv"), *PYTEST_DISTS)
        return root

    def detect(self, root: str, active: bool = False):
        """What golem detects in `root`, from a shell with no environment active, or with
        the workspace's `.venv` activated."""
        saved = dict(os.environ)
        try:
            os.environ.pop("VIRTUAL_ENV", None)
            os.environ.pop("CONDA_PREFIX", None)
            if active:
                os.environ.update(activate(dict(os.environ), os.path.join(root, ".venv")))
            return detect(root)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def baseline(self, root: str, command, venv: bool = True):
        """The detected command run once as golem runs a baseline (the `.venv` activated)."""
        home = os.path.join(self.tmp, "home")
        os.makedirs(home, exist_ok=True)
        env = command_env(home, home)
        if venv:
            env = activate(env, os.path.join(root, ".venv"))
        plan = plan_for(command, env, root)
        with Phase("test") as phase:
            return run_suite(plan, cwd=root, env=env, run=phase.run(), helpers=phase.helpers(),
                             timeout=300)

    def verify(self, root: str, active: bool = False, sandbox: str = "none") -> dict:
        """`golem verify -base HEAD` with no -test: the detected command judges the change."""
        venv = os.path.join(root, ".venv")
        path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                               if not p.startswith(venv))
        env = {"VIRTUAL_ENV": venv if active else None, "CONDA_PREFIX": None,
               "PATH": os.path.join(venv, "bin") + os.pathsep + path if active else path}
        code, out, err = run_cli(["verify", "-dir", root, "-base", "HEAD", "-sandbox", sandbox,
                                  "-json"], env)
        self.assertTrue(out.strip(), err)
        return {**last_json(out), "stderr": err}


class PackageTestsTest(DetectCase):
    """A unittest suite inside the package, with no configuration anywhere."""

    def test_flat_package_with_a_tests_package(self):
        root = self.build({**PACKAGE, "calc/tests/__init__.py": "",
                           "calc/tests/test_calc.py": devenv.TESTS})
        for active in (False, True):
            with self.subTest(active=active):
                command = self.detect(root, active)
                self.assertEqual((command.argv, command.runner),
                                 ([*DISCOVER, "-s", "calc/tests", "-t", "."], "unittest"))
                self.assertEqual(command.origin, "detected: calc/tests/ inside a package")
        result = self.baseline(root, command)
        self.assertEqual(result.tests, {"calc.tests.test_calc.CalcTest.test_add": "failed",
                                        "calc.tests.test_calc.CalcTest.test_mul": "failed",
                                        "calc.tests.test_calc.CalcTest.test_zero": "passed"},
                         result.output)

    def test_a_test_directory_that_is_no_package_is_discovered_from_itself(self):
        root = self.build({**PACKAGE, "calc/test/test_calc.py": devenv.TESTS})
        command = self.detect(root)
        self.assertEqual(command.argv, [*DISCOVER, "-s", "calc/test"])
        self.assertEqual(len(self.baseline(root, command).failing), 2)

    def test_src_layout_editable_install_verified(self):
        for layout in ("src-pth", "flat"):
            project = devenv.make(self.tmp, layout, name=f"p-{layout}",
                                  tests="{package}/tests/test_calc.py",
                                  extra={f"{'src/' if layout != 'flat' else ''}calc/tests/"
                                         "__init__.py": ""})
            write_files(project.root, {project.core: devenv.FIXED_CORE})
            top = "src" if layout != "flat" else "."
            for active in (False, True):
                with self.subTest(layout=layout, active=active):
                    command = self.detect(project.root, active)
                    self.assertEqual(command.argv, [*DISCOVER, "-s", f"{project.package}/tests",
                                                    "-t", top])
                    report = self.verify(project.root, active)
                    self.assertEqual(report["verdict"], "VERIFIED", report["stderr"])
                    self.assertEqual(report["tests"]["before"]["counts"],
                                     {"failed": 2, "passed": 1})
                    self.assertIn("inside a package", report["stderr"])

    def test_several_packages_are_discovered_from_their_parent(self):
        root = self.build({**PACKAGE, "calc/tests/__init__.py": "",
                           "calc/tests/test_calc.py": devenv.TESTS,
                           "extra/__init__.py": "", "extra/tests/__init__.py": "",
                           "extra/tests/test_extra.py": CALC_TESTS.replace(
                               "from calc import add", "from calc.core import add")})
        command = self.detect(root)
        self.assertEqual(command.argv, [*DISCOVER, "-s", ".", "-t", "."])
        self.assertEqual(len(self.baseline(root, command).tests), 5)

    def test_tests_written_for_pytest_inside_the_package_are_pytests(self):
        root = self.build({**PACKAGE, "calc/tests/__init__.py": "",
                           "calc/tests/test_calc.py": "from calc import add\n\n\n"
                                                      "def test_add():\n"
                                                      "    assert add(2, 3) == 5\n"})
        command = self.detect(root)
        self.assertEqual((command.argv, command.runner), (PYTEST, "pytest"))
        self.assertIn("calc/tests/test_calc.py has module-level test functions", command.origin)

    def test_a_test_suite_function_is_unittest_s_idiom_not_a_pytest(self):
        # `def test_suite():` builds a TestSuite for `load_tests` or setuptools; pytest would
        # call it as a test that passes, and run none of the tests it builds
        module = devenv.TESTS + ("\n\ndef test_suite():\n    return unittest.TestLoader()"
                                 ".loadTestsFromTestCase(CalcTest)\n\n\n"
                                 "def load_tests(loader, tests, pattern):\n"
                                 "    return test_suite()\n")
        root = self.build({**PACKAGE, "calc/tests/__init__.py": "",
                           "calc/tests/test_calc.py": module})
        command = self.detect(root)
        self.assertEqual(command.runner, "unittest")
        self.assertEqual(len(self.baseline(root, command).failing), 2)

    def test_a_top_level_tests_directory_still_wins(self):
        root = self.build({**PACKAGE, "calc/tests/test_calc.py": devenv.TESTS,
                           "tests/test_calc.py": devenv.TESTS})
        self.assertEqual(self.detect(root).argv, [*DISCOVER, "-s", "tests"])


class PytestByToolsTest(DetectCase):
    """tox.ini or noxfile.py runs pytest: run with pytest where it is installed."""

    FILES = {"calc.py": devenv.BUGGY_CORE, "tests/test_calc.py": devenv.TESTS}

    def test_tox_runs_pytest_installed_in_the_venv(self):
        root = self.build({**self.FILES, "tox.ini": TOX}, pytest=True)
        write_files(root, {"calc.py": devenv.FIXED_CORE})
        for active in (False, True):
            with self.subTest(active=active):
                command = self.detect(root, active)
                self.assertEqual((command.argv, command.runner), (PYTEST, "pytest"))
                self.assertEqual(command.origin, "detected: tox.ini runs pytest, and pytest "
                                 "is installed where the tests run")
                report = self.verify(root, active)
                self.assertEqual((report["verdict"], report["evidence"]),
                                 ("VERIFIED", "pytest-json"), report["stderr"])
                self.assertEqual(report["tests"]["before"]["counts"],
                                 {"failed": 2, "passed": 1})

    def test_without_pytest_where_the_tests_run_unittest_runs_them(self):
        root = self.build({**self.FILES, "tox.ini": TOX})
        command = self.detect(root)
        self.assertEqual((command.argv, command.runner), ([*DISCOVER, "-s", "tests"], "unittest"))
        self.assertEqual(len(self.baseline(root, command).failing), 2)
        # with nothing else to run, pytest is proposed all the same
        os.remove(os.path.join(root, "tests", "test_calc.py"))
        self.assertEqual(self.detect(root).argv, PYTEST)

    def test_noxfile_runs_pytest(self):
        root = self.build({**self.FILES, "noxfile.py": NOX}, pytest=True)
        self.assertEqual(self.detect(root).argv, PYTEST)
        self.assertEqual(len(self.baseline(root, self.detect(root)).failing), 2)

    def test_pytest_as_a_dependency_is_not_running_it(self):
        tox = TOX.replace("commands = pytest {posargs}", "commands = python -m unittest")
        root = self.build({**self.FILES, "tox.ini": tox}, pytest=True)
        self.assertEqual(self.detect(root).runner, "unittest")


class ManifestsTest(DetectCase):
    """Cargo.toml, go.mod and a package.json test script win over a tests/ directory that
    holds no Python; a tests/ directory of Python files wins over them."""

    def test_a_rust_crate_with_integration_tests(self):
        root = self.build(CRATE, layout="git")
        command = self.detect(root)
        self.assertEqual((command.argv, command.runner), (["cargo", "test"], "cargo"))
        if not shutil.which("cargo"):
            self.skipTest(CARGO_MISSING)
        os.environ.setdefault("CARGO_HOME", os.path.expanduser("~/.cargo"))
        os.environ.setdefault("RUSTUP_HOME", os.path.expanduser("~/.rustup"))
        result = self.baseline(root, command, venv=False)
        self.assertEqual(result.tests, {"tests/api.rs [api]::adds": "failed",
                                        "tests/api.rs [api]::zero": "passed"}, result.output)

    def test_go_module_with_a_tests_directory(self):
        root = self.build({"go.mod": "module example.com/m\n", "tests/data.txt": "x\n",
                           "tests/api_test.go": "package tests\n"}, layout="git")
        self.assertEqual(self.detect(root).argv, ["go", "test", "./..."])

    def test_package_json_scripts(self):
        scripts = {"node --test": (["node", "--test"], "node"),
                   "mocha --recursive": (["npm", "test"], "exit-code"),
                   "node --test && eslint .": (["npm", "test"], "exit-code")}
        for script, expected in scripts.items():
            with self.subTest(script=script):
                root = self.build({"package.json": json.dumps({"scripts": {"test": script}}),
                                   "tests/calc.test.js": ""}, layout="node_modules",
                                  name=f"n{len(os.listdir(self.tmp))}")
                command = self.detect(root)
                self.assertEqual((command.argv, command.runner), expected)

    def test_jest_installed_in_node_modules_is_read_test_by_test(self):
        root = self.build({"package.json": json.dumps({"scripts": {"test": "jest --ci"}})},
                          layout="node_modules")
        self.assertEqual(self.detect(root).argv, ["npm", "test"])   # no jest installed
        write_files(root, {"node_modules/.bin/jest": "#!/usr/bin/env node\n"})
        command = self.detect(root)
        self.assertEqual((command.argv, command.runner), (["npx", "jest", "--ci"], "jest"))

    @unittest.skipUnless(shutil.which("node"), NODE_MISSING)
    def test_node_baseline_runs(self):
        root = self.build({"package.json": json.dumps({"scripts": {"test": "node --test"}}),
                           "calc.js": "exports.add = (a, b) => a - b;\n",
                           "test/calc.test.js": "const test = require('node:test');\n"
                           "const assert = require('node:assert');\n"
                           "test('adds', () => assert.strictEqual(require('../calc')"
                           ".add(2, 3), 5));\n"}, layout="git")
        result = self.baseline(root, self.detect(root), venv=False)
        self.assertEqual(result.tests, {"test/calc.test.js > adds": "failed"}, result.output)

    def test_python_tests_win_over_a_manifest(self):
        root = self.build({**CRATE, "tests/test_calc.py": CALC_TESTS}, layout="git")
        self.assertEqual(self.detect(root).argv, [*DISCOVER, "-s", "tests"])


class NothingFoundTest(DetectCase):
    def test_the_error_names_what_was_tried_on_one_line(self):
        root = self.build({"README.md": "hello\n", "tests/data.txt": "x\n"}, layout="git")
        with self.assertRaises(UsageError) as caught:
            self.detect(root)
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        self.assertTrue(message.startswith(f"cannot tell how to run the tests in {root}; "
                                           "tried: python3 -m pytest ("), message)
        for command in ("python3 -m unittest discover", "go test ./...", "cargo test",
                        "node --test", "npx jest", "npm test", "make test"):
            self.assertIn(command, message)
        self.assertTrue(message.endswith("; give -test CMD"), message)
        code, out, err = run_cli(["verify", "-dir", root, "-base", "HEAD"])
        self.assertEqual((code, err.count("\n")), (2, 1), err)
        self.assertIn("tried: python3 -m pytest", err)


if __name__ == "__main__":
    unittest.main()
