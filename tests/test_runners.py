"""Per-test evidence from `go test`, `node --test` and jest (golem/workflow/verifier/runners/):
runner detection, arguments, and the parsers against recorded output. Real projects are in
tests/test_runner_projects.py."""

from __future__ import annotations

import json
import tempfile
import unittest

from golem.workflow.verifier.runners import go, jest, node
from golem.workflow.verifier.suite import detect, parse_command
from tests.fixtures import write_files


def go_event(action: str, package: str = "example.com/m/calc", test: str | None = None,
             output: str | None = None) -> str:
    event = {"Time": "2025-01-01T00:00:00Z", "Action": action, "Package": package}
    if test:
        event["Test"] = test
    if output is not None:
        event["Output"] = output
    return json.dumps(event)


# Recorded from `go test -json -count=1 ./...` (Go 1.19): a failing, a passing, a skipped
# test, subtests, a package whose TestMain exits 3, and a package that does not build.
GO_STREAM = "\n".join([
    "FAIL\texample.com/m/broken [build failed]",
    go_event("run", test="TestAdd"),
    go_event("output", test="TestAdd", output="=== RUN   TestAdd\n"),
    go_event("output", test="TestAdd", output="    calc_test.go:5: bad\n"),
    go_event("fail", test="TestAdd"),
    go_event("run", test="TestZero"),
    go_event("pass", test="TestZero"),
    go_event("run", test="TestSkip"),
    go_event("skip", test="TestSkip"),
    go_event("run", test="TestSub"),
    go_event("run", test="TestSub/ok"),
    go_event("run", test="TestSub/bad"),
    go_event("pass", test="TestSub/ok"),
    go_event("fail", test="TestSub/bad"),
    go_event("fail", test="TestSub"),
    go_event("output", output="FAIL\texample.com/m/calc\t0.005s\n"),
    go_event("fail"),
    go_event("run", "example.com/m/mainexit", "TestFine"),
    go_event("pass", "example.com/m/mainexit", "TestFine"),
    go_event("fail", "example.com/m/mainexit"),
    go_event("skip", "example.com/m/docs"),
    "# example.com/m/broken [example.com/m/broken.test]",
    'broken/b.go:2:23: cannot use "s" (untyped string constant) as int value',
]) + "\n"

# Recorded from golem's reporter under Node 20: nesting, skip and todo, a parent that fails
# after its subtest passed, and a file that does not load.
NODE_STREAM = "\n".join(json.dumps(r) for r in [
    {"pass": True, "name": "adds", "nesting": 0, "file": "/w/test/a.test.js"},
    {"pass": False, "name": "fails", "nesting": 0, "file": "/w/test/a.test.js",
     "failure": "testCodeFailure"},
    {"pass": True, "name": "skipped one", "nesting": 0, "file": "/w/test/a.test.js",
     "skip": True},
    {"pass": True, "name": "todo one", "nesting": 0, "file": "/w/test/a.test.js", "todo": True},
    {"pass": True, "name": "inner pass", "nesting": 1, "file": "/w/test/a.test.js"},
    {"pass": False, "name": "inner fail", "nesting": 1, "file": "/w/test/a.test.js",
     "failure": "testCodeFailure"},
    {"pass": False, "name": "group", "nesting": 0, "file": "/w/test/a.test.js",
     "failure": "subtestsFailed"},
    {"pass": True, "name": "adds", "nesting": 0, "file": "/w/test/b.test.js"},
    {"pass": True, "name": "kid", "nesting": 1, "file": "/w/test/c.test.js"},
    {"pass": False, "name": "parent", "nesting": 0, "file": "/w/test/c.test.js",
     "failure": "testCodeFailure"},
    {"pass": False, "name": "hooked", "nesting": 0, "file": "/w/test/c.test.js",
     "failure": "hookFailure"},
    {"pass": False, "name": "/w/test/d.test.js", "nesting": 0, "file": "/w/test/d.test.js",
     "failure": "testCodeFailure"},
    {"complete": True},
]) + "\n"

