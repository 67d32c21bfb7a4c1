"""Real small projects run the way golem runs a suite, for each runner whose tool is installed
here (the tests say which tool is missing when they skip), and `golem fix` end to end on them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from golem.tools.process import command_env
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.snapshot import compare, fingerprint
from golem.workflow.verifier.suite import parse_command, plan_for, run_suite
from tests.fixtures import GolemCase, last_json, run_cli, write_files
from tests.provider_server import chat
from tests.test_security import bwrap_or_skip

GO = shutil.which("go")
NODE = shutil.which("node")
JEST = shutil.which("jest")
NO_GO = "go is not installed: the Go project tests need the go command on PATH"
NO_JEST = "jest is not installed: the jest project test needs a `jest` command on PATH"


def _node_reporters() -> str | None:
    """None when this node takes a reporter module (Node 18.15, 19.6 and later), else why not."""
    if not NODE:
        return "node is not installed: the node project tests need node on PATH"
    done = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30)
    major, minor = (int(p) for p in done.stdout.strip().lstrip("v").split(".")[:2])
    if (major, minor) < (18, 15) or (19, 0) <= (major, minor) < (19, 6):
        return f"node {done.stdout.strip()} has no --test-reporter"
    return None


NO_NODE = _node_reporters()


class ProjectCase(unittest.TestCase):
    """A real project in a temporary directory, run the way golem runs a suite: the program
    pinned by plan_for, golem's helpers (the node reporter) from the phase's read-only
    directory, and the result file in the run's own scratch."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="golem-runner-")
        self.addCleanup(tmp.cleanup)
        self.base = os.path.realpath(tmp.name)
        self.root = os.path.join(self.base, "project")
        home = os.path.join(self.base, "home")
        os.mkdir(home)
        self.env = command_env(home, home, {"GOCACHE": os.path.join(self.base, "gocache")})

    def run_suite(self, argv: list[str]):
        command = parse_command(" ".join(argv))
        plan = plan_for(command, self.env, self.root)
        self.assertTrue(os.path.isabs(plan.program), plan.program)
        before = fingerprint(self.root).entries
        with Phase("test") as phase:
            run = phase.run()
            helpers = phase.helpers()
            result = run_suite(plan, cwd=self.root, env=self.env, run=run, helpers=helpers,
                               timeout=300)
            self.assertEqual(os.stat(helpers).st_mode & 0o777, 0o555)
        self.assertFalse(os.path.exists(phase.root), "the phase's scratch stays behind")
        # the result file golem reads is written to the run's scratch, never the project
        self.assertEqual(compare(before, fingerprint(self.root).entries).all, [])
        return result


GO_PROJECT = {
    "go.mod": "module example.com/m\n\ngo 1.18\n",
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
    "calc/calc_test.go": """package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("Add(2, 3) != 5")
	}
}

func TestZero(t *testing.T) {
	if Add(0, 0) != 0 {
		t.Fatal("Add(0, 0) != 0")
	}
}

func TestSub(t *testing.T) {
	t.Run("same", func(t *testing.T) {})
}
""",
    "tool/main_test.go": """package tool

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { m.Run(); os.Exit(3) }

func TestFine(t *testing.T) {}
""",
}


@unittest.skipUnless(GO, NO_GO)
class GoProjectTest(ProjectCase):
    def test_outcomes_per_test_and_per_package(self):
        write_files(self.root, GO_PROJECT)
        result = self.run_suite(["go", "test", "./..."])
        self.assertEqual(result.evidence, "go-json")
        self.assertEqual(result.tests, {
            "example.com/m/calc::TestAdd": "failed",
            "example.com/m/calc::TestZero": "passed",
            "example.com/m/calc::TestSub": "passed",
            "example.com/m/calc::TestSub/same": "passed",
            "example.com/m/tool::TestFine": "passed",
            "example.com/m/tool [package]": "error"}, result.output)
        self.assertEqual(result.pseudo, {"example.com/m/tool [package]"})
        self.assertIsNone(result.problem)
        self.assertIn("Add(2, 3) != 5", result.output)


