"""go test: `go test ...` gets `-json -count=1`; its event stream arrives on stdout (the go
command itself writes it; the test binaries' own output is wrapped in `output` events), and
a package that fails with no failing test (a build failure, `TestMain` exiting) becomes a
pseudo test. Detection: `go.mod` at the top proposes `go test ./...`.
"""

from __future__ import annotations

import json
import os

from golem.workflow.verifier.runners.base import (FAILING, Call, Candidate, Outcomes, Tree,
                                                  merge)


def is_go(argv: list[str]) -> bool:
    """`go test ...`."""
    return os.path.basename(argv[0]) == "go" and argv[1:2] == ["test"]


def go_argv(argv: list[str]) -> list[str]:
    """`go test ...` with the JSON event stream on, and the test cache off."""
    return [argv[0], "test", "-json", "-count=1", *argv[2:]]


class Go:
    name = "go"
    evidence = "go-json"
    reads = "output"
    python = False
    trust = ""
    looks_for = "go test ./... (go.mod)"
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return is_go(argv)

    def detect(self, tree: Tree) -> list[Candidate]:
        return [Candidate(["go", "test", "./..."], "go.mod", 60)] if tree.exists("go.mod") \
            else []

    def argv(self, call: Call) -> list[str]:
        return go_argv(call.pinned)

    def parse(self, text: str, cwd: str) -> Outcomes:
        tests, pseudo, output, problem = parse_go(text)
        return Outcomes(tests, pseudo, problem, output)

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return None


def parse_go(stream: str) -> tuple[dict[str, str], set[str], str, str | None]:
    """Outcomes from `go test -json` output: (tests, pseudo ids, readable text, problem)."""
    tests: dict[str, str] = {}
    pseudo: set[str] = set()
    text: list[str] = []
    seen: set[str] = set()
    ended: set[str] = set()
    failed_packages: set[str] = set()
    started: set[str] = set()
    outcome_of = {"pass": "passed", "fail": "failed", "skip": "skipped"}
    for line in stream.splitlines():
        event = None
        if line.startswith("{"):
            try:
                event = json.loads(line)
            except ValueError:
                event = None
        if not isinstance(event, dict):
            text.append(line)
            # Go before 1.24 reports a package that does not build only as plain text
            if line.startswith("FAIL\t") and line.endswith(("[build failed]", "[setup failed]")):
                package = line.split("\t")[1].split(" ")[0]
                pseudo.add(f"{package} [build]")
                tests[f"{package} [build]"] = "error"
            continue
        action = event.get("Action")
        package = event.get("Package") or event.get("ImportPath") or ""
        if action in ("output", "build-output"):
            text.append(str(event.get("Output", "")).rstrip("\n"))
            continue
        if action == "build-fail" and package:
            pseudo.add(f"{package} [build]")
            tests[f"{package} [build]"] = "error"
            continue
        if not package or not isinstance(action, str):
            continue
        test = event.get("Test")
        if test:
            test_id = f"{package}::{test}"
            if action == "run":
                started.add(test_id)
            elif action in outcome_of:
                merge(tests, test_id, outcome_of[action])
            continue
        seen.add(package)
        if action in outcome_of:
            ended.add(package)
            if action == "fail":
                failed_packages.add(package)
    for test_id in started - set(tests):
        tests[test_id] = "error"     # started, never finished: the test binary died
    for package in failed_packages:
        prefix = f"{package}::"
        if not any(t.startswith(prefix) and o in FAILING for t, o in tests.items()):
            pseudo.add(f"{package} [package]")
            tests[f"{package} [package]"] = "error"
    seen |= {t.split("::", 1)[0] for t in tests if "::" in t}
    unfinished = sorted(seen - ended)
    problem = None
    if unfinished:
        problem = (f"the go test event stream ended before {len(unfinished)} package(s) "
                   f"finished: {', '.join(unfinished[:3])}")
    return tests, pseudo, "\n".join(text), problem


RUNNER = Go()
