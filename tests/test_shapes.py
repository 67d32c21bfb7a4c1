"""Repository shapes and runner set-ups developers have: doctests beside the code, `-dir`
below a repository's root, submodules, the user's git filters, build products git ignores,
and a Node project with a `test/` directory. Each is a real git repository, judged by
`golem verify -base` (and `golem fix` where the model's side matters): the honest change is
VERIFIED, an edited test or test datum REJECTED."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import unittest

from golem.core.errors import UsageError
from golem.workflow.verifier.suite import detect
from tests.fixtures import (BUGGY, CALC_TESTS, GolemCase, git, last_json, make_repo, read_trace,
                            run_cli, write_files)
from tests.provider_server import chat

PYTEST = "python3 -m pytest -q -p no:cacheprovider"

DOCTEST_CALC = '''\
"""A calculator.

>>> add(1, 1)
2
"""


def add(a, b):
    """The sum of a and b.

    >>> add(2, 3)
    5
    """
    return a - b
'''
DOCTEST_SUITE = """\
import doctest
import unittest

import calc


def load_tests(loader, tests, ignore):
    tests.addTests(doctest.DocTestSuite(calc))
    return tests


class AddTest(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(calc.add(0, 0), 0)
"""


def commit_all(repo: str, message: str = "change") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


class ShapeCase(GolemCase):
    def verify(self, repo: str, test: str | None, *extra: str, base: str = "HEAD"):
        """`golem verify -json` in `repo`: (exit code, report)."""
        args = ["verify", "-dir", repo, "-base", base, "-sandbox", "none", "-trace",
                self.trace, "-json", *extra] + (["-test", test] if test else [])
        code, out, err = run_cli(args)
        self.assertTrue(out.strip(), err)
        return code, last_json(out)

    def assertVerdict(self, result, verdict: str, code: int):
        got, report = result
        self.assertEqual((report["verdict"], got), (verdict, code), report["summary"])
        return report

    def edit(self, repo: str, rel: str, old: str, new: str) -> None:
        path = os.path.join(repo, *rel.split("/"))
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        self.assertIn(old, text)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text.replace(old, new))


class ExportIgnoreTest(ShapeCase):
    """`tests/ export-ignore` in .gitattributes (kept out of release archives): the base still
    has its tests."""

    def test_honest_fix_verified_and_edited_test_rejected(self):
        repo = make_repo(self.tmp, {**BUGGY, ".gitattributes": "tests/ export-ignore\n"},
                         git_repo=True)
        self.edit(repo, "calc.py", "a - b", "a + b")
        report = self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                                    "VERIFIED", 0)
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])
        git(repo, "checkout", "-q", ".")
        self.edit(repo, "tests/test_calc.py", "add(2, 3), 5", "add(2, 3), -1")
        self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                           "REJECTED", 3)


class DoctestTest(ShapeCase):
    """A module holding doctests is code; the doctests' text is the test."""

    def repo(self, files):
        return make_repo(self.tmp, files, git_repo=True)

    def test_pytest_doctest_modules_an_honest_fix_of_the_module_is_verified(self):
        repo = self.repo({"calc/__init__.py": DOCTEST_CALC, "tests/test_calc.py": CALC_TESTS})
        self.edit(repo, "calc/__init__.py", "return a - b", "return a + b")
        report = self.assertVerdict(self.verify(repo, PYTEST + " --doctest-modules"),
                                    "VERIFIED", 0)
        self.assertIn("calc/__init__.py::calc.add", report["fixed"])
        self.assertEqual(report["protected_changes"], [])

    def test_pytest_doctest_modules_an_edited_expected_output_is_rejected(self):
        repo = self.repo({"calc/__init__.py": DOCTEST_CALC, "tests/test_calc.py": CALC_TESTS})
        self.edit(repo, "calc/__init__.py", "    5\n", "    -1\n")
        self.edit(repo, "calc/__init__.py", ">>> add(1, 1)\n2\n", ">>> add(1, 1)\n0\n")
        report = self.assertVerdict(self.verify(repo, PYTEST + " --doctest-modules"),
                                    "REJECTED", 3)
        self.assertIn("doctest", report["protected_changes"][0]["reason"])

    def test_code_that_replaces_a_docstring_is_a_doctest_change(self):
        repo = self.repo({"calc/__init__.py": DOCTEST_CALC, "tests/test_calc.py": CALC_TESTS})
        self.edit(repo, "calc/__init__.py", "    return a - b\n",
                  "    return a - b\n\n\nadd.__doc__ = '>>> add(2, 3)\\n-1\\n'\n"
                  "__doc__ = '>>> 1\\n1\\n'\n")
        self.assertVerdict(self.verify(repo, PYTEST + " --doctest-modules"), "REJECTED", 3)

    def test_unittest_doctest_suite_honest_fix_verified_edited_example_rejected(self):
        files = {"calc/__init__.py": DOCTEST_CALC, "tests/test_calc.py": DOCTEST_SUITE}
        repo = self.repo(files)
        command = "python3 -m unittest discover -s tests"
        self.edit(repo, "calc/__init__.py", "return a - b", "return a + b")
        self.assertVerdict(self.verify(repo, command), "VERIFIED", 0)
        git(repo, "checkout", "-q", ".")
        # the same cheat under unittest: the examples the suite runs now expect the bug
        self.edit(repo, "calc/__init__.py", "    5\n", "    -1\n")
        self.edit(repo, "calc/__init__.py", ">>> add(1, 1)\n2\n", ">>> add(1, 1)\n0\n")
        report = self.assertVerdict(self.verify(repo, command), "REJECTED", 3)
        self.assertEqual(report["protected_changes"][0]["path"], "calc/__init__.py")

    def test_fix_with_doctest_modules_verifies_a_source_fix(self):
        repo = make_repo(self.tmp, {"calc/__init__.py": DOCTEST_CALC,
                                    "tests/test_calc.py": CALC_TESTS})
        server = self.serve([chat(tool_calls=[("edit_file", {
            "path": "calc/__init__.py", "old_string": "return a - b",
            "new_string": "return a + b"})]), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", PYTEST + " --doctest-modules",
                                  "-provider", "openai", "-base-url", server.url, "-sandbox",
                                  "none", "-json"])
        report = last_json(out)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])


    def test_attempts_judge_the_doctests_of_each_private_copy(self):
        from tests.provider_server import ProviderServer
        repo = make_repo(self.tmp, {"calc/__init__.py": DOCTEST_CALC,
                                    "tests/test_calc.py": CALC_TESTS})
        edit = lambda old, new: [chat(tool_calls=[("edit_file", {
            "path": "calc/__init__.py", "old_string": old, "new_string": new})]),
            chat("done")]
        server = self.enterContext(ProviderServer(by_model={
            "cheat": edit("    5\n", "    -1\n"), "honest": edit("a - b", "a + b")}))
        code, out, err = run_cli(["fix", "-dir", repo, "-test", PYTEST + " --doctest-modules",
                                  "-provider", "openai", "-base-url", server.url, "-sandbox",
                                  "none", "-json", "-attempts", "2", "-models",
                                  "cheat,honest"])
        report = last_json(out)
        got = {a["model"]: a["verdict"] for a in report["attempts"]}
        self.assertEqual(got, {"cheat": "REJECTED", "honest": "VERIFIED"}, report["summary"])
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0))


