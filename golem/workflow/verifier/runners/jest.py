"""jest: the command gets `--json --outputFile=FILE` (FILE in the run's scratch), and golem
reads that result after the run.

Detection: a `package.json` test script that is a plain `jest ...` command (no shell syntax),
with jest installed in the project's `node_modules`, is run as `npx jest ...`, so its results
are read test by test (npx finds the project's own jest, as `npm test` would).
"""

from __future__ import annotations

import json
import os

from golem.workflow.verifier.runners.base import (Call, Candidate, Outcomes, Tree, merge,
                                                  options_end, plain, relative)


def is_jest(argv: list[str]) -> bool:
    """`jest ...`, `npx [options] jest ...` or a path to a `jest` binary."""
    name = os.path.basename(argv[0])
    if name == "jest":
        return True
    if name == "npx":
        index = options_end(argv, 1)
        return index < len(argv) and argv[index] == "jest"
    return False


def jest_argv(argv: list[str], out: str) -> list[str]:
    """The jest command with its JSON result written to `out`."""
    return [*argv, "--json", f"--outputFile={out}"]


class Jest:
    name = "jest"
    evidence = "jest-json"
    reads = "file"
    python = False
    trust = ""
    looks_for = "npx jest (package.json test script, jest in node_modules)"
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return is_jest(argv)

    def detect(self, tree: Tree) -> list[Candidate]:
        words = plain(tree.package_script() or "")
        if words and words[0] == "jest" and os.path.isfile(tree.path("node_modules/.bin/jest")):
            return [Candidate(["npx", *words], "package.json test script", 61)]
        return []

    def argv(self, call: Call) -> list[str]:
        return jest_argv(call.pinned, call.result)

    def parse(self, text: str, cwd: str) -> Outcomes:
        tests, pseudo = parse_jest(json.loads(text), cwd)
        return Outcomes(tests, pseudo)

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return None


def parse_jest(data: object, root: str) -> tuple[dict[str, str], set[str]]:
    """Outcomes from jest's `--json` result: (tests, pseudo ids for files that did not run)."""
    if not isinstance(data, dict) or not isinstance(data.get("testResults"), list):
        raise ValueError("no testResults in the jest result")
    status = {"passed": "passed", "failed": "failed", "pending": "skipped",
              "skipped": "skipped", "todo": "skipped", "disabled": "skipped",
              "focused": "passed"}
    tests: dict[str, str] = {}
    pseudo: set[str] = set()
    for suite in data["testResults"]:
        rel = relative(str(suite.get("name", "")), root)
        assertions = suite.get("assertionResults") or []
        if suite.get("testExecError") or (suite.get("status") == "failed" and not assertions):
            pseudo.add(rel)
            merge(tests, rel, "error")
        for item in assertions:
            path = [str(t) for t in item.get("ancestorTitles") or []] + [str(item.get("title"))]
            merge(tests, " > ".join([rel, *path]), status.get(item.get("status"), "error"))
    return tests, pseudo


RUNNER = Jest()
