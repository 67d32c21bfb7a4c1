"""golem's own suite runs under the budgets and the sandbox: -wall bounds the baseline and the
verification, a test command that cannot start stops before any model call, and a test
interpreter that lives under /tmp still runs inside bubblewrap."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import unittest

from tests.fixtures import BUGGY, FIX_EDIT, GolemCase, last_json, make_repo, run_cli
from tests.provider_server import chat
from tests.test_security import bwrap_or_skip

HANGS = BUGGY["tests/test_calc.py"] + """

class SlowTest(unittest.TestCase):
    def test_hangs(self):
        import time
        time.sleep(120)
"""
# the fix, plus code that sleeps only when it runs from golem's verification copy
SLEEPS_IN_THE_COPY = """\
import time

if "golem-verify" in __file__:
    time.sleep(120)


def add(a, b):
    return a + b
"""


class WallTest(GolemCase):
    def args(self, repo, server, *extra):
        return ["fix", "-dir", repo, "-test", "python3 -m unittest discover -s tests",
                "-provider", "openai", "-base-url", server.url, "-sandbox", "none", "-json",
                *extra]

    def test_a_baseline_that_hangs_is_cut_at_the_wall_before_any_model_call(self):
        repo = make_repo(self.tmp, {**BUGGY, "tests/test_calc.py": HANGS})
        server = self.serve([chat("never asked")])
        started = time.monotonic()
        code, out, err = run_cli(self.args(repo, server, "-wall", "4s"))
        took = time.monotonic() - started
        self.assertEqual(code, 2, err)
        self.assertIn("-wall", err)
        self.assertEqual(len(err.strip().splitlines()[-1:]), 1)
        self.assertTrue(err.strip().splitlines()[-1].startswith("golem: "), err)
        self.assertLess(took, 120.0)        # the hanging test was cut, not waited out
        self.assertEqual(server.requests, [])

    def test_a_verification_that_hangs_is_failed_within_the_wall(self):
        # the wall doubles until the model's write was made: on a loaded machine the baseline
        # can spend the agent's share of a short one, and then nothing hangs
        for wall in (10, 20, 40):
            repo = make_repo(self.tmp, name=f"repo-{wall}")
            server = self.serve([chat(tool_calls=[("write_file", {
                "path": "calc.py", "content": SLEEPS_IN_THE_COPY})]), chat("fixed")])
            started = time.monotonic()
            code, out, err = run_cli(self.args(repo, server, "-wall", f"{wall}s"))
            took = time.monotonic() - started
            if len(server.requests) == 2:
                break
        report = last_json(out)
        self.assertEqual((report["verdict"], code), ("FAILED", 1), report["summary"])
        self.assertIn("-wall", report["summary"])
        self.assertLess(took, 120.0)        # the copy's sleep was cut, not waited out


class CannotStartTest(GolemCase):
    def fix_with(self, command: str):
        repo = make_repo(self.tmp, name=f"repo{len(os.listdir(self.tmp))}")
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", command, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", "none"])
        return code, out, err, server

    def test_a_program_that_is_not_installed(self):
        code, out, err, server = self.fix_with("nosuchprog-golem --run")
        self.assertEqual(code, 2, err)
        self.assertIn("cannot start", err)
        self.assertIn("nosuchprog-golem", err)
        self.assertEqual(server.requests, [])
        self.assertEqual(out, "")

    def test_a_runner_the_interpreter_does_not_have(self):
        venv = os.path.join(self.tmp, "bare-venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        code, out, err, server = self.fix_with(f"{venv}/bin/python -m pytest")
        self.assertEqual(code, 2, err)
        self.assertIn("the test runner cannot be imported", err)
        self.assertIn("has no module 'pytest'", err)
        self.assertEqual(server.requests, [])


class InterpreterUnderTmpTest(GolemCase):
    """A virtual environment outside the workspace, under /tmp, which bubblewrap's private
    /tmp would hide: golem binds the test interpreter's directories back, read-only."""

    def setUp(self):
        super().setUp()
        bwrap_or_skip(self)
        self.venv = tempfile.mkdtemp(prefix="golem-venv-", dir="/tmp")
        self.addCleanup(subprocess.run, ["rm", "-rf", self.venv])
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", self.venv], check=True)

    def fix(self, command: str, env=None):
        repo = make_repo(self.tmp, name=f"repo{len(os.listdir(self.tmp))}")
        server = self.serve([chat(tool_calls=[FIX_EDIT]), chat(tool_calls=[("run_tests", {})]),
                             chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", command, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", "bwrap", "-json"], env)
        return code, last_json(out), server

    def test_the_venv_named_by_path(self):
        code, report, server = self.fix(f"{self.venv}/bin/python -m unittest discover -s tests")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        # the model's own test run worked inside the sandbox too
        tool = [m for m in server.requests[2]["body"]["messages"] if m.get("role") == "tool"]
        self.assertIn("tests passed", tool[-1]["content"])

    def test_the_venv_on_path(self):
        path = f"{self.venv}/bin:{os.environ.get('PATH', '')}"
        code, report, _ = self.fix("python -m unittest discover -s tests", {"PATH": path})
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])


if __name__ == "__main__":
    unittest.main()
