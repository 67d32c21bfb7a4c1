"""Advisory findings about a change to the source: code that makes tests pass without fixing
anything. Each changed Python file is read with `ast`, before and after, and the scan reports
the patterns the change ADDED (on a changed line, more often than before): always-equal
objects, exits, test detection, stack inspection, test-runner imports and patching (also of
modules reached by a computed name), and literals copied from the failing tests' assertions.
docs/verification.md lists the kinds and explains the literal heuristic.

The work follows the size of the change, not of the file: the changed lines come from
trimming what the two versions share at both ends; only the statements that touch them are
walked; the old version is parsed only around the change; the assertion literals come from
the failing tests' own functions.

It fails closed: a changed source file golem cannot scan (nested too deeply, larger than 2
MB, not UTF-8, or written with syntax golem's parser does not know) is itself a finding,
`unscannable`. Files are parsed with the grammar of the interpreter that runs the tests
when it is older than golem's; when it is newer, syntax golem does not know is unscannable.

Findings are advice: they change the verdict only under `-strict`. New test files are
scanned for runner patching and exits only: imports and literals are normal there.
"""

from __future__ import annotations

import ast
import difflib
import os
import sys
from typing import Callable, Iterable, Mapping

from golem.tools import tree
from golem.workflow.verifier.patterns import Finder, _imports, assertion_literals

# what a new test file may legitimately set on TestCase
TEST_SETTINGS = {"maxDiff", "longMessage"}
TEST_KINDS = {"runner-patch", "exit", "unscannable", "tamper"}
MAX_BYTES = 2_000_000


class Unscannable(Exception):
    """A file the scan cannot read as Python; the message says why."""


def _parse(data: bytes, version: tuple[int, ...] | None, label: str) -> ast.Module:
    """`data` as a syntax tree, with the test interpreter's grammar where golem knows it."""
    ours = sys.version_info[:2]
    theirs = tuple(version[:2]) if version else ours
    feature = theirs if (3, 4) <= theirs < ours else None
    try:
        return ast.parse(data, feature_version=feature)
    except RecursionError:
        raise Unscannable(f"{label} is nested too deeply for golem's parser") from None
    except (SyntaxError, ValueError) as exc:
        if theirs > ours:
            raise Unscannable(f"{label} uses syntax Python {ours[0]}.{ours[1]} (golem's) does "
                              f"not know, and the tests run on {theirs[0]}.{theirs[1]}") from None
        detail = getattr(exc, "msg", None) or str(exc)
        raise Unscannable(f"{label} does not parse ({detail[:80]})") from None
    except MemoryError:
        raise Unscannable(f"{label} is too large for golem's parser") from None


def changed_lines(old: list[bytes] | None, new: list[bytes]) -> tuple[set[int], set[int]]:
    """1-based numbers of the lines a line diff adds to `new` and removes from `old`.

    What the two share at the start and the end is trimmed first, so a small change in a
    large file costs a small diff."""
    if old is None:
        return set(range(1, len(new) + 1)), set()
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    a, b = old[start:len(old) - end], new[start:len(new) - end]
    added, removed = set(), set()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            added.update(range(start + j1 + 1, start + j2 + 1))
        if tag in ("replace", "delete"):
            removed.update(range(start + i1 + 1, start + i2 + 1))
    return added, removed


def _region(new_tree: ast.Module, added: set[int], removed: set[int], old_len: int,
            new_len: int) -> tuple[int, int]:
    """The old file's lines (first, last) holding the top-level statements around the
    change: what the old version has to be parsed for."""
    touched = [s for s in new_tree.body if any(s.lineno <= n <= (s.end_lineno or s.lineno)
                                               for n in added)]
    first = min([s.lineno for s in touched] + [min(removed, default=new_len + 1),
                                               min(added, default=new_len + 1)])
    last_new = max([s.end_lineno or s.lineno for s in touched] + [max(added, default=0)])
    last = max(last_new + (old_len - new_len), max(removed, default=0))
    return max(1, first), min(old_len, max(last, first))


def _old_finder(old: bytes, old_lines: list[bytes], new_tree: ast.Module, added: set[int],
                removed: set[int], new_len: int, literals: set, names: dict,
                version) -> Finder | None:
    first, last = _region(new_tree, added, removed, len(old_lines), new_len)
    piece = b"".join(old_lines[first - 1:last])
    try:
        part = ast.parse(piece)
        ast.increment_lineno(part, first - 1)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        try:
            part = _parse(old, version, "the old version")
        except Unscannable:
            return None         # the old version was broken: every pattern counts as added
    lines = removed or set(range(first, last + 1))
    return Finder(part, literals, lines, names).run()


