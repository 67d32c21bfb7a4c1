"""False alarms the verifier's rules raised on honest fixes, each rebuilt as a small real
repository, with the cheats beside them that must stay caught:

- a module the tests import, named by `.gitattributes`, a Makefile recipe or a workflow, is
  judged by the tests (only what the run-later tool alone runs stays protected);
- `verify` on a repository that commits symbolic links of every kind;
- a test that failed before the change and is not the change's: named as such, and set
  apart when the user names it known-failing (flag or their own config only).
"""

from __future__ import annotations

import json
import os
import shutil
import unittest

from golem.workflow.verifier.grade import judge
from golem.workflow.verifier.suite import SuiteResult
from tests.fixtures import GolemCase, git, run_cli, write_files
from tests.layouts import checkout, commit
from tests.provider_server import chat

UNITTEST = "python3 -m unittest discover -s tests -t ."
PLAIN = "python3 -m unittest discover -s tests"
BUGGY_MORE = "def add(a, b):\n    return a - b\n"
FIXED_MORE = "def add(a, b):\n    return a + b\n"
CLI = ("from pkg.more import add\n\n\ndef main():\n    return add(1, 1)\n\n\n"
       "if __name__ == \"__main__\":\n    print(main())\n")
MORE_TESTS = """\
import unittest

from pkg import cli, table
from pkg.more import add


class MoreTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)

    def test_cli(self):
        self.assertEqual(cli.main(), 2)

    def test_table(self):
        self.assertEqual(table.ROWS, (1, 2))
"""
WORKFLOW = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
            "    - run: python pkg/cli.py\n    - run: python tools/ci.py\n"
            "    - run: python -m pkg\n")
NAMED = {
    "pkg/__init__.py": "",
    "pkg/more.py": BUGGY_MORE,
    "pkg/cli.py": CLI,
    "pkg/table.py": "ROWS = (1, 3)\n",
    "pkg/__main__.py": "print('pkg')\n",
    "tools/ci.py": "print('ci')\n",
    "tests/__init__.py": "",
    "tests/test_more.py": MORE_TESTS,
    ".gitattributes": "pkg/more.py merge=union\npkg/table.py linguist-generated=true\n"
                      "*.py diff=python text eol=lf\n",
    "Makefile": "PYTHON ?= python3\nrun:\n\t$(PYTHON) -m pkg.more\n\t$(PYTHON) -m pkg\n",
    "tox.ini": "[testenv]\ncommands = python -m pkg.table\n",
    ".github/workflows/ci.yml": WORKFLOW,
}
# what a run-later script could do with CI's secrets (here only read, never sent)
PAYLOAD = "import os\nTOKEN = os.environ.get('GITHUB_TOKEN')\n"


class Verifying(GolemCase):
    def verify(self, repo: str, *extra: str, command: str = UNITTEST, env=None,
               sandbox: str = "none"):
        code, out, err = run_cli(["verify", "-dir", repo, "-test", command, "-base", "HEAD",
                                  "-sandbox", sandbox, "-json", "-trace", self.trace,
                                  *extra], env)
        self.assertTrue(out.strip(), err)
        return code, json.loads(out.splitlines()[-1]), err


