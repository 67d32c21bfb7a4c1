"""Per-test evidence for `go test`, `node --test` and jest.

Each runner is told to report in a machine-readable form golem reads after the run:

- `go test` gets `-json -count=1`; its event stream arrives on stdout (the go command itself
  writes it; the test binaries' own output is wrapped in `output` events), and a package that
  fails with no failing test (a build failure, `TestMain` exiting) becomes a pseudo test.
- `node --test` gets golem's reporter (helpers/node_reporter.mjs) from a read-only
  directory; it runs in the runner's own process, not in the test files' processes, and
  writes one JSON line per finished test to a file in the run's scratch.
  Node's JUnit reporter is not used: in Node 20 it names no file (same-named tests in two
  files collide) and drops the failure of a test whose subtests passed.
- jest gets `--json --outputFile=FILE`.

Test ids carry paths relative to the directory the suite ran in, so a run in the workspace
and a run in a rebuilt copy of it name the same tests alike.
"""

from __future__ import annotations

import json
import os

FAILING = ("failed", "error")

def merge(tests: dict[str, str], test_id: str, outcome: str) -> None:
    """Record an outcome; a failure is never overwritten by a later success for the same id."""
    if tests.get(test_id) in FAILING and outcome not in FAILING:
        return
    tests[test_id] = outcome


def _relative(path: str, root: str) -> str:
    if path.startswith("file://"):
        path = path[len("file://"):]
    if os.path.isabs(path):
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    return path


def _options_end(argv: list[str], start: int) -> int:
    """Index of the first argument from `start` on that is not an option."""
    index = start
    while index < len(argv) and argv[index].startswith("-"):
        index += 1
    return index


def is_go(argv: list[str]) -> bool:
    """`go test ...`."""
    return os.path.basename(argv[0]) == "go" and argv[1:2] == ["test"]


def is_node(argv: list[str]) -> bool:
    """`node --test ...` (`--test` among node's own options, before any script)."""
    if os.path.basename(argv[0]) not in ("node", "nodejs"):
        return False
    return "--test" in argv[1:_options_end(argv, 1)]


def is_jest(argv: list[str]) -> bool:
    """`jest ...`, `npx [options] jest ...` or a path to a `jest` binary."""
    name = os.path.basename(argv[0])
    if name == "jest":
        return True
    if name == "npx":
        index = _options_end(argv, 1)
        return index < len(argv) and argv[index] == "jest"
    return False


def go_argv(argv: list[str]) -> list[str]:
    """`go test ...` with the JSON event stream on, and the test cache off."""
    return [argv[0], "test", "-json", "-count=1", *argv[2:]]


def node_argv(argv: list[str], reporter: str, out: str) -> list[str]:
    """`node --test ...` with golem's reporter writing to `out`, and readable output on stdout.

    Node pairs reporters with destinations in order, so golem's pair goes first and any
    reporter the command names without a destination is sent to stdout.
    """
    options = argv[1:_options_end(argv, 1)]
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


def jest_argv(argv: list[str], out: str) -> list[str]:
    """The jest command with its JSON result written to `out`."""
    return [*argv, "--json", f"--outputFile={out}"]


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
        rel = _relative(file, root) if file else ""
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
        rel = _relative(str(suite.get("name", "")), root)
        assertions = suite.get("assertionResults") or []
        if suite.get("testExecError") or (suite.get("status") == "failed" and not assertions):
            pseudo.add(rel)
            merge(tests, rel, "error")
        for item in assertions:
            path = [str(t) for t in item.get("ancestorTitles") or []] + [str(item.get("title"))]
            merge(tests, " > ".join([rel, *path]), status.get(item.get("status"), "error"))
    return tests, pseudo
