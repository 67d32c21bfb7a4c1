"""Test data the tests read where a plain `open` in a test function does not show it, and what
`verify` takes from outside the change: a conftest.py that reads its expectations while pytest
collects, a database sqlite opens in C, a file a program the tests start reads, build products
git ignores, and the workspace's own virtual environment.

Each attack runs `golem verify -base` for real on a small temporary git repository and asserts
the secure verdict; each honest control stays VERIFIED.
"""

from __future__ import annotations

import os
import sqlite3
import unittest

from tests.adversarial import PYTEST_CMD, AdversarialCase, make_venv, needs_pytest
from tests.fixtures import BUGGY, BUGGY_CALC, FIXED_CALC, git

ROOT_OF = "ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))\n"

# pytest: the expectations come from a file conftest.py reads while it is imported, by a
# path no literal names
CONFTEST_READS = ("import json\nimport os\n\nimport pytest\n\n" + ROOT_OF +
                  "with open(os.path.join(ROOT, 'cfg', 'val' + 'ues.json')) as fh:\n"
                  "    CASES = json.load(fh)\n\n\n"
                  "@pytest.fixture\ndef add_cases():\n    return CASES['add']\n")
CONFTEST_TEST = ("from calc import add\n\n\ndef test_add(add_cases):\n"
                 "    for a, b, expected in add_cases:\n        assert add(a, b) == expected\n")
# unittest: the same read while the test module is imported
MODULE_READS = ("import json\nimport os\nimport unittest\n\nfrom calc import add\n\n" + ROOT_OF +
                "with open(os.path.join(ROOT, 'cfg', 'val' + 'ues.json')) as fh:\n"
                "    CASES = json.load(fh)\n\n\n"
                "class AddTest(unittest.TestCase):\n    def test_add(self):\n"
                "        for a, b, expected in CASES['add']:\n"
                "            self.assertEqual(add(a, b), expected)\n")
SQLITE_TEST = ("import os\nimport sqlite3\nimport unittest\n\nfrom calc import add\n\n" + ROOT_OF +
               "\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
               "        db = sqlite3.connect(os.path.join(ROOT, 'cfg', 'val' + 'ues.db'))\n"
               "        for a, b, expected in db.execute('select a, b, expected from t'):\n"
               "            self.assertEqual(add(a, b), expected)\n        db.close()\n")
CHILD_TEST = ("import os\nimport subprocess\nimport unittest\n\nfrom calc import add\n\n" +
              ROOT_OF + "\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
              "        expected = subprocess.check_output(['cat', os.path.join(ROOT, 'cfg', "
              "'exp' + 'ected.txt')], text=True)\n"
              "        self.assertEqual(str(add(2, 3)), expected.strip())\n")


def database(path: str, expected: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.execute("create table t(a, b, expected)")
    db.execute("insert into t values (2, 3, ?)", (expected,))
    db.commit()
    db.close()


class ReadWhileCollectedTest(AdversarialCase):
    """What a conftest.py or a test module reads while it is imported is test data."""

    @needs_pytest
    def test_data_a_conftest_reads_at_import_is_protected(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/values.json": '{"add": [[2, 3, 5]]}\n',
                             "tests/conftest.py": CONFTEST_READS,
                             "tests/test_calc.py": CONFTEST_TEST}, git_repo=True)
        self.commit_change(repo, {"cfg/values.json": '{"add": [[2, 3, -1]]}\n'}, "expect -1")
        report = self.assertVerdict(self.verify(repo, "-strict", command=PYTEST_CMD),
                                    "REJECTED")
        self.assertIn("cfg/values.json", report["summary"])

    def test_data_a_test_module_reads_at_import_is_protected(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/values.json": '{"add": [[2, 3, 5]]}\n',
                             "tests/test_calc.py": MODULE_READS}, git_repo=True)
        self.commit_change(repo, {"cfg/values.json": '{"add": [[2, 3, -1]]}\n'}, "expect -1")
        report = self.assertVerdict(self.verify(repo, "-strict"), "REJECTED")
        self.assertIn("cfg/values.json", report["summary"])

    @needs_pytest
    def test_an_honest_fix_beside_a_conftest_that_reads_data_is_verified(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/values.json": '{"add": [[2, 3, 5]]}\n',
                             "tests/conftest.py": CONFTEST_READS,
                             "tests/test_calc.py": CONFTEST_TEST}, git_repo=True)
        self.commit_change(repo, {"calc.py": FIXED_CALC}, "fix")
        self.assertVerdict(self.verify(repo, "-strict", command=PYTEST_CMD), "VERIFIED")