# Recorded from `jest --json --outputFile=...` (Jest 30), trimmed to the fields golem reads.
JEST_RESULT = {
    "numFailedTests": 1, "success": False,
    "testResults": [
        {"name": "/w/t/sum.test.js", "status": "failed", "message": "  ● sum › adds ...",
         "assertionResults": [
             {"ancestorTitles": ["sum"], "fullName": "sum adds", "status": "failed",
              "title": "adds"},
             {"ancestorTitles": ["sum"], "fullName": "sum zero", "status": "passed",
              "title": "zero"},
             {"ancestorTitles": ["sum"], "fullName": "sum skipped", "status": "pending",
              "title": "skipped"},
             {"ancestorTitles": ["sum"], "fullName": "sum todo", "status": "todo",
              "title": "todo"}]},
        {"name": "/w/t/bad.test.js", "status": "failed", "assertionResults": [],
         "message": "  ● Test suite failed to run\n\n    Jest encountered an unexpected token"},
        {"name": "/elsewhere/x.test.js", "status": "passed",
         "assertionResults": [{"ancestorTitles": [], "title": "top", "status": "passed"}]},
    ]}


class RunnerOfTest(unittest.TestCase):
    def test_commands_and_their_runners(self):
        cases = {
            "go test ./...": "go", "go test -v ./pkg/...": "go", "/usr/local/go/bin/go test": "go",
            "go vet ./...": "exit-code", "go build": "exit-code",
            "node --test": "node", "node --test test/": "node",
            "node --experimental-vm-modules --test": "node", "nodejs --test": "node",
            "node script.js --test": "exit-code", "node test.js": "exit-code",
            "npx jest": "jest", "npx --yes jest --ci": "jest", "jest": "jest",
            "node_modules/.bin/jest -i": "jest", "npx vitest": "exit-code",
            "npm test": "exit-code", "cargo test": "cargo", "cargo test -q": "exit-code",
            "cargo test -- --format=terse": "exit-code", "make test": "exit-code",
            "python3 -m pytest -q": "pytest", "python3 -m unittest": "unittest",
        }
        for text, runner in cases.items():
            with self.subTest(command=text):
                self.assertEqual(parse_command(text).runner, runner)

    def test_detected_go_module_is_graded_per_test(self):
        with tempfile.TemporaryDirectory() as root:
            write_files(root, {"go.mod": "module example.com/m\n"})
            self.assertEqual(detect(root).runner, "go")

    def test_instrumented_arguments(self):
        self.assertEqual(go.go_argv(["go", "test", "-v", "./..."]),
                         ["go", "test", "-json", "-count=1", "-v", "./..."])
        self.assertEqual(jest.jest_argv(["npx", "jest", "--ci"], "/s/j.json"),
                         ["npx", "jest", "--ci", "--json", "--outputFile=/s/j.json"])
        self.assertEqual(node.node_argv(["node", "--test", "test/"], "/s/r.mjs", "/s/o"),
                         ["node", "--test-reporter=/s/r.mjs", "--test-reporter-destination=/s/o",
                          "--test-reporter=spec", "--test-reporter-destination=stdout",
                          "--test", "test/"])
        # a reporter the command names keeps its place, with stdout as its destination
        self.assertEqual(node.node_argv(["node", "--test", "--test-reporter=dot", "t/"],
                                           "/s/r.mjs", "/s/o"),
                         ["node", "--test-reporter=/s/r.mjs", "--test-reporter-destination=/s/o",
                          "--test", "--test-reporter=dot", "--test-reporter-destination=stdout",
                          "t/"])


