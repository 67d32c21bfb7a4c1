"""The project's own environment: a `.venv` with an editable install (src/ and flat layouts,
`.pth` and import-hook styles), activated or not, graded in bwrap and without a sandbox;
`-env` and `[tool.golem] env`; and baselines that stop before any model call because the
test command never reached the tests."""

from __future__ import annotations

import os
import shutil
import unittest

from golem.tools import sandbox
from tests import devenv
from tests.fixtures import GolemCase, git, last_json, read, run_cli, write_files
from tests.provider_server import chat

SANDBOXES = ["none"] + (["bwrap"] if shutil.which("bwrap")
                        and sandbox.usable(shutil.which("bwrap")) is None else [])


def edit(project: devenv.Project, new: str) -> tuple[str, dict]:
    return ("write_file", {"path": project.core, "content": new})


class EnvironmentCase(GolemCase):
    def fix(self, project, server, *extra, sandbox="none", active=False, env=None):
        args = ["fix", "-dir", project.root, "-provider", "openai", "-base-url", server.url,
                "-sandbox", sandbox, "-trace", self.trace, "-json", *extra]
        code, out, err = run_cli(args, {**project.env(active), **(env or {})})
        return code, out, err, (last_json(out) if out.strip() else {})

    def verify(self, project, *extra, sandbox="none", active=False, env=None):
        args = ["verify", "-dir", project.root, "-base", "HEAD", "-sandbox", sandbox,
                "-trace", self.trace, "-json", *extra]
        code, out, err = run_cli(args, {**project.env(active), **(env or {})})
        return code, out, err, (last_json(out) if out.strip() else {})

    def notes(self) -> list[str]:
        from tests.fixtures import read_trace
        return [e["message"] for e in read_trace(self.trace) if e["event"] == "note"]


class LayoutTest(GolemCase):
    """The hand-made editable installs behave as pip's do: the venv's python imports the
    package from the checkout, from any directory."""

    def test_each_layout_imports_from_the_checkout(self):
        import subprocess
        for layout in devenv.LAYOUTS:
            with self.subTest(layout=layout):
                project = devenv.make(self.tmp, layout, name=layout)
                done = subprocess.run([project.python, "-c", "import calc; print(calc.__file__)"],
                                      cwd=self.tmp, capture_output=True, text=True, check=True)
                self.assertEqual(done.stdout.strip(),
                                 os.path.join(project.root, project.package, "__init__.py"))