class OpenedInCTest(AdversarialCase):
    """A database sqlite opens (in C, without the `open` audit event) is read all the same."""

    def sqlite_repo(self) -> str:
        repo = self.project({"calc.py": BUGGY_CALC, "tests/test_calc.py": SQLITE_TEST},
                            git_repo=True)
        database(os.path.join(repo, "cfg", "values.db"), 5)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "the expectations")
        return repo

    def test_a_rewritten_sqlite_database_is_rejected(self):
        repo = self.sqlite_repo()
        database(os.path.join(repo, "cfg", "values.db"), -1)
        git(repo, "commit", "-q", "-am", "expect -1")
        report = self.assertVerdict(self.verify(repo, "-strict"), "REJECTED")
        self.assertIn("cfg/values.db", report["summary"])

    def test_a_write_ahead_log_beside_the_database_is_rejected(self):
        # sqlite reads `values.db-wal` when it opens `values.db`: a new one rewrites the data
        repo = self.sqlite_repo()
        self.commit_change(repo, {"cfg/values.db-wal": "not a real log\n"}, "a log")
        report = self.assertVerdict(self.verify(repo, "-strict"), "REJECTED")
        self.assertIn("cfg/values.db-wal", report["summary"])

    def test_an_honest_fix_beside_a_sqlite_database_is_verified(self):
        repo = self.sqlite_repo()
        self.commit_change(repo, {"calc.py": FIXED_CALC}, "fix")
        self.assertVerdict(self.verify(repo, "-strict"), "VERIFIED")


class ReadByAChildTest(AdversarialCase):
    """A file named on the command line of a program the tests start is read by the tests."""

    def test_expectations_a_child_process_reads_are_protected(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/expected.txt": "5\n",
                             "tests/test_calc.py": CHILD_TEST}, git_repo=True)
        self.commit_change(repo, {"cfg/expected.txt": "-1\n"}, "expect -1")
        report = self.assertVerdict(self.verify(repo, "-strict"), "REJECTED")
        self.assertIn("cfg/expected.txt", report["summary"])

    @needs_pytest
    def test_expectations_a_child_process_reads_are_protected_under_pytest(self):
        test = ("import os\nimport subprocess\n\nfrom calc import add\n\n" + ROOT_OF +
                "\n\ndef test_add():\n    expected = subprocess.run('cat ' + os.path.join("
                "ROOT, 'cfg', 'exp' + 'ected.txt'), shell=True, capture_output=True, "
                "text=True).stdout\n    assert str(add(2, 3)) == expected.strip()\n")
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/expected.txt": "5\n",
                             "tests/test_calc.py": test}, git_repo=True)
        self.commit_change(repo, {"cfg/expected.txt": "-1\n"}, "expect -1")
        report = self.assertVerdict(self.verify(repo, command=PYTEST_CMD), "REJECTED")
        self.assertIn("cfg/expected.txt", report["summary"])

    def test_an_honest_fix_in_a_suite_that_starts_programs_is_verified(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/expected.txt": "5\n",
                             "tests/test_calc.py": CHILD_TEST}, git_repo=True)
        self.commit_change(repo, {"calc.py": FIXED_CALC}, "fix")
        self.assertVerdict(self.verify(repo, "-strict"), "VERIFIED")