def scan_file(path: str, old: bytes | None, new: bytes, literals: set, is_test: bool = False,
              version: tuple[int, ...] | None = None) -> list[dict]:
    """The findings a change from `old` to `new` adds to one Python file."""
    try:
        if len(new) > MAX_BYTES:
            raise Unscannable(f"{path} is larger than {MAX_BYTES // 1_000_000} MB")
        new_tree = _parse(new, version, path)
        new_lines = new.splitlines(keepends=True)
        old_lines = old.splitlines(keepends=True) if old is not None else None
        added, removed = changed_lines(old_lines, new_lines)
        if not added:
            return []
        names = _imports(new_tree.body)
        after = Finder(new_tree, literals, added, names).run()
        before = None
        if old is not None:
            before = _old_finder(old, old_lines, new_tree, added, removed, len(new_lines),
                                 literals, names, version)
    except Unscannable as exc:
        return [{"path": path, "line": 1, "kind": "unscannable",
                 "detail": f"{exc}: golem cannot tell what the change does"}]
    except RecursionError:
        return [{"path": path, "line": 1, "kind": "unscannable",
                 "detail": f"{path} is nested too deeply for golem's scan"}]
    counts: dict[tuple[str, str], int] = {}
    for kind, key, *_ in (before.found if before else []):
        counts[kind, key] = counts.get((kind, key), 0) + 1
    grown: dict[tuple[str, str], int] = {}
    for kind, key, *_ in after.found:
        grown[kind, key] = grown.get((kind, key), 0) + 1
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
         failing_tests: Iterable[ast.AST] | str = (), test_paths: Iterable[str] = (),
         version: tuple[int, ...] | None = None) -> list[dict]:
    """Findings the change from `old` to `new` adds (path -> content; None: absent).

    `failing_tests` are syntax trees (or source text) of the failing tests (their assertion
    literals are looked for in the source); paths in `test_paths` are test files, scanned
    only for runner patching and exits. Each finding is {"path", "line", "kind", "detail"}.
    """
    if isinstance(failing_tests, str):
        failing_tests = [failing_tests]
    trees = []
    for item in failing_tests:
        if isinstance(item, str):
            try:
                item = ast.parse(item)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
        trees.append(item)
    literals = assertion_literals(trees)
    tests = set(test_paths)
    findings = []
    for path in sorted(new):
        content = new[path]
        if content is None or not path.endswith(".py"):
            continue
        findings += scan_file(path, old.get(path), content, literals, path in tests, version)
    return sorted(findings, key=lambda f: (f["path"], f["line"], f["kind"]))


def _test_name(test_id: str) -> str:
    """The function or method name in a unittest id or a pytest node id."""
    name = test_id.split("::")[-1] if "::" in test_id else test_id.rsplit(".", 1)[-1]
    return name.split("[", 1)[0]


def failing_functions(source: bytes, names: set[str] | None) -> list[ast.AST]:
    """The syntax trees of the test functions called `names` in one test file (the whole
    module when `names` is None or none of them is found)."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    if not names:
        return [module]
    found = [node for node in ast.walk(module)
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names]
    return found or [module]


def read_source(path: str) -> bytes | None:
    """A regular file's bytes (None for anything else); never follows a link or blocks."""
    data = tree.read_file(os.path.dirname(path) or ".", os.path.basename(path), MAX_BYTES + 1)
    return None if data is None else data[0]


def scan_changes(root: str | Callable[[str], bytes | None], paths: Iterable[str],
                 new_test_files: Iterable[str], original: Callable[[str], bytes | None],
                 failing: Mapping[str, set[str] | None],
                 version: tuple[int, ...] | None = None) -> list[dict]:
    """Scan the changed Python files `paths` of the workspace at `root` (see `scan`).

    `original(path)` gives a file's content before the change; `failing` maps each test
    file with failing tests to their function names (None: the whole file failed)."""
    def read(rel: str) -> bytes | None:
        if callable(root):
            return root(rel)
        found = tree.read_file(root, rel, MAX_BYTES + 1)
        return None if found is None else found[0]
    paths = [p for p in paths if p.endswith(".py")]
    new = {p: read(p) for p in paths}
    old = {p: original(p) for p in paths}
    trees = []
    for path, names in failing.items():
        data = original(path)
        if data is not None:
            trees += failing_functions(data, names)
    return scan(old, new, trees, new_test_files, version)


def failing_by_file(files: Mapping[str, str], failing: Iterable[str],
                    pseudo: Iterable[str]) -> dict[str, set[str] | None]:
    """test file -> names of its failing tests (None for a file that failed whole)."""
    found: dict[str, set[str] | None] = {}
    whole = set(pseudo)
    for test_id in failing:
        file = files.get(test_id)
        if not file or not file.endswith(".py"):
            continue
        if test_id in whole:
            found[file] = None
        elif found.get(file, set()) is not None:
            found.setdefault(file, set()).add(_test_name(test_id))
    return found