def monorepo(tmp: str) -> tuple[str, str]:
    """A repository whose package lives two levels below its root: (root, package)."""
    root = make_repo(tmp, {"README.md": "monorepo\n", "tools/build.py": "print('x')\n",
                           "packages/calc/calc.py": "def add(a, b):\n    return a - b\n",
                           "packages/calc/tests/test_calc.py": CALC_TESTS},
                     git_repo=True, name="mono")
    return root, os.path.join(root, "packages", "calc")


class BelowTheRootTest(ShapeCase):
    """`-dir` names a directory below the repository's root (a package of a monorepo)."""

    def test_verify_from_a_package_of_a_monorepo(self):
        root, package = monorepo(self.tmp)
        self.edit(package, "calc.py", "a - b", "a + b")
        self.edit(root, "README.md", "monorepo", "outside -dir, not judged")
        report = self.assertVerdict(self.verify(package, None), "VERIFIED", 0)
        self.assertEqual(report["changed_files"], ["calc.py"])     # relative to -dir
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])

    def test_a_test_edit_below_the_root_is_rejected_by_its_path_under_dir(self):
        root, package = monorepo(self.tmp)
        self.edit(package, "tests/test_calc.py", "add(2, 3), 5", "add(2, 3), -1")
        report = self.assertVerdict(self.verify(package, None), "REJECTED", 3)
        self.assertEqual([p["path"] for p in report["protected_changes"]],
                         ["tests/test_calc.py"])

    def test_committed_changes_below_the_root_and_an_older_base(self):
        root, package = monorepo(self.tmp)
        self.edit(package, "calc.py", "a - b", "a + b")
        commit_all(root, "fix")
        report = self.assertVerdict(self.verify(package, None, base="HEAD~1"), "VERIFIED", 0)
        self.assertEqual(report["changed_files"], ["calc.py"])


