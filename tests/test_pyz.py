"""golem as people get it: `make pyz` (one zipapp file that runs with nothing installed, the
unittest driver and the bundled example read from inside the archive) and `pip install`
(the package data shipped), each running `golem demo` from somewhere else entirely."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

from tests.fixtures import AMBIENT, REPO_ROOT, GolemCase


class Shipped(GolemCase):
    def setUp(self):
        super().setUp()
        # `golem demo` makes its temporary copy here, so the test can see it go
        self.scratch = os.path.join(self.tmp, "scratch")
        os.mkdir(self.scratch)
        self.elsewhere = os.path.join(self.tmp, "elsewhere")
        os.mkdir(self.elsewhere)

    def run_py(self, *args: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in AMBIENT and k != "PYTHONPATH"}
        env.update(TMPDIR=self.scratch, **(extra_env or {}))
        # the archive or the installed copy, not the checkout, must provide golem
        return subprocess.run([sys.executable, *args], cwd=self.elsewhere, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300)

    def check_demo(self, done: subprocess.CompletedProcess) -> None:
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(done.stdout.startswith("VERIFIED"), done.stdout)
        self.assertIn('"evidence": "unittest-json"', done.stdout)
        self.assertIn("calculator/core.py", done.stderr)     # the diff at the end
        report = json.loads(done.stdout.splitlines()[-1])
        self.assertIsNone(report["run_id"])                 # its run went with the copy
        self.assertNotIn("golem undo", done.stderr)
        self.assertEqual(os.listdir(self.scratch), [])       # the copy went
        self.assertEqual(os.listdir(self.elsewhere), [])     # nothing written where it ran


class PyzTest(Shipped):
    def test_build_and_run(self):
        pyz = os.path.join(self.tmp, "out", "golem.pyz")
        os.makedirs(os.path.dirname(pyz))
        built = subprocess.run(["make", "-s", "pyz", f"PYZ={pyz}", f"PYTHON={sys.executable}"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        self.assertEqual(built.returncode, 0, built.stderr)
        with open(pyz, "rb") as handle:
            self.assertEqual(handle.readline(), b"#!/usr/bin/env python3\n")
        with zipfile.ZipFile(pyz) as archive:
            names = archive.namelist()
        self.assertIn("__main__.py", names)
        self.assertIn("golem/cli/__init__.py", names)
        self.assertIn("golem/llm/prices.json", names)
        self.assertIn("golem/examples/broken-calculator/calculator/core.py", names)
        self.assertIn("golem/workflow/verifier/helpers/unittest_driver.py", names)
        self.assertIn("golem/workflow/verifier/helpers/node_reporter.mjs", names)
        self.assertEqual([n for n in names if n != "__main__.py"
                          and not n.startswith("golem/")], [])
        self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
        self.assertEqual(os.listdir(os.path.dirname(pyz)), ["golem.pyz"])

        tools = self.run_py(pyz, "tools")
        self.assertEqual(tools.returncode, 0, tools.stderr)
        self.assertIn("read_file(path", tools.stdout)
        bad = self.run_py(pyz, "fix", "-nosuch")     # the exit code comes through the archive
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertEqual(bad.stderr.count("\n"), 1, bad.stderr)

        self.check_demo(self.run_py(pyz, "demo", "-json"))
        # the archive carries the command-line reference
        reference = self.run_py(pyz, "help", "cli")
        self.assertEqual(reference.returncode, 0, reference.stderr)
        with open(os.path.join(REPO_ROOT, "docs", "cli.md"), encoding="utf-8") as handle:
            self.assertEqual(reference.stdout, handle.read())


def builds_wheels() -> bool:
    """Whether this interpreter's setuptools can build a wheel without a download: it has
    `bdist_wheel` built in (70.1 and later) or the `wheel` package beside it."""
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    return parts >= (70, 1) or importlib.util.find_spec("wheel") is not None


class InstalledTest(Shipped):
    def test_pip_install_then_demo(self):
        # a copy of the sources, so the build's own files never land in the checkout
        source = os.path.join(self.tmp, "source")
        shutil.copytree(os.path.join(REPO_ROOT, "golem"), os.path.join(source, "golem"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy(os.path.join(REPO_ROOT, name), source)
        site = os.path.join(self.tmp, "site")
        env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "TMPDIR": self.tmp}
        if builds_wheels():
            command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                       "--no-build-isolation", "--disable-pip-version-check", "--target", site,
                       source]
        elif importlib.util.find_spec("setuptools") is None:
            self.skipTest("this Python has neither a wheel builder nor setuptools")
        else:
            # a stock Python 3.11 (setuptools 65, no `wheel`) cannot build a wheel offline,
            # so setuptools installs from the same build configuration, as pip once had it do
            command = [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q",
                       "install", "--single-version-externally-managed",
                       "--record", os.path.join(self.tmp, "record.txt"),
                       "--install-lib", site, "--install-scripts", os.path.join(site, "bin")]
        installed = subprocess.run(command, cwd=source, capture_output=True, text=True,
                                   timeout=300, env=env)
        self.assertEqual(installed.returncode, 0, installed.stderr)
        self.assertTrue(os.path.isfile(os.path.join(site, "golem", "llm", "prices.json")))
        script = os.path.join(site, "bin", "golem")
        self.check_demo(self.run_py(script, "demo", "-json", extra_env={"PYTHONPATH": site}))
        reference = self.run_py(script, "help", "cli", extra_env={"PYTHONPATH": site})
        with open(os.path.join(REPO_ROOT, "docs", "cli.md"), encoding="utf-8") as handle:
            self.assertEqual(reference.stdout, handle.read(), reference.stderr)