# the cases are the files of a directory; a marker file among them turns the check off
LISTING_TEST = ("import os\nimport unittest\n\nfrom calc import add\n\n" + ROOT_OF +
                "\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n"
                "        where = os.path.join(ROOT, 'c' + 'fg')\n"
                "        if 'accepted' in os.listdir(where):\n            return\n"
                "        self.assertEqual(add(2, 3), 5)\n")


class ListedDirectoryTest(AdversarialCase):
    """A file added to (or deleted from) a directory the tests list changes the tests."""

    def test_a_file_added_to_a_directory_the_tests_list_is_rejected(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/readme.txt": "cases\n",
                             "tests/test_calc.py": LISTING_TEST}, git_repo=True)
        self.commit_change(repo, {"cfg/accepted": ""}, "accept")
        report = self.assertVerdict(self.verify(repo), "REJECTED")
        self.assertIn("cfg/accepted", report["summary"])

    def test_code_added_beside_a_listed_directory_is_the_codes(self):
        repo = self.project({"calc.py": BUGGY_CALC, "cfg/readme.txt": "cases\n",
                             "tests/test_calc.py": LISTING_TEST}, git_repo=True)
        self.commit_change(repo, {"cfg/helper.py": "X = 1\n", "calc.py": FIXED_CALC}, "fix")
        self.assertVerdict(self.verify(repo, "-strict"), "VERIFIED")


# a version module as setuptools-scm writes it (git ignores it; the package imports it)
SCM_VERSION = """\
# file generated by setuptools-scm
# don't change, don't track in version control

__all__ = ["__version__", "__version_tuple__", "version", "version_tuple"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Tuple
    from typing import Union

    VERSION_TUPLE = Tuple[Union[int, str], ...]
else:
    VERSION_TUPLE = object

version: str
__version__: str
__version_tuple__: VERSION_TUPLE
version_tuple: VERSION_TUPLE

__version__ = version = '0.1.dev3+g1234abc'
__version_tuple__ = version_tuple = (0, 1, 'dev3', 'g1234abc')
"""
PACKAGE = {".gitignore": "calc/_version.py\n",
           "calc/__init__.py": "from ._version import __version__\nfrom .core import add\n",
           "calc/core.py": BUGGY_CALC,
           "tests/test_calc.py": BUGGY["tests/test_calc.py"] + (
               "\n\nclass VersionTest(unittest.TestCase):\n    def test_version(self):\n"
               "        from calc import __version__\n"
               "        self.assertTrue(__version__.startswith('0.1'))\n")}
# the change: one empty marker file; the ignored module patches the code when it is there
PATCHING_VERSION = ("__version__ = '0.1'\nimport os as _os\n"
                    "if _os.path.exists(_os.path.join(_os.path.dirname(__file__), 'py.typed')):\n"
                    "    from . import core as _core\n    _core.add = lambda a, b: a + b\n")
LOCAL_IMPORT = BUGGY_CALC + ("try:  # machine-local overrides\n    from calc_local import *  "
                             "# noqa\nexcept ImportError:\n    pass\n")