class EditableInstallTest(EnvironmentCase):
    """Acceptance: `pip install -e .` of a src/ layout into the workspace's `.venv`, not
    activated: the venv is found, an honest fix is VERIFIED and a partial one FAILED, in every
    sandbox mode, through `fix` and `verify -base`."""

    def test_fix_honest_and_partial(self):
        for mode in SANDBOXES:
            for layout in ("src-pth", "src-finder"):
                with self.subTest(sandbox=mode, layout=layout):
                    project = devenv.make(self.tmp, layout, name=f"fix-{mode}-{layout}")
                    server = self.serve([chat(tool_calls=[edit(project, devenv.FIXED_CORE)]),
                                         chat("fixed add and mul")])
                    code, out, err, report = self.fix(project, server, sandbox=mode)
                    self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
                    self.assertEqual(code, 0)
                    self.assertIn(f"python: {project.venv}/bin/python (the workspace's own "
                                  ".venv", err)
                    partial = devenv.make(self.tmp, layout, name=f"half-{mode}-{layout}")
                    server = self.serve([chat(tool_calls=[edit(partial, devenv.HALF_CORE)]),
                                         chat("fixed")])
                    code, out, err, report = self.fix(partial, server, sandbox=mode)
                    self.assertEqual(report.get("verdict"), "FAILED", out + err)
                    self.assertEqual(report["tests"]["after"]["failing"],
                                     ["test_calc.CalcTest.test_mul"])

    def test_verify_base_judges_the_base_not_the_workspace(self):
        for mode in SANDBOXES:
            for layout in devenv.LAYOUTS:
                with self.subTest(sandbox=mode, layout=layout):
                    project = devenv.make(self.tmp, layout, name=f"v-{mode}-{layout}")
                    write_files(project.root, {project.core: devenv.FIXED_CORE})
                    code, out, err, report = self.verify(project, sandbox=mode)
                    self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
                    # the base's own results: two failing, not the workspace's three passing
                    self.assertEqual(report["tests"]["before"]["counts"],
                                     {"failed": 2, "passed": 1})
                    write_files(project.root, {project.core: devenv.HALF_CORE})
                    code, out, err, report = self.verify(project, sandbox=mode)
                    self.assertEqual(report.get("verdict"), "FAILED", out + err)
                    self.assertEqual(code, 1)

    def test_python_processes_the_tests_start_import_the_tree_under_test(self):
        child = """\
import os
import subprocess
import sys
import unittest


class ChildTest(unittest.TestCase):
    def test_child(self):
        done = subprocess.run([sys.executable, "-c", "import calc; print(calc.__file__)"],
                              cwd="/", capture_output=True, text=True)
        here = os.path.realpath(os.getcwd())
        self.assertTrue(done.stdout.startswith(here + os.sep), (done.stdout, done.stderr))
"""
        for mode in SANDBOXES:
            for layout in ("src-pth", "src-finder"):
                with self.subTest(sandbox=mode, layout=layout):
                    project = devenv.make(self.tmp, layout, name=f"c-{mode}-{layout}",
                                          extra={"tests/test_child.py": child})
                    write_files(project.root, {project.core: devenv.FIXED_CORE})
                    code, out, err, report = self.verify(project, sandbox=mode)
                    self.assertEqual(report.get("verdict"), "VERIFIED", out + err)

    def test_activated_venv(self):
        project = devenv.make(self.tmp, "src-pth")
        write_files(project.root, {project.core: devenv.FIXED_CORE})
        code, out, err, report = self.verify(project, sandbox=SANDBOXES[-1], active=True)
        self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
        self.assertIn("the active virtual environment (VIRTUAL_ENV=", err)

    def test_edited_test_is_rejected(self):
        project = devenv.make(self.tmp, "src-pth")
        tests = os.path.join(project.root, "tests", "test_calc.py")
        write_files(project.root, {"tests/test_calc.py": read(tests).replace(
            "assertEqual(mul(2, 3), 6)", "assertTrue(True)").replace(
            "assertEqual(add(2, 3), 5)", "assertTrue(True)")})
        code, out, err, report = self.verify(project)
        self.assertEqual(report.get("verdict"), "REJECTED", out + err)

    def test_workspace_code_is_never_graded_without_a_sandbox(self):
        # a `.pth` that imports the package at start-up: its module comes from the workspace
        # before golem can move anything, so the graded run refuses to start
        project = devenv.make(self.tmp, "src-pth")
        write_files(project.site_packages(), {"zz_calc_preload.pth": "import calc\n"})
        write_files(project.root, {project.core: devenv.FIXED_CORE})
        code, out, err, report = self.verify(project)
        self.assertEqual(code, 2, out + err)
        self.assertIn("was imported from the workspace", err)
        self.assertEqual(len(err.strip().splitlines()[-1:]), 1)

    def test_a_test_reading_the_workspace_by_path_is_refused(self):
        project = devenv.make(self.tmp, "src-pth", extra={"tests/test_peek.py": f"""\
import unittest


class PeekTest(unittest.TestCase):
    def test_peek(self):
        with open({os.path.join(self.tmp, 'proj', 'src', 'calc', 'core.py')!r}) as handle:
            self.assertIn("a * b", handle.read())
"""})
        write_files(project.root, {project.core: devenv.FIXED_CORE})
        code, out, err, report = self.verify(project)
        self.assertEqual(report.get("verdict"), "FAILED", out + err)
        self.assertIn("test_peek.PeekTest.test_peek", report["tests"]["after"]["failing"])