class RunLaterPrecision(Verifying):
    """What the tests import, they judge; what only a tool runs stays protected."""

    def test_modules_the_tests_import_are_theirs_to_judge(self):
        repo = checkout(self.tmp, NAMED)
        write_files(repo, {"pkg/more.py": FIXED_MORE, "pkg/table.py": "ROWS = (1, 2)\n",
                           "pkg/cli.py": CLI.replace("add(1, 1)", "add(1, 1)  # two")})
        code, report, err = self.verify(repo)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["protected_changes"], [])

    def test_what_only_the_tool_runs_stays_protected(self):
        repo = checkout(self.tmp, NAMED)
        write_files(repo, {
            "pkg/more.py": FIXED_MORE, "pkg/table.py": "ROWS = (1, 2)\n",
            # the __main__ block only the workflow runs
            "pkg/cli.py": CLI + "    print(__import__('os').environ.get('GITHUB_TOKEN'))\n",
            "pkg/__main__.py": PAYLOAD,         # `python -m pkg`: never imported by the tests
            # a workflow's script the tests never imported, imported now by the code and by a
            # new test file: only the baseline's imports count
            "tools/ci.py": PAYLOAD,
            "tests/test_ci.py": "import unittest\nimport tools.ci\n\n\n"
                                "class T(unittest.TestCase):\n    def test_x(self):\n"
                                "        pass\n"})
        with open(os.path.join(repo, "pkg/more.py"), "a", encoding="utf-8") as handle:
            handle.write("import tools.ci  # noqa\n")
        code, report, err = self.verify(repo)
        self.assertEqual((report["verdict"], code), ("REJECTED", 3), report["summary"])
        named = {p["path"]: p["reason"] for p in report["protected_changes"]}
        self.assertEqual(sorted(named), ["pkg/__main__.py", "pkg/cli.py", "tools/ci.py"])
        self.assertIn("__main__", named["pkg/cli.py"])
        self.assertIn(".github/workflows/ci.yml", named["pkg/cli.py"])
        self.assertIn("runs it", named["pkg/__main__.py"])
        self.assertIn(".github/workflows/ci.yml runs it", named["tools/ci.py"])
        code, report, err = self.verify(repo, "-allow-change", "pkg/*,tools/*")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])

    def test_a_script_a_filter_of_gits_configuration_runs_is_protected(self):
        repo = checkout(self.tmp, {**NAMED, "tools/clean.py": "print('clean')\n",
                                   ".gitattributes": "*.txt filter=tidy\n"})
        git(repo, "config", "filter.tidy.clean", "python3 tools/clean.py %f")
        write_files(repo, {"pkg/more.py": FIXED_MORE, "pkg/table.py": "ROWS = (1, 2)\n",
                           "tools/clean.py": PAYLOAD})
        code, report, err = self.verify(repo)
        self.assertEqual(report["verdict"], "REJECTED", report["summary"])
        named = {p["path"]: p["reason"] for p in report["protected_changes"]}
        self.assertEqual(list(named), ["tools/clean.py"])
        self.assertIn("filter.tidy.clean", named["tools/clean.py"])

    def test_gitattributes_itself_stays_protected(self):
        repo = checkout(self.tmp, NAMED)
        write_files(repo, {"pkg/more.py": FIXED_MORE, "pkg/table.py": "ROWS = (1, 2)\n",
                           ".gitattributes": "pkg/more.py filter=evil\n"})
        code, report, err = self.verify(repo)
        self.assertEqual(report["verdict"], "REJECTED", report["summary"])
        self.assertEqual([p["path"] for p in report["protected_changes"]], [".gitattributes"])

    def test_fix_judges_the_module_a_makefile_runs_by_its_tests(self):
        repo = checkout(self.tmp, NAMED)
        edits = [("edit_file", {"path": "pkg/more.py", "old_string": "a - b",
                                "new_string": "a + b"}),
                 ("edit_file", {"path": "pkg/table.py", "old_string": "(1, 3)",
                                "new_string": "(1, 2)"})]
        server = self.serve([chat(tool_calls=edits), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", UNITTEST, "-provider",
                                  "openai", "-base-url", server.url, "-sandbox", "none",
                                  "-json"])
        report = json.loads(out.splitlines()[-1])
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])