ROT13_FILTER = """\
import codecs, sys
sys.stdout.write(codecs.encode(sys.stdin.read(), "rot13"))
"""
EXPECTED_TESTS = """\
import os
import unittest

from calc import add

HERE = os.path.dirname(os.path.abspath(__file__))
NUMBERS = {"zero": 0, "two": 2, "three": 3, "five": 5, "six": 6}


class AddTest(unittest.TestCase):
    def test_expected(self):
        with open(os.path.join(HERE, "data", "expected.txt"), encoding="utf-8") as handle:
            a, b, total = (NUMBERS[word] for word in handle.read().split())
        self.assertEqual(add(a, b), total)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""


class GitFilterTest(ShapeCase):
    """A clean/smudge filter configured in the repository (as git-lfs does): the test data
    is stored filtered (rot13), and the work tree holds what the smudge makes of it."""

    def make(self, where: str = "user") -> str:
        """The repository; the filter is defined in the user's ~/.gitconfig (where
        `git lfs install` puts its own) or in the repository's .git/config."""
        repo = os.path.join(self.tmp, "filtered")
        os.makedirs(repo)
        git(repo, "init", "-q")
        script = os.path.join(self.tmp, "rot13.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(ROT13_FILTER)
        command = f"{shutil.which('python3')} {script}"
        home = os.path.join(self.tmp, "home")
        os.makedirs(home)
        os.environ["HOME"] = home
        for name in ("GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME", "GIT_CONFIG_NOSYSTEM"):
            os.environ.pop(name, None)
        scope = ["--global"] if where == "user" else []
        for key, value in (("clean", command), ("smudge", command), ("required", "true")):
            git(repo, "config", *scope, f"filter.rot13.{key}", value)
        write_files(repo, {".gitattributes": "*.txt filter=rot13\n",
                           "calc.py": "def add(a, b):\n    return a - b\n",
                           "tests/test_calc.py": EXPECTED_TESTS,
                           "tests/data/expected.txt": "two three five\n"})
        commit_all(repo, "initial")
        self.assertEqual(git(repo, "cat-file", "-p", "HEAD:tests/data/expected.txt"),
                         "gjb guerr svir\n")
        return repo

    def test_an_honest_fix_is_verified_with_the_users_filter(self):
        repo = self.make()
        self.edit(repo, "calc.py", "a - b", "a + b")
        report = self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                                    "VERIFIED", 0)
        self.assertEqual(report["changed_files"], ["calc.py"])
        self.assertEqual(report["tests"]["before"]["counts"], {"failed": 1, "passed": 1})

    def test_a_filter_in_the_repositorys_own_configuration(self):
        repo = self.make("repo")
        self.edit(repo, "calc.py", "a - b", "a + b")
        self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                           "VERIFIED", 0)

    def test_an_edited_datum_is_rejected(self):
        repo = self.make()
        self.edit(repo, "tests/data/expected.txt", "five", "six")
        report = self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                                    "REJECTED", 3)
        self.assertEqual(report["changed_files"], ["tests/data/expected.txt"])


SUBMODULE_OPS = "def plus(a, b):\n    return a - b\n"
SUBMODULE_TESTS = """\
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vendor"))

from mathlib.ops import plus


class PlusTest(unittest.TestCase):
    def test_plus(self):
        self.assertEqual(plus(2, 3), 5)

    def test_zero(self):
        self.assertEqual(plus(0, 0), 0)
"""