class DiscoveryTest(unittest.TestCase):
    def test_the_workspace_venv_then_the_repositorys(self):
        import tempfile
        from golem.workflow.verifier.interpreter import find_venv
        with tempfile.TemporaryDirectory() as tmp:
            tmp = os.path.realpath(tmp)
            project = devenv.make(tmp, "src-pth")
            venv, why = find_venv(project.root, {})
            self.assertEqual(venv, project.venv)
            self.assertIn("no virtual environment is active", why)
            self.assertIsNone(find_venv(project.root, {"VIRTUAL_ENV": "/elsewhere"})[0])
            below = os.path.join(project.root, "packages", "sub")
            os.makedirs(below)
            self.assertEqual(find_venv(below, {})[0], project.venv)
            os.rename(project.venv, os.path.join(project.root, "venv"))
            self.assertEqual(find_venv(project.root, {})[0], os.path.join(project.root, "venv"))
            os.unlink(os.path.join(project.root, "venv", "bin", "python"))
            self.assertIsNone(find_venv(project.root, {})[0])


class ParseTest(unittest.TestCase):
    def test_items(self):
        from golem.config.values import variables
        self.assertEqual(variables("PYTHONPATH=src,A=x,y z,B"), ["PYTHONPATH=src", "A=x,y z", "B"])
        self.assertEqual(variables(["A=1", "B=2,C=3"]), ["A=1", "B=2", "C=3"])
        for bad in ("HOME=/x", "GOLEM_STATE_DIR=/x", "MY_API_KEY=1", "1A=2", "A B=1"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                variables(bad)


LIB_TESTS = """\
import os
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mode(self):
        self.assertEqual(os.environ.get("CALC_MODE"), "strict")
"""


class VariablesTest(EnvironmentCase):
    """`-env`: PYTHONPATH=lib needed by a project."""

    def project(self, files=None) -> devenv.Project:
        root = os.path.join(self.tmp, "lib-proj")
        write_files(root, {"lib/calc/__init__.py": "def add(a, b):\n    return a - b\n",
                           "tests/test_calc.py": LIB_TESTS, **(files or {})})
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
        return devenv.Project(root, "lib", os.path.join(root, ".venv"))

    def fixing(self, project):
        return [chat(tool_calls=[("edit_file", {"path": "lib/calc/__init__.py",
                                                "old_string": "a - b", "new_string": "a + b"})]),
                chat("fixed")]

    def test_with_env_verified(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                project = self.project()
                server = self.serve(self.fixing(project))
                code, out, err, report = self.fix(project, server, "-env",
                                                  "PYTHONPATH=lib,CALC_MODE=strict",
                                                  sandbox=mode)
                self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
                self.assertIn("environment for test runs and commands: CALC_MODE, PYTHONPATH",
                              err)
                shutil.rmtree(project.root)

    def test_without_env_stops_before_any_model_call(self):
        project = self.project()
        server = self.serve(self.fixing(project))
        code, out, err, report = self.fix(project, server, "-env", "CALC_MODE=strict")
        self.assertEqual(code, 2, out + err)
        line = err.strip().splitlines()[-1]
        self.assertTrue(line.startswith("golem: every test failed to import"), line)
        self.assertIn("'calc'", line)
        self.assertIn("-env PYTHONPATH=lib", line)
        self.assertEqual(server.requests, [])

    def test_user_variable_passed_by_name(self):
        project = self.project()
        write_files(project.root, {"lib/calc/__init__.py": "def add(a, b):\n    return a + b\n"})
        code, out, err, report = self.verify(project, "-env", "PYTHONPATH=lib", "-env",
                                             "CALC_MODE", env={"CALC_MODE": "strict"})
        self.assertEqual(report.get("verdict"), "VERIFIED", out + err)

    def test_repository_config_gives_values_only(self):
        project = self.project(
            {"pyproject.toml": '[tool.golem]\nenv = ["PYTHONPATH=lib", "CALC_MODE"]\n'})
        write_files(project.root, {"lib/calc/__init__.py": "def add(a, b):\n    return a + b\n"})
        code, out, err, report = self.verify(project, env={"CALC_MODE": "strict"})
        # the repository may not pass the user's CALC_MODE through: test_mode fails
        self.assertIn("env passes only values", err)
        self.assertEqual(report.get("verdict"), "FAILED", out + err)
        self.assertEqual(report["tests"]["after"]["failing"], ["test_calc.AddTest.test_mode"])

    def test_keys_are_refused(self):
        project = self.project()
        for value, env in (("OPENAI_API_KEY=x", {}), ("GH_TOKEN", {"GH_TOKEN": "t"}),
                           ("FOO=sk-or-abc123", {"OPENROUTER_API_KEY": "sk-or-abc123"})):
            with self.subTest(value=value):
                code, out, err, _ = self.verify(project, "-env", value, env=env)
                self.assertEqual(code, 2)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn("key", err)
                self.assertNotIn("sk-or-abc123", err)


class StopBeforeSpendingTest(EnvironmentCase):
    """A baseline whose command never reached the tests is exit 2, before any model call."""

    def stops(self, project, *extra, says: str):
        server = self.serve([chat("never asked")])
        code, out, err, _ = self.fix(project, server, *extra)
        self.assertEqual(code, 2, out + err)
        self.assertIn(says, err.strip().splitlines()[-1])
        self.assertEqual(server.requests, [])

    def test_module_that_does_not_exist(self):
        project = devenv.make(self.tmp, "src-pth")
        self.stops(project, "-test", "python3 -m nosuchmodule", says="has no module "
                   "'nosuchmodule'")

    def test_script_that_does_not_exist(self):
        project = devenv.make(self.tmp, "src-pth")
        self.stops(project, "-test", "python3 tests/run_all.py", says="cannot open "
                   "'tests/run_all.py'")

    def test_runner_that_cannot_be_imported(self):
        project = devenv.make(self.tmp, "src-pth")
        with open(os.path.join(project.venv, "pyvenv.cfg")) as handle:
            config = handle.read()
        with open(os.path.join(project.venv, "pyvenv.cfg"), "w") as handle:
            handle.write(config.replace("include-system-site-packages = true",
                                        "include-system-site-packages = false"))
        self.stops(project, "-test", "python3 -m pytest", says="the test runner cannot be "
                   "imported")

    def test_collection_crashes_on_an_import(self):
        project = devenv.make(self.tmp, "src-pth",
                              extra={"conftest.py": "import yaml_that_is_missing\n"})
        self.stops(project, says="no test ran: the tests cannot import 'yaml_that_is_missing'")

    def test_a_declared_dependency_that_is_missing(self):
        project = devenv.make(self.tmp, "src-pth", core="import humanize_missing\n" +
                              devenv.BUGGY_CORE,
                              extra={"requirements.txt": "humanize-missing>=1.0\n"})
        self.stops(project, says="every test failed to import: no module named "
                   "'humanize_missing'")

    def test_a_misspelt_import_in_the_code_is_the_models_to_fix(self):
        project = devenv.make(self.tmp, "src-pth", core="import colections\n" +
                              devenv.BUGGY_CORE)
        server = self.serve([chat("cannot do it")])
        code, out, err, report = self.fix(project, server)
        self.assertEqual(report.get("verdict"), "FAILED", out + err)
        self.assertEqual(len(server.requests), 1)

    def test_a_missing_submodule_is_the_models_to_write(self):
        # `calc.extra` missing is a fault in the code, not the environment: the run goes on
        project = devenv.make(self.tmp, "src-pth", extra={"tests/test_extra.py": """\
import unittest

from calc.extra import sub


class SubTest(unittest.TestCase):
    def test_sub(self):
        self.assertEqual(sub(3, 2), 1)
"""})
        os.unlink(os.path.join(project.root, "tests", "test_calc.py"))
        server = self.serve([chat("cannot do it")])
        code, out, err, report = self.fix(project, server)
        self.assertEqual(report.get("verdict"), "FAILED", out + err)
        self.assertEqual(len(server.requests), 1)


if __name__ == "__main__":
    unittest.main()