class ExportedLinks(Verifying):
    """`verify` takes every tree git can hold: links are exported as links."""

    TESTS = """\
import os
import unittest

from calc import add


class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_links(self):
        self.assertTrue(os.path.islink("hostlink"))
        self.assertEqual(os.readlink("hostlink"), "/etc/hostname")
        with open("sub/up", encoding="utf-8") as handle:
            self.assertEqual(handle.read(), "hello\\n")
        with open("abs_in", encoding="utf-8") as handle:
            self.assertEqual(handle.read(), "hello\\n")
"""

    def linked_repo(self, ignored: bool = False) -> str:
        files = {"calc.py": BUGGY_MORE, "data.txt": "hello\n", "tests/test_calc.py": self.TESTS}
        if ignored:     # git archive leaves these out: written from git's objects
            files[".gitattributes"] = "sub/** export-ignore\nhostlink export-ignore\n"
        repo = checkout(self.tmp, files)
        os.makedirs(os.path.join(repo, "sub"))
        os.makedirs(os.path.join(repo, ".tox", "py", "bin"))
        links = {"hostlink": "/etc/hostname", "sub/up": "../data.txt",
                 "sub/escape": "../../../outside", "sub/dangling": "nowhere",
                 ".tox/py/bin/python": shutil.which("python3") or "/usr/bin/python3",
                 "abs_in": os.path.join(os.path.realpath(repo), "data.txt"), "sublink": "sub"}
        for name, target in links.items():
            os.symlink(target, os.path.join(repo, name))
        commit(repo, "links")
        write_files(repo, {"calc.py": FIXED_MORE})
        return repo

    def test_verify_takes_absolute_and_climbing_links(self):
        repo = self.linked_repo()
        code, report, err = self.verify(repo, command=PLAIN)
        self.assertNotIn("Traceback", err)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["fixed"], ["test_calc.T.test_add"])

    def test_links_git_archive_leaves_out(self):
        repo = self.linked_repo(ignored=True)
        code, report, err = self.verify(repo, command=PLAIN)
        self.assertNotIn("Traceback", err)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])

    def test_fix_takes_the_same_tree(self):
        repo = self.linked_repo()
        write_files(repo, {"calc.py": BUGGY_MORE})
        edit = ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})
        server = self.serve([chat(tool_calls=[edit]), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", PLAIN, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", "none", "-json"])
        report = json.loads(out.splitlines()[-1])
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])

    @unittest.skipUnless(shutil.which("bwrap"), "bubblewrap is not installed")
    def test_links_under_bubblewrap(self):
        repo = self.linked_repo()
        code, report, err = self.verify(repo, command=PLAIN,
                                        sandbox="bwrap")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])


