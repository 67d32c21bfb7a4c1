"""make test: a Makefile with a `test:` target is run as `make test`, judged by its exit code
alone (the recipe may run anything). The weakest detection: any runner that finds its own
signs in the tree wins over it."""

from __future__ import annotations

import os
import re

from golem.workflow.verifier.runners.base import Call, Candidate, Outcomes, Tree

MAKEFILES = ("Makefile", "makefile", "GNUmakefile")


class Make:
    name = "make"
    evidence = None
    reads = ""
    python = False
    trust = ""
    looks_for = "make test (a Makefile test: target)"
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return os.path.basename(argv[0]) in ("make", "gmake")

    def detect(self, tree: Tree) -> list[Candidate]:
        for name in MAKEFILES:
            if tree.exists(name) and re.search(r"^test\s*:", tree.read(name), re.M):
                return [Candidate(["make", "test"], f"{name} test target", 20)]
        return []

    def argv(self, call: Call) -> list[str]:
        return call.pinned

    def parse(self, text: str, cwd: str) -> Outcomes:
        raise TypeError("make test is judged by its exit code alone")

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return None


RUNNER = Make()