class SubmoduleTest(ShapeCase):
    """The tests import code from a git submodule."""

    def make(self) -> tuple[str, str]:
        lib = make_repo(self.tmp, {"mathlib/__init__.py": "", "mathlib/ops.py": SUBMODULE_OPS},
                        git_repo=True, name="lib")
        repo = make_repo(self.tmp, {"tests/test_ops.py": SUBMODULE_TESTS}, git_repo=True,
                         name="app")
        git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib,
            "vendor")
        git(repo, "commit", "-q", "-m", "the submodule")
        return repo, os.path.join(repo, "vendor")

    def test_an_uncommitted_fix_inside_the_submodule_is_verified(self):
        repo, sub = self.make()
        self.edit(sub, "mathlib/ops.py", "a - b", "a + b")
        report = self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                                    "VERIFIED", 0)
        self.assertEqual(report["changed_files"], ["vendor/mathlib/ops.py"])
        self.assertEqual(report["tests"]["before"]["counts"], {"failed": 1, "passed": 1})

    def test_a_fix_committed_in_the_submodule_and_recorded_is_verified(self):
        repo, sub = self.make()
        self.edit(sub, "mathlib/ops.py", "a - b", "a + b")
        commit_all(sub, "fix")
        commit_all(repo, "the fixed submodule")
        report = self.assertVerdict(self.verify(
            repo, "python3 -m unittest discover -s tests", base="HEAD~1"), "VERIFIED", 0)
        self.assertEqual(report["changed_files"], ["vendor/mathlib/ops.py"])

    def test_an_edited_test_is_rejected(self):
        repo, sub = self.make()
        self.edit(repo, "tests/test_ops.py", "plus(2, 3), 5", "plus(2, 3), -1")
        self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                           "REJECTED", 3)


NATIVE_TESTS = """\
import unittest

from calc import add
from calc._native import mul


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)
"""
C_EXTENSION = r"""
#include <Python.h>
static PyObject *mul(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a * b);
}
static PyMethodDef methods[] = {{"mul", mul, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
"""


class BuildProductTest(ShapeCase):
    """A module built in place and ignored by git (an extension module, a generated file)."""

    def make(self, build) -> str:
        repo = make_repo(self.tmp, {".gitignore": "*.so\ncalc/_native.py\nbuild/\n"
                                                  "tests/test_local.py\n",
                                    "calc/__init__.py": "def add(a, b):\n    return a - b\n",
                                    "tests/test_calc.py": NATIVE_TESTS}, git_repo=True)
        build(repo)
        write_files(repo, {"tests/test_local.py": "raise SystemExit('never carried')\n",
                           "build/lib/calc/_native.py": "raise SystemExit('never carried')\n"})
        return repo

    def generated(self, repo: str) -> None:
        write_files(repo, {"calc/_native.py": "def mul(a, b):\n    return a * b\n"})

    def check(self, repo: str, product: str) -> None:
        self.edit(repo, "calc/__init__.py", "a - b", "a + b")
        report = self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                                    "VERIFIED", 0)
        # the base ran what the runner itself runs in the workspace: the built module too
        self.assertEqual(report["tests"]["before"]["counts"], {"failed": 1, "passed": 1})
        self.assertEqual(report["changed_files"], ["calc/__init__.py"])
        [note] = [e for e in read_trace(self.trace) if "build_products" in e]
        self.assertEqual(note["build_products"], [product])     # never the test, never build/
        git(repo, "checkout", "-q", "calc/__init__.py")
        self.edit(repo, "tests/test_calc.py", "add(2, 3), 5", "add(2, 3), -1")
        self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                           "REJECTED", 3)

    def test_a_generated_module_that_runs_code_is_left_out(self):
        # code git ignores is code nobody reviews: neither run has it (data-only modules,
        # such as a generated `_version.py`, carry over: tests/test_adversarial_data.py)
        repo = self.make(self.generated)
        self.edit(repo, "calc/__init__.py", "a - b", "a + b")
        self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                           "FAILED", 1)
        self.assertEqual([e["left_out"] for e in read_trace(self.trace)
                          if isinstance(e.get("left_out"), str)], ["calc/_native.py"])
        self.assertFalse([e for e in read_trace(self.trace) if "build_products" in e])

    def test_a_file_the_change_itself_makes_ignored_is_not_carried_over(self):
        repo = make_repo(self.tmp, {".gitignore": "build/\n", "calc/__init__.py":
                                    "def add(a, b):\n    return a - b\n",
                                    "tests/test_calc.py": CALC_TESTS}, git_repo=True)
        # the change hides its code in a file it tells git to ignore
        write_files(repo, {".gitignore": "build/\ncalc/_impl.py\n",
                           "calc/_impl.py": "def add(a, b):\n    return a + b\n",
                           "calc/__init__.py": "from calc._impl import add\n"})
        report = self.assertVerdict(self.verify(repo, "python3 -m unittest discover -s tests"),
                                    "FAILED", 1)
        self.assertEqual(report["changed_files"], [".gitignore", "calc/__init__.py"])
        self.assertFalse([e for e in read_trace(self.trace) if "build_products" in e])

    @unittest.skipUnless(shutil.which("gcc") and os.path.exists(
        os.path.join(sysconfig.get_paths()["include"], "Python.h")), "needs gcc and Python.h")
    def test_an_extension_module_built_in_place_is_part_of_the_base(self):
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        if not suffix.endswith(".so"):
            self.skipTest("the interpreter's extension suffix is not .so")
        name = "calc/_native" + suffix

        def build(repo: str) -> None:
            source = os.path.join(self.tmp, "native.c")
            with open(source, "w", encoding="utf-8") as handle:
                handle.write(C_EXTENSION)
            subprocess.run(["gcc", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"],
                            "-o", os.path.join(repo, name), source], check=True)
        repo = self.make(build)
        done = subprocess.run([sys.executable, "-c", "from calc._native import mul; "
                               "print(mul(2, 3))"], cwd=repo, capture_output=True, text=True)
        self.assertEqual(done.stdout.strip(), "6", done.stderr)
        self.check(repo, name)