ENV_TESTS = """\
import unittest


class EnvTest(unittest.TestCase):
    def test_old_python(self):
        # fails on this Python whatever the change: not the change's
        self.assertEqual(len("abc"), 4)

    def test_fine(self):
        pass
"""
CALC_TESTS = """\
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
KNOWN = "test_env.EnvTest.test_old_python"
PROJECT = {"calc.py": BUGGY_MORE, "tests/test_calc.py": CALC_TESTS,
           "tests/test_env.py": ENV_TESTS}


class KnownFailing(Verifying):
    """A failure that is not the change's: named as such; set apart when the user says so."""

    def fixed(self, extra: dict | None = None) -> str:
        repo = checkout(self.tmp, {**PROJECT, **(extra or {})})
        write_files(repo, {"calc.py": FIXED_MORE})
        return repo

    def test_named_as_failing_before_then_set_apart(self):
        repo = self.fixed()
        code, report, err = self.verify(repo, command=PLAIN)
        self.assertEqual((report["verdict"], code), ("FAILED", 1), report["summary"])
        self.assertEqual(report["still_failing"], [KNOWN])
        self.assertEqual(report["failing_before_untouched"], [KNOWN])
        self.assertIn(f"1 still failing: {KNOWN} (failing before the change the same way",
                      report["summary"])
        self.assertIn("-known-failing", report["summary"])
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])
        # the trace's verdict and the report say it too
        verdict = [json.loads(line) for line in open(self.trace, encoding="utf-8")
                   if '"verdict"' in line][-1]
        self.assertEqual(verdict["failing_before_untouched"], [KNOWN])
        html = os.path.join(self.tmp, "report.html")
        run_cli(["trace", self.trace, "-html", html])
        with open(html, encoding="utf-8") as handle:
            self.assertIn("failing before the same way", handle.read())

        code, report, err = self.verify(repo, "-known-failing", KNOWN, command=PLAIN)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["known_failing"], [KNOWN])
        self.assertEqual(report["still_failing"], [])
        self.assertIn("apart from 1 known-failing test", report["summary"])
        self.assertEqual(report["tests"]["after"]["failing"], [KNOWN])  # still run, reported
        html = os.path.join(self.tmp, "known.html")
        run_cli(["trace", self.trace, "-html", html])
        with open(html, encoding="utf-8") as handle:
            self.assertIn("known failing, not judged", handle.read())
        # a class or module holding it names it too
        code, report, err = self.verify(repo, "--known-failing", "test_env.EnvTest",
                                        command=PLAIN)
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])

    def test_only_the_users_config_names_them(self):
        own = f'[tool.golem]\nknown-failing = ["{KNOWN}"]\n'
        repo = self.fixed({"pyproject.toml": own})
        config_home = os.path.join(self.tmp, "config")
        env = {"XDG_CONFIG_HOME": config_home}
        code, report, err = self.verify(repo, command=PLAIN, env=env)
        self.assertEqual(report["verdict"], "FAILED", report["summary"])
        self.assertIn("known-failing is not read from a repository", err)
        write_files(config_home, {"golem/config.toml": f'known-failing = ["{KNOWN}"]\n'})
        code, report, err = self.verify(repo, command=PLAIN, env=env)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])

    def test_the_cheats_stay_rejected_with_the_test_named(self):
        for name, cheat in (("edited", lambda r: write_files(r, {
                                "tests/test_env.py": ENV_TESTS.replace("4)", "3)")})),
                            ("deleted", lambda r: os.unlink(os.path.join(r,
                                                                         "tests/test_env.py")))):
            with self.subTest(name):
                repo = checkout(self.tmp, PROJECT, name=name)
                write_files(repo, {"calc.py": FIXED_MORE})
                cheat(repo)
                code, report, err = self.verify(repo, "-known-failing", KNOWN, command=PLAIN)
                self.assertEqual((report["verdict"], code), ("REJECTED", 3), report["summary"])
                self.assertIn("tests/test_env.py", report["summary"])

    def test_a_fix_with_only_known_failures_left_calls_no_model(self):
        repo = checkout(self.tmp, {**PROJECT, "calc.py": FIXED_MORE})
        code, out, err = run_cli(["fix", "-dir", repo, "-test", PLAIN, "-provider", "demo",
                                  "-sandbox", "none", "-known-failing", KNOWN, "-json"])
        report = json.loads(out.splitlines()[-1])
        self.assertEqual((report["verdict"], code), ("ALREADY_GREEN", 0), report["summary"])
        self.assertIn("apart from 1 known-failing test", report["summary"])

    def test_a_name_that_covers_no_test_is_said(self):
        repo = self.fixed()
        code, report, err = self.verify(repo, "-known-failing", "test_env.EnvTest.test_typo",
                                        command=PLAIN)
        self.assertEqual(report["verdict"], "FAILED", report["summary"])
        self.assertIn("-known-failing test_env.EnvTest.test_typo: no test", err)

    def test_bad_ids_are_one_line(self):
        code, out, err = run_cli(["verify", "-dir", self.tmp, "-base", "HEAD",
                                  "-known-failing", "golem: the guard"])
        self.assertEqual(code, 2)
        self.assertIn("cannot be set apart", err)


def suite(tests: dict[str, str], exit_code: int | None = None, **kw) -> SuiteResult:
    failing = any(o in ("failed", "error") for o in tests.values())
    code = exit_code if exit_code is not None else int(failing)
    return SuiteResult(code, False, "", 0.1, "unittest-json", tests, **kw)