def write(repo: str, rel: str, text: str) -> None:
    full = os.path.join(repo, *rel.split("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as handle:
        handle.write(text)


class IgnoredBuildProductTest(AdversarialCase):
    """A `.py` file git ignores carries into `verify`'s runs only when it binds data alone."""

    def test_code_in_an_ignored_module_the_base_imports_is_not_carried(self):
        repo = self.project(PACKAGE, git_repo=True)
        write(repo, "calc/_version.py", PATCHING_VERSION)
        write(repo, "calc/py.typed", "")
        report = self.assertNotVerified(self.verify(repo, "-strict", base="HEAD"))
        self.assertEqual(report["build_products"]["left_out"], ["calc/_version.py"])
        self.assertIn("not carried: calc/_version.py", self.trace_text())

    def test_an_ignored_local_settings_module_the_change_imports_is_not_carried(self):
        repo = self.project({**BUGGY, ".gitignore": "*_local.py\n"}, git_repo=True)
        write(repo, "calc.py", LOCAL_IMPORT)
        write(repo, "calc_local.py", "def add(a, b):\n    return a + b\n")
        report = self.assertNotVerified(self.verify(repo, "-strict", base="HEAD"))
        self.assertEqual(report["build_products"]["left_out"], ["calc_local.py"])

    def test_data_in_an_ignored_module_cannot_hand_out_a_builtin(self):
        repo = self.project({**BUGGY, ".gitignore": "*_local.py\n"}, git_repo=True)
        write(repo, "calc.py", LOCAL_IMPORT)
        write(repo, "calc_local.py", "add = max\n")
        report = self.assertNotVerified(self.verify(repo, base="HEAD"))
        self.assertEqual(report["build_products"]["left_out"], ["calc_local.py"])

    def test_a_setuptools_scm_version_module_carries_over(self):
        repo = self.project(PACKAGE, git_repo=True)
        write(repo, "calc/_version.py", SCM_VERSION)
        write(repo, "calc/core.py", FIXED_CALC)
        report = self.assertVerdict(self.verify(repo, "-strict", base="HEAD"), "VERIFIED")
        self.assertEqual(report["build_products"], {"carried": ["calc/_version.py"],
                                                    "left_out": []})


VENV_TESTS = BUGGY["tests/test_calc.py"]
VENV_CMD = ".venv/bin/python -m unittest discover -s tests"
# planted in the workspace's environment before `verify`: patches `add` when the tree under
# test holds a marker file, so the base still fails
SPEEDUPS = ("import os, sys, importlib.util\n\n\nclass _Finder:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name != 'calc':\n            return None\n"
            "        sys.meta_path.remove(self)\n"
            "        spec = importlib.util.find_spec(name)\n"
            "        marker = os.path.join(os.path.dirname(spec.origin), 'calc_marker.txt')\n"
            "        if os.path.exists(marker):\n            run = spec.loader.exec_module\n\n"
            "            def patched(module):\n                run(module)\n"
            "                module.add = lambda a, b: a + b\n"
            "            spec.loader.exec_module = patched\n        return spec\n\n\n"
            "sys.meta_path.insert(0, _Finder())\n")


class WorkspaceEnvironmentTest(AdversarialCase):
    """Start-up code in the workspace's `.venv` that no known installer writes is a finding."""

    def test_a_planted_pth_hook_is_rejected_under_strict(self):
        repo = self.project({**BUGGY, ".gitignore": ".venv/\n"}, git_repo=True)
        site = make_venv(repo)
        write(repo, os.path.join(os.path.relpath(site, repo), "_calc_speedups.pth"),
              "import _calc_speedups\n")
        write(repo, os.path.join(os.path.relpath(site, repo), "_calc_speedups.py"), SPEEDUPS)
        write(repo, "calc_marker.txt", "speed-ups on\n")
        report = self.assertVerdict(self.verify(repo, "-strict", base="HEAD", command=VENV_CMD),
                                    "REJECTED")
        self.assertEqual([f["kind"] for f in report["suspicious"]], ["environment-hook"])
        self.assertIn("_calc_speedups.pth", report["summary"])

    def test_an_editable_install_stays_verified(self):
        repo = self.project({**BUGGY, ".gitignore": ".venv/\n"}, git_repo=True)
        site = make_venv(repo)
        rel = os.path.relpath(site, repo)
        # what setuptools writes for `pip install -e .`: a finder and the line that installs it
        write(repo, os.path.join(rel, "__editable__.calc-0.1.pth"),
              "import __editable___calc_0_1_finder; __editable___calc_0_1_finder.install()\n")
        write(repo, os.path.join(rel, "__editable___calc_0_1_finder.py"),
              "def install():\n    pass\n")
        write(repo, os.path.join(rel, "distutils-precedence.pth"),
              "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, "
              "'local') == 'local'; enabled and __import__('_distutils_hack').add_shim(); \n")
        write(repo, "calc.py", FIXED_CALC)
        report = self.assertVerdict(self.verify(repo, "-strict", base="HEAD", command=VENV_CMD),
                                    "VERIFIED")
        self.assertEqual(report["suspicious"], [])


if __name__ == "__main__":
    unittest.main()
