"""The runner seam from outside golem: a toy runner written and registered by following only
docs/architecture.md, "Adding a runner", is detected, run, read test by test, re-run one test
at a time by `-repeat`, and judged like any other; and that section names every member of
the `Runner` protocol."""

from __future__ import annotations

import ast
import os
import re
import unittest

from golem.workflow.verifier.runners import RUNNERS, Candidate, Outcomes, Tree, detect
from golem.workflow.verifier.runners.base import Call
from tests import layouts
from tests.fixtures import REPO_ROOT, GolemCase, last_json, run_cli, write_files

# A runner of its own kind: `python3 toyrun.py` runs the checks in checks.txt and prints one
# `PASS name` or `FAIL name` line per check; `--only NAME` runs one.
TOYRUN = """\
import sys
import calc

only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
failed = False
for line in open("checks.txt"):
    name, expr, want = line.split()
    if only is not None and name != only:
        continue
    ok = eval(expr, vars(calc)) == int(want)
    print(("PASS " if ok else "FAIL ") + name)
    failed |= not ok
sys.exit(1 if failed else 0)
"""
PROJECT = {"toyrun.py": TOYRUN, "toy.cfg": "[toy]\n",
           "calc.py": "def add(a, b):\n    return a - b\n",
           "checks.txt": "adds add(2,3) 5\nzero add(0,0) 0\n",
           "tests/test_calc.py": "import unittest\n"}


class Toy:
    """What the recipe asks for, and nothing more."""

    name = "toy"
    evidence = "toy-output"
    reads = "output"
    python = False
    trust = "read from the toy's printed lines"
    looks_for = "python3 toyrun.py (toy.cfg)"
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return argv[1:2] == ["toyrun.py"]

    def detect(self, tree: Tree) -> list[Candidate]:
        return [Candidate(["python3", "toyrun.py"], "toy.cfg", 75)] if tree.exists("toy.cfg") \
            else []

    def argv(self, call: Call) -> list[str]:
        only = ["--only", call.only] if call.only is not None else []
        return [*call.pinned, *only]

    def parse(self, text: str, cwd: str) -> Outcomes:
        tests = {}
        for line in text.splitlines():
            found = re.fullmatch(r"(PASS|FAIL) (\S+)", line)
            if found:
                tests[found.group(2)] = "passed" if found.group(1) == "PASS" else "failed"
        return Outcomes(tests, set())

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return test_id


def recipe() -> str:
    with open(os.path.join(REPO_ROOT, "docs", "architecture.md"), encoding="utf-8") as handle:
        text = handle.read()
    found = re.search(r"^## Adding a runner\n(.*?)(?=^## )", text, re.S | re.M)
    return found.group(1) if found else ""


class ToyRunnerTest(GolemCase):
    def setUp(self):
        super().setUp()
        RUNNERS["toy"] = Toy()
        self.addCleanup(RUNNERS.pop, "toy")

    def test_detected_run_read_and_repeated_like_any_runner(self):
        root = layouts.build("git", self.tmp, PROJECT)
        command = detect(root)
        self.assertEqual((command.argv, command.runner, command.origin),
                         (["python3", "toyrun.py"], "toy", "detected: toy.cfg"))
        write_files(root, {"calc.py": "def add(a, b):\n    return a + b\n"})
        code, out, err = run_cli(["verify", "-dir", root, "-base", "HEAD", "-sandbox", "none",
                                  "-repeat", "2", "-trace", self.trace, "-json"])
        report = last_json(out)
        self.assertEqual((code, report["verdict"], report["evidence"]),
                         (0, "VERIFIED", "toy-output"), err)
        self.assertEqual(report["fixed"], ["adds"])
        self.assertEqual(report["tests"]["before"]["counts"], {"failed": 1, "passed": 1})
        self.assertIn("(read from the toy's printed lines)", report["summary"])
        self.assertIn("repeat 2/2: adds alone: passed", err)

    def test_nothing_found_names_it_too(self):
        root = layouts.build("git", self.tmp, {"README.md": "x\n"})
        with self.assertRaisesRegex(Exception, r"python3 toyrun.py \(toy.cfg\); give -test"):
            detect(root)


class RecipeTest(unittest.TestCase):
    def test_the_recipe_names_every_member_of_the_protocol_and_where_to_register(self):
        text = recipe()
        self.assertTrue(text, "docs/architecture.md has no 'Adding a runner' section")
        path = os.path.join(REPO_ROOT, "golem", "workflow", "verifier", "runners", "base.py")
        with open(path, encoding="utf-8") as handle:
            module = ast.parse(handle.read())
        protocol = next(n for n in module.body if isinstance(n, ast.ClassDef)
                        and n.name == "Runner")
        members = [n.target.id for n in protocol.body if isinstance(n, ast.AnnAssign)] + \
                  [n.name for n in protocol.body if isinstance(n, ast.FunctionDef)]
        self.assertGreater(len(members), 8)
        for member in members:
            self.assertRegex(text, rf"`{member}[`(]", f"the recipe does not name `{member}`")
        for place in ("RUNNERS", "runners/__init__.py", "docs/cli.md", "tests/test_detection.py"):
            self.assertIn(place, text)
        # every member the toy has is one the recipe names: it was written from the recipe
        for member in vars(Toy):
            if not member.startswith("_"):
                self.assertIn(member, members)


if __name__ == "__main__":
    unittest.main()