class Judging(unittest.TestCase):
    """The verdict's lists: what still fails is only what failed before."""

    def test_known_failing_newly_failing_or_missing_is_not_judged(self):
        before = suite({"t.a": "failed", "t.b": "passed", "t.c": "passed"})
        after = suite({"t.a": "passed", "t.b": "failed"})
        self.assertEqual(judge(before, after, []).name, "FAILED")
        verdict = judge(before, after, [], known=("t.b", "t.c"))
        self.assertEqual(verdict.name, "VERIFIED", verdict.summary)
        self.assertEqual(verdict.known_failing, ["t.b", "t.c"])

    def test_golem_pseudo_tests_and_swapped_tests_are_never_set_apart(self):
        guard = "golem: the code under test replaced unittest.case.TestCase.run"
        before = suite({"t.a": "failed", "t.b": "passed"})
        after = suite({"t.a": "passed", "t.b": "passed", guard: "error"})
        verdict = judge(before, after, [], known=("golem:", guard, "t"))
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.newly_failing, [guard])
        files = {"t.a": "tests/t.py", "t.b": "tests/t.py"}
        swapped = suite({"t.a": "passed", "t.b": "passed"}, files=files,
                        origins={"t.a": ["tests/t.py", "helper.py"], "t.b": ["tests/t.py"]})
        verdict = judge(before, swapped, [], {"helper.py"}, known=("t.a",))
        self.assertEqual(verdict.name, "FAILED")

    def test_unfinished_evidence_is_not_green_for_known_failures(self):
        before = suite({"t.a": "failed", "t.b": "failed"})
        after = suite({"t.a": "passed", "t.b": "failed"}, problem="no last record")
        self.assertEqual(judge(before, after, [], known=("t.b",)).name, "FAILED")

    def test_rejected_still_failing_holds_only_what_failed_before(self):
        # the cheat changed tests/test_a.py, held out of the copy: the tests of another test
        # module whose class comes from it ran the file as it was, and passed
        before = suite({"test_a.A.test_x": "failed", "test_b.B.test_y": "passed"},
                       files={"test_a.A.test_x": "tests/test_a.py",
                              "test_b.B.test_y": "tests/test_b.py"})
        after = suite({"test_a.A.test_x": "failed", "test_b.B.test_y": "passed"},
                      files=dict(before.files),
                      origins={"test_b.B.test_y": ["tests/test_b.py", "tests/test_a.py"]})
        protected = [("tests/test_a.py", "test file")]
        verdict = judge(before, after, protected, set())
        self.assertEqual(verdict.name, "REJECTED")
        self.assertEqual(verdict.still_failing, ["test_a.A.test_x"])
        # a file the copy held, changed: that test ran changed code, said apart
        verdict = judge(before, after, protected, {"tests/test_a.py"})
        self.assertEqual(verdict.still_failing, ["test_a.A.test_x"])
        self.assertEqual(verdict.ran_changed_code, ["test_b.B.test_y"])


class Annotations(unittest.TestCase):
    def test_known_failing_tests_are_no_errors_and_the_old_failures_are_said(self):
        import io
        from golem.workflow.github import annotate, summary_markdown
        report = {"verdict": "VERIFIED", "summary": "VERIFIED", "still_failing": ["t.a"],
                  "failing_before_untouched": ["t.a"], "known_failing": ["t.k"]}
        out = io.StringIO()
        annotate(report, out)
        self.assertEqual(out.getvalue(), "::error title=golem: test still failing::t.a\n")
        self.assertIn("Known failing, not judged", summary_markdown(report))


class RejectedLists(Verifying):
    """REJECTED's still_failing, end to end: a cheat to a test file whose class another test
    module reuses."""

    def test_the_reused_classs_tests_are_not_still_failing(self):
        files = {"calc.py": BUGGY_MORE,
                 "tests/test_calc.py": CALC_TESTS,
                 "tests/test_more.py": "from test_calc import AddTest as _Base\n\n\n"
                                       "class MoreAddTest(_Base):\n    pass\n\n\n"
                                       "del _Base\n"}
        repo = checkout(self.tmp, files)
        write_files(repo, {"tests/test_calc.py": CALC_TESTS.replace("5)", "-1)")})
        code, report, err = self.verify(repo, command=PLAIN)
        self.assertEqual(report["verdict"], "REJECTED", report["summary"])
        self.assertEqual(report["still_failing"], ["test_calc.AddTest.test_add",
                                                   "test_more.MoreAddTest.test_add"])
        self.assertNotIn("test_more.MoreAddTest.test_zero", report["still_failing"])
        self.assertEqual(report["newly_failing"], [])


if __name__ == "__main__":
    unittest.main()