NODE_INDEX = "exports.add = (a, b) => a - b;\n"
NODE_TEST = """\
const test = require('node:test');
const assert = require('node:assert');
const { add } = require('../index.js');
test('adds', () => { assert.strictEqual(add(2, 3), 5); });
test('zero', () => { assert.strictEqual(add(0, 0), 0); });
"""
NODE_PACKAGE = '{"name": "m", "version": "1.0.0", "scripts": {"test": "node --test"}}\n'


@unittest.skipUnless(shutil.which("node"), "needs node")
class NodeProjectTest(ShapeCase):
    """A Node project: `test/` beside a package.json whose test script runs node --test."""

    def make(self) -> str:
        return make_repo(self.tmp, {"package.json": NODE_PACKAGE, "index.js": NODE_INDEX,
                                    "test/add.test.js": NODE_TEST}, git_repo=True)

    def test_the_test_script_wins_over_a_bare_test_directory(self):
        command = detect(self.make())
        self.assertEqual((command.argv, command.runner), (["node", "--test"], "node"))

    def test_a_python_test_directory_still_means_unittest(self):
        repo = make_repo(self.tmp, {"package.json": NODE_PACKAGE, "calc.py": "x = 1\n",
                                    "tests/test_calc.py": CALC_TESTS})
        self.assertEqual(detect(repo).runner, "unittest")

    def test_npm_placeholder_and_scripts_with_shell_syntax(self):
        repo = make_repo(self.tmp, {"package.json": '{"scripts": {"test": "echo \\"Error: '
                                    'no test specified\\" && exit 1"}}', "test/a.js": ""})
        # npm's placeholder is no test script, and a test/ directory with no Python file in
        # it is no unittest suite: nothing to run, and the error says what was looked for
        with self.assertRaisesRegex(UsageError, "tried: .*npm test"):
            detect(repo)
        write_files(repo, {"package.json": '{"scripts": {"test": "node --test && lint"}}'})
        self.assertEqual(detect(repo).argv, ["npm", "test"])

    def test_honest_fix_verified_and_edited_test_rejected(self):
        repo = self.make()
        self.edit(repo, "index.js", "a - b", "a + b")
        report = self.assertVerdict(self.verify(repo, None), "VERIFIED", 0)
        self.assertEqual(report["evidence"], "node-json")
        git(repo, "checkout", "-q", ".")
        self.edit(repo, "test/add.test.js", "add(2, 3), 5", "add(2, 3), -1")
        self.assertVerdict(self.verify(repo, None), "REJECTED", 3)


if __name__ == "__main__":
    unittest.main()
