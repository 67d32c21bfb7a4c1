"""npm test: a `package.json` with a real test script (not npm's placeholder) that is no plain
`node --test` or jest command is run as `npm test`, judged by its exit code alone (the script
may run anything, so golem has no per-test evidence of it)."""

from __future__ import annotations

import os

from golem.workflow.verifier.runners.base import Call, Candidate, Outcomes, Tree


class Npm:
    name = "npm"
    evidence = None
    reads = ""
    python = False
    trust = ""
    looks_for = "npm test (package.json test script)"
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return os.path.basename(argv[0]) == "npm" and argv[1:2] in (["test"], ["t"])

    def detect(self, tree: Tree) -> list[Candidate]:
        if tree.package_script() is None:
            return []
        return [Candidate(["npm", "test"], "package.json test script", 59)]

    def argv(self, call: Call) -> list[str]:
        return call.pinned

    def parse(self, text: str, cwd: str) -> Outcomes:
        raise TypeError("npm test is judged by its exit code alone")

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return None


RUNNER = Npm()
