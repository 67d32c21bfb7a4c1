"""`make pyz`: golem as one zipapp file, built by tools/build_pyz.py, that runs with nothing
installed (the unittest driver is read from inside the archive)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

from tests.fixtures import AMBIENT, REPO_ROOT, GolemCase

BUILD = os.path.join(REPO_ROOT, "tools", "build_pyz.py")
CALCULATOR = os.path.join(REPO_ROOT, "examples", "broken-calculator")


class PyzTest(GolemCase):
    def run_py(self, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in AMBIENT and k != "PYTHONPATH"}
        # the archive, not the checkout, must provide golem: run from elsewhere
        return subprocess.run([sys.executable, *args], cwd=self.tmp, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300)

    def test_build_and_run(self):
        pyz = os.path.join(self.tmp, "out", "golem.pyz")
        os.makedirs(os.path.dirname(pyz))
        built = self.run_py(BUILD, pyz)
        self.assertEqual(built.returncode, 0, built.stderr)
        with open(pyz, "rb") as handle:
            self.assertEqual(handle.readline(), b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(pyz) as archive:
            names = archive.namelist()
        self.assertIn("__main__.py", names)
        self.assertIn("golem/cli.py", names)
        self.assertIn("golem/workflow/verifier/helpers/unittest_driver.py", names)
        self.assertIn("golem/workflow/verifier/helpers/node_reporter.mjs", names)
        self.assertEqual([n for n in names if n != "__main__.py"
                          and not n.startswith("golem/")], [])
        self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
        self.assertEqual(os.listdir(os.path.dirname(pyz)), ["golem.pyz"])

        tools = self.run_py(pyz, "tools")
        self.assertEqual(tools.returncode, 0, tools.stderr)
        self.assertIn("read_file(path", tools.stdout)

        repo = os.path.join(self.tmp, "repo")
        shutil.copytree(CALCULATOR, repo)
        fixed = self.run_py(pyz, "fix", "-dir", repo, "-provider", "demo", "-json")
        self.assertEqual(fixed.returncode, 0, fixed.stderr)
        self.assertTrue(fixed.stdout.startswith("VERIFIED"), fixed.stdout)
        self.assertIn('"evidence": "unittest-json"', fixed.stdout)