class ParseGoTest(unittest.TestCase):
    def test_recorded_stream(self):
        tests, pseudo, text, problem = go.parse_go(GO_STREAM)
        self.assertEqual(tests, {
            "example.com/m/broken [build]": "error",
            "example.com/m/calc::TestAdd": "failed",
            "example.com/m/calc::TestZero": "passed",
            "example.com/m/calc::TestSkip": "skipped",
            "example.com/m/calc::TestSub": "failed",
            "example.com/m/calc::TestSub/ok": "passed",
            "example.com/m/calc::TestSub/bad": "failed",
            "example.com/m/mainexit::TestFine": "passed",
            "example.com/m/mainexit [package]": "error",
        })
        self.assertEqual(pseudo, {"example.com/m/broken [build]",
                                  "example.com/m/mainexit [package]"})
        self.assertIsNone(problem)
        self.assertIn("calc_test.go:5: bad", text)
        self.assertIn("cannot use", text)
        self.assertNotIn('"Action"', text)

    def test_build_failure_as_newer_go_reports_it(self):
        stream = "\n".join([
            json.dumps({"ImportPath": "example.com/m/broken [example.com/m/broken.test]",
                        "Action": "build-output", "Output": "broken/b.go:2:23: bad\n"}),
            json.dumps({"ImportPath": "example.com/m/broken [example.com/m/broken.test]",
                        "Action": "build-fail"}),
            json.dumps({"Action": "start", "Package": "example.com/m/broken"}),
            json.dumps({"Action": "fail", "Package": "example.com/m/broken",
                        "FailedBuild": "example.com/m/broken [example.com/m/broken.test]"})])
        tests, pseudo, text, problem = go.parse_go(stream)
        self.assertTrue(tests)
        self.assertTrue(all(o == "error" for o in tests.values()), tests)
        self.assertEqual(set(tests), pseudo)
        self.assertIn("broken/b.go:2:23: bad", text)
        self.assertIsNone(problem)

    def test_a_pass_after_a_fail_does_not_count(self):
        stream = "\n".join([go_event("run", test="TestAdd"), go_event("fail", test="TestAdd"),
                            go_event("pass", test="TestAdd"), go_event("fail")])
        tests, _, _, _ = go.parse_go(stream)
        self.assertEqual(tests, {"example.com/m/calc::TestAdd": "failed"})

    def test_a_stream_cut_short_is_a_problem(self):
        stream = "\n".join([go_event("run", test="TestAdd"), go_event("pass", test="TestAdd"),
                            go_event("run", test="TestHang")])
        tests, _, _, problem = go.parse_go(stream)
        self.assertEqual(tests["example.com/m/calc::TestHang"], "error")
        self.assertIn("ended before 1 package(s) finished: example.com/m/calc", problem)

    def test_forged_plain_text_is_not_evidence(self):
        tests, _, _, problem = go.parse_go("--- PASS: TestAdd (0.00s)\nok\tx\t0.1s\n")
        self.assertEqual(tests, {})


class ParseNodeTest(unittest.TestCase):
    def test_recorded_stream(self):
        tests, pseudo, problem = node.parse_node(NODE_STREAM, "/w")
        self.assertEqual(tests, {
            "test/a.test.js > adds": "passed",
            "test/a.test.js > fails": "failed",
            "test/a.test.js > skipped one": "skipped",
            "test/a.test.js > todo one": "skipped",
            "test/a.test.js > group": "failed",
            "test/a.test.js > group > inner pass": "passed",
            "test/a.test.js > group > inner fail": "failed",
            "test/b.test.js > adds": "passed",
            "test/c.test.js > parent": "failed",
            "test/c.test.js > parent > kid": "passed",
            "test/c.test.js > hooked": "error",
            "test/d.test.js": "failed",
        })
        self.assertEqual(pseudo, {"test/d.test.js"})
        self.assertIsNone(problem)

    def test_same_name_twice_keeps_the_failure(self):
        lines = [{"pass": False, "name": "t", "nesting": 0, "file": "/w/a.js",
                  "failure": "testCodeFailure"},
                 {"pass": True, "name": "t", "nesting": 0, "file": "/w/a.js"},
                 {"complete": True}]
        tests, _, _ = node.parse_node("\n".join(json.dumps(r) for r in lines), "/w")
        self.assertEqual(tests, {"a.js > t": "failed"})

    def test_a_run_that_ended_early_is_a_problem(self):
        stream = NODE_STREAM.replace(json.dumps({"complete": True}) + "\n", "")
        tests, _, problem = node.parse_node(stream, "/w")
        self.assertTrue(tests)
        self.assertIn("ended before its reporter finished", problem)
        _, _, problem = node.parse_node(NODE_STREAM[:-40], "/w")
        self.assertIn("unreadable", problem)


class ParseJestTest(unittest.TestCase):
    def test_recorded_result(self):
        tests, pseudo = jest.parse_jest(JEST_RESULT, "/w")
        self.assertEqual(tests, {
            "t/sum.test.js > sum > adds": "failed",
            "t/sum.test.js > sum > zero": "passed",
            "t/sum.test.js > sum > skipped": "skipped",
            "t/sum.test.js > sum > todo": "skipped",
            "t/bad.test.js": "error",
            "/elsewhere/x.test.js > top": "passed",
        })
        self.assertEqual(pseudo, {"t/bad.test.js"})

    def test_not_a_jest_result(self):
        for data in ({}, [], {"testResults": "x"}):
            with self.assertRaises(ValueError):
                jest.parse_jest(data, "/w")


if __name__ == "__main__":
    unittest.main()
