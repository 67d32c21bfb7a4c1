"""node --test: golem's reporter (helpers/node_reporter.mjs) is added from the read-only
helpers directory; it runs in the runner's own process, not in the test files' processes, and
writes one JSON line per finished test to a file in the run's scratch. Node's JUnit reporter
is not used: in Node 20 it names no file (same-named tests in two files collide) and drops
the failure of a test whose subtests passed.

Detection: a `package.json` test script that is a plain `node --test` command (no shell
syntax) is run as it is, so its results are read test by test.
"""

from __future__ import annotations

import json
import os

from golem.workflow.verifier.runners.base import (Call, Candidate, Outcomes, Tree, merge,
                                                  options_end, plain, relative)


def is_node(argv: list[str]) -> bool:
    """`node --test ...` (`--test` among node's own options, before any script)."""
    if os.path.basename(argv[0]) not in ("node", "nodejs"):
        return False
    return "--test" in argv[1:options_end(argv, 1)]


def node_argv(argv: list[str], reporter: str, out: str) -> list[str]:
    """`node --test ...` with golem's reporter writing to `out`, and readable output on stdout.

    Node pairs reporters with destinations in order, so golem's pair goes first and any
    reporter the command names without a destination is sent to stdout.
    """
    options = argv[1:options_end(argv, 1)]
    theirs = sum(1 for a in options if a == "--test-reporter" or
                 a.startswith("--test-reporter="))
    places = sum(1 for a in options if a == "--test-reporter-destination" or
                 a.startswith("--test-reporter-destination="))
    ours = [f"--test-reporter={reporter}", f"--test-reporter-destination={out}"]
    if not theirs:
        ours += ["--test-reporter=spec", "--test-reporter-destination=stdout"]
    extra = ["--test-reporter-destination=stdout"] * max(0, theirs - places)
    end = 1 + len(options)
    return [argv[0], *ours, *argv[1:end], *extra, *argv[end:]]


class Node:
    name = "node"
    evidence = "node-json"
    reads = "file"
    python = False
    trust = ""
    looks_for = "node --test (package.json test script)"
    homes: dict[str, str] = {}

    def claims(self, argv: list[str]) -> bool:
        return is_node(argv)

    def detect(self, tree: Tree) -> list[Candidate]:
        words = plain(tree.package_script() or "")
        if words and is_node(words):
            return [Candidate(words, "package.json test script", 61)]
        return []

    def argv(self, call: Call) -> list[str]:
        return node_argv(call.pinned, os.path.join(call.helpers, "node_reporter.mjs"),
                         call.result)

    def parse(self, text: str, cwd: str) -> Outcomes:
        tests, pseudo, problem = parse_node(text, cwd)
        return Outcomes(tests, pseudo, problem)

    def alone(self, test_id: str, files: dict[str, str]) -> str | None:
        return None


def _node_outcome(record: dict) -> str:
    if record.get("todo") or record.get("skip"):
        return "skipped"
    if record.get("pass"):
        return "passed"
    return "failed" if record.get("failure") in ("testCodeFailure", "subtestsFailed") else "error"


def parse_node(stream: str, root: str) -> tuple[dict[str, str], set[str], str | None]:
    """Outcomes from golem's node reporter: (tests, pseudo ids, problem).

    Node reports a test after its subtests, so each subtest waits for its parent's name.
    """
    tests: dict[str, str] = {}
    pseudo: set[str] = set()
    pending: dict[str, list[tuple[int, list[str], str]]] = {}
    complete = False
    for line in stream.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            return {}, set(), "the node result file is unreadable"
        if not isinstance(record, dict):
            continue
        if record.get("complete"):
            complete = True
            continue
        file = str(record.get("file") or "")
        name = str(record.get("name", ""))
        nesting = record.get("nesting") if isinstance(record.get("nesting"), int) else 0
        rel = relative(file, root) if file else ""
        if file and name == file:
            # a file that failed to load is reported as a test named after the file
            pseudo.add(rel)
            merge(tests, rel, _node_outcome(record))
            continue
        waiting = pending.setdefault(rel, [])
        children = [(n, path, o) for n, path, o in waiting if n == nesting + 1]
        waiting[:] = [w for w in waiting if w[0] != nesting + 1]
        waiting += [(nesting, [name, *path], o) for _, path, o in children]
        waiting.append((nesting, [name], _node_outcome(record)))
        if nesting == 0:
            for _, path, outcome in waiting:
                merge(tests, " > ".join([rel, *path]) if rel else " > ".join(path), outcome)
            waiting.clear()
    for rel, waiting in pending.items():
        for _, path, outcome in waiting:   # a parent that never reported: keep the children
            merge(tests, " > ".join([rel, *path]) if rel else " > ".join(path), outcome)
    problem = None if complete else "the node test run ended before its reporter finished"
    return tests, pseudo, problem


RUNNER = Node()