@unittest.skipIf(NO_NODE, NO_NODE)
class NodeProjectTest(ProjectCase):
    def test_outcomes_per_test_with_files_in_the_ids(self):
        write_files(self.root, {
            "calc.js": "exports.add = (a, b) => a - b;\n",
            "test/calc.test.js": """const test = require('node:test');
const assert = require('node:assert');
const { add } = require('../calc');
test('adds', () => { assert.strictEqual(add(2, 3), 5); });
test('zero', () => { assert.strictEqual(add(0, 0), 0); });
test('parent', async (t) => {
  await t.test('child', () => {});
  throw new Error('the parent fails after its child passed');
});
""",
            "test/other.test.js": "require('node:test')('adds', () => {});\n"})
        result = self.run_suite(["node", "--test"])
        self.assertEqual(result.evidence, "node-json")
        self.assertEqual(result.tests, {
            "test/calc.test.js > adds": "failed",
            "test/calc.test.js > zero": "passed",
            "test/calc.test.js > parent": "failed",
            "test/calc.test.js > parent > child": "passed",
            "test/other.test.js > adds": "passed"}, result.output)
        self.assertIsNone(result.problem)
        self.assertIn("adds", result.output)    # the spec reporter still writes to stdout


@unittest.skipUnless(JEST, NO_JEST)
class JestProjectTest(ProjectCase):
    def test_outcomes_per_test(self):
        write_files(self.root, {
            "package.json": json.dumps({"name": "p", "version": "1.0.0"}),
            "sum.js": "module.exports = (a, b) => a - b;\n",
            "sum.test.js": "const sum = require('./sum');\n"
                           "describe('sum', () => {\n"
                           "  test('adds', () => { expect(sum(1, 2)).toBe(3); });\n"
                           "  test('zero', () => { expect(sum(0, 0)).toBe(0); });\n"
                           "});\n"})
        result = self.run_suite(["jest"])
        self.assertEqual(result.evidence, "jest-json")
        self.assertEqual(result.tests, {"sum.test.js > sum > adds": "failed",
                                        "sum.test.js > sum > zero": "passed"}, result.output)
        self.assertIsNone(result.problem)


class FixProjectCase(GolemCase):
    def fix_project(self, files: dict[str, str], test: str, edit: tuple,
                    sandbox: str = "none") -> dict:
        root = os.path.join(self.tmp, "project")
        write_files(root, files)
        server = self.serve([chat(tool_calls=[edit]), chat("fixed")])
        os.environ["GOCACHE"] = os.path.join(self.tmp, "gocache")
        code, out, err = run_cli(["fix", "-dir", root, "-test", test, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", sandbox, "-json"])
        report = last_json(out)
        self.assertEqual(code, 0, report["summary"] + err)
        return report


@unittest.skipUnless(GO, NO_GO)
class GoFixTest(FixProjectCase):
    def test_a_go_fix_is_verified_test_by_test_in_the_copy(self):
        files = {k: v for k, v in GO_PROJECT.items() if not k.startswith("tool/")}
        report = self.fix_project(files, "go test ./...", (
            "edit_file", {"path": "calc/calc.go", "old_string": "a - b", "new_string": "a + b"}))
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(report["verified_in"], "copy")
        self.assertEqual(report["evidence"], "go-json")
        self.assertEqual(report["fixed"], ["example.com/m/calc::TestAdd"])
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 4})


NODE_FIX_PROJECT = {
    "calc.js": "exports.add = (a, b) => a - b;\n",
    "test/calc.test.js": "const test = require('node:test');\n"
                         "const assert = require('node:assert');\n"
                         "const { add } = require('../calc');\n"
                         "test('adds', () => { assert.strictEqual(add(2, 3), 5); });\n"
                         "test('zero', () => { assert.strictEqual(add(0, 0), 0); });\n"}
NODE_FIX_EDIT = ("edit_file", {"path": "calc.js", "old_string": "a - b", "new_string": "a + b"})


@unittest.skipIf(NO_NODE, NO_NODE)
class NodeFixTest(FixProjectCase):
    def test_a_node_fix_is_verified_test_by_test_in_the_copy(self):
        report = self.fix_project(NODE_FIX_PROJECT, "node --test", NODE_FIX_EDIT)
        self.assertEqual(report["verdict"], "VERIFIED")
        self.assertEqual(report["evidence"], "node-json")
        self.assertEqual(report["fixed"], ["test/calc.test.js > adds"])

    def test_under_bubblewrap_the_reporter_comes_from_the_read_only_helpers(self):
        bwrap_or_skip(self)
        report = self.fix_project(NODE_FIX_PROJECT, "node --test", NODE_FIX_EDIT,
                                  sandbox="bwrap")
        self.assertEqual(report["verdict"], "VERIFIED", report["summary"])
        self.assertEqual(report["fixed"], ["test/calc.test.js > adds"])
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 2})


if __name__ == "__main__":
    unittest.main()
