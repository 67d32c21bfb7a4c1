"""Advisory findings about a change to the source: code that makes tests pass without fixing
anything. The scan reads each changed Python file, before and after, with `ast`, and reports
the patterns the change ADDED (present after, absent before, on a changed line): always-equal
objects, exits, test detection, stack inspection, test-runner imports and patching, and
literals copied from the failing tests' assertions. docs/verification.md lists the kinds and
explains the literal heuristic and its guards against false positives.

Findings are advice: they change the verdict only under `-strict`. Files that are not Python,
or do not parse, are skipped (the tests catch a syntax error). New test files are scanned for
runner patching and exits only: imports and literals are normal there.
"""

from __future__ import annotations

import ast
import difflib
import os
import stat
from typing import Callable, Iterable, Mapping

from golem.workflow.patterns import Finder, assertion_literals
from golem.workflow.protect import is_test_path, new_tests
from golem.workflow.snapshot import SKIP_DIRS, Changes

# what a new test file may legitimately set on TestCase
TEST_SETTINGS = {"maxDiff", "longMessage"}
TEST_KINDS = {"runner-patch", "exit"}
MAX_BYTES = 2_000_000


def _parse(data: bytes | None, literals: set) -> Finder | None:
    if data is None:
        return None
    try:
        tree = ast.parse(data)
        finder = Finder(tree, literals)
        finder.visit(tree)
    except (SyntaxError, ValueError, RecursionError):   # absurdly nested code: not scanned
        return None
    return finder


def _added_lines(old: bytes | None, new: bytes) -> set[int]:
    """1-based numbers of the lines in `new` that are not in `old` (by a line diff)."""
    new_lines = new.splitlines()
    if old is None:
        return set(range(1, len(new_lines) + 1))
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new_lines, autojunk=False)
    added = set()
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            added.update(range(j1 + 1, j2 + 1))
    return added


def scan_file(path: str, old: bytes | None, new: bytes, literals: set,
              is_test: bool = False) -> list[dict]:
    """The findings a change from `old` to `new` adds to one Python file."""
    after = _parse(new, literals)
    if after is None:
        return []
    before = _parse(old, literals)
    counts: dict[tuple[str, str], int] = {}
    for kind, key, *_ in (before.found if before else []):
        counts[kind, key] = counts.get((kind, key), 0) + 1
    grown = {}
    for kind, key, *_ in after.found:
        grown[kind, key] = grown.get((kind, key), 0) + 1
    added = _added_lines(old, new)
    findings: dict[tuple[int, str, str], list[str]] = {}
    for kind, key, first, last, detail, scope in after.found:
        if grown[kind, key] <= counts.get((kind, key), 0) or (is_test and kind not in TEST_KINDS):
            continue
        if not added.intersection(range(first, last + 1)):
            continue
        if is_test and kind == "runner-patch" and key.rsplit(".", 1)[-1] in TEST_SETTINGS:
            continue
        if kind == "test-literal":
            verb, value = detail.split("|", 1)
            site = (scope, verb, key.split(":", 1)[0])
            if before and after.literal_sites[site] <= before.literal_sites.get(site, 0):
                continue    # no comparison or return of such a literal was added: a correction
            values = findings.setdefault((first, kind, verb), [])
            if value not in values:
                values.append(value)
            continue
        findings.setdefault((first, kind, detail), [])
    out = []
    for (line, kind, detail), values in findings.items():
        if kind == "test-literal":
            detail = (f"{detail} {', '.join(values)}: "
                      f"{'literals' if len(values) > 1 else 'a literal'} from the failing "
                      "tests' assertions")
        out.append({"path": path, "line": line, "kind": kind, "detail": detail})
    return out


def scan(old: Mapping[str, bytes | None], new: Mapping[str, bytes | None],
         failing_tests: str | Iterable[str] = (), test_paths: Iterable[str] = ()) -> list[dict]:
    """Findings the change from `old` to `new` adds (path -> content; None: absent).

    `failing_tests` is the text of the test files that were failing (their assertion literals
    are looked for in the source); paths in `test_paths` are test files, scanned only for
    runner patching and exits. Each finding is {"path", "line", "kind", "detail"}.
    """
    sources = [failing_tests] if isinstance(failing_tests, str) else list(failing_tests)
    literals = assertion_literals(sources)
    tests = set(test_paths)
    findings = []
    for path in sorted(new):
        content = new[path]
        if content is None or not path.endswith(".py"):
            continue
        findings += scan_file(path, old.get(path), content, literals, path in tests)
    return sorted(findings, key=lambda f: (f["path"], f["line"], f["kind"]))


def failing_test_files(test_ids: Iterable[str], paths: Iterable[str]) -> list[str]:
    """The test files (among `paths`) that the failing test ids come from.

    unittest ids look like `tests.test_calc.AddTest.test_add` (or end with the module, for an
    import error); pytest ids like `tests.test_calc::test_add`. With no ids that match, every
    path is returned: the failing tests are unknown, so all tests count.
    """
    ids = [t.replace("::", ".") for t in test_ids]
    chosen = []
    for path in paths:
        parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
        names = {".".join(parts[i:]) for i in range(len(parts))}
        if any(t == n or t.startswith(n + ".") or t.endswith("." + n) for t in ids for n in names):
            chosen.append(path)
    return chosen or list(paths)


def read_source(path: str) -> bytes | None:
    """A regular file's bytes (None for anything else, or too large); never blocks on a FIFO."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_BYTES)


def files_under(root: str) -> list[str]:
    """Every file below `root`, relative and with `/`, skipping VCS and cache directories."""
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        rel = os.path.relpath(top, root).replace(os.sep, "/")
        found += [name if rel == "." else f"{rel}/{name}" for name in files]
    return sorted(found)


def scan_changes(root: str, changes: Changes, protected: Iterable[tuple[str, str]],
                 original: Callable[[str], bytes | None], before_paths: Iterable[str],
                 failing_ids: Iterable[str]) -> list[dict]:
    """Scan what a change did to the workspace at `root` (see `scan`).

    Protected paths are left out (they are rejected anyway); changed test files other than new
    ones are protected too. `original(path)` gives the content before the change,
    `before_paths` the files that existed then (the failing tests are chosen among them).
    """
    skip = {path for path, _ in protected}
    tests = set(new_tests(changes))
    paths = [p for p in changes.added + changes.modified if p.endswith(".py")
             and p not in skip and (p in tests or not is_test_path(p))]
    new = {p: read_source(os.path.join(root, *p.split("/"))) for p in paths}
    old = {p: original(p) for p in paths}
    candidates = [p for p in before_paths if p.endswith(".py") and is_test_path(p)]
    sources = []
    for path in failing_test_files(failing_ids, candidates):
        data = original(path)
        if data is not None:
            sources.append(data.decode("utf-8", errors="replace"))
    return scan(old, new, sources, tests)
