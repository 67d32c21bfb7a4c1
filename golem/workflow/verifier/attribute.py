"""Who changed the tests' data while a graded run went on: the tests' own code, or the code
under test.

The driver and the plugin snapshot the data of each test module and class when the runner is
handed it, and name at the end what the run rebound or changed in place (helpers/evidence.py,
`data_changed`). Code under test that rewrites an expected value is tampering; the tests
filling their own data (a cache a helper fills once the code under test works, a class
attribute `setUpClass` sets, a record of what ran) is not, even where the failing baseline
never got that far. golem cannot see who wrote a dict entry or a module's name at run time,
so it reads the writers: a change is the tests' own when

- the baseline's run made the same change (the suite's habit), or
- a container that was empty at the snapshot only gained entries (the tests fill it: an
  honest suite never depends on an empty container it does not fill itself), or
- the tests' own code writes that name at run time: inside a function of the test module
  that owns it (`global NAME` and an assignment, `NAME[...] = ...`, `NAME.append(...)`, ...),
  or of any test-side file (`cls.NAME = ...`, `request.module.NAME = ...`,
  `setattr(x, "NAME", ...)`, `x.NAME[...] = ...`).

The test files are protected, so what they write is what the baseline's tests wrote; the
code under test cannot add a writer. What stays unseen: a value the tests' own code writes
at run time (`cls.expected = ...` in `setUpClass`) that the code under test overwrites
later; Python raises no audit event for a class's or a module's attribute set, so golem
cannot tell the two writes apart (the scan names the code under test reaching the test
module: scan.py). Every other change is an audit event, which REJECTs unless the
baseline's run made it too (grade.reached_for).
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable

from golem.workflow.verifier.suite import SuiteResult

EVENT = "test data changed while the tests ran: "
# methods that change a container in place
MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "pop",
                      "popitem", "clear", "remove", "discard", "sort", "reverse",
                      "appendleft", "extendleft", "popleft", "__setitem__", "__delitem__",
                      "__iadd__", "difference_update", "intersection_update",
                      "symmetric_difference_update", "move_to_end"})
SOURCE_LIMIT = 2_000_000    # bytes of one test file read to find its writers


def writes(source: bytes) -> frozenset[tuple[str, str]]:
    """(kind, name) of what the functions of `source` write at run time: "global" (a name
    of the module, through `global` or `globals()[...]`), "attr" (an attribute of any
    object), "item" (the entries of a container held under that name or attribute).
    Statements at the module's top run before the runner is handed it, so they are not
    writers; an unparsable source writes nothing."""
    try:
        module = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    found: set[tuple[str, str]] = set()
    functions = [n for n in ast.walk(module)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for function in functions:
        declared = {name for node in ast.walk(function) if isinstance(node, ast.Global)
                    for name in node.names}
        for node in ast.walk(function):
            for target in _targets(node):
                _target(target, declared, found)
            if isinstance(node, ast.Call):
                _call(node, found)
    return frozenset(found)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        return [node.target]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [node.optional_vars]
    return []


def _held_name(node: ast.expr) -> str | None:
    """The name a container is held under: `NAME` or `x.NAME`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _target(target: ast.expr, declared: set[str], found: set) -> None:
    pending = [target]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Tuple, ast.List)):
            pending.extend(node.elts)
        elif isinstance(node, ast.Starred):
            pending.append(node.value)
        elif isinstance(node, ast.Name):
            if node.id in declared:
                found.add(("global", node.id))
        elif isinstance(node, ast.Attribute):
            found.add(("attr", node.attr))
        elif isinstance(node, ast.Subscript):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if isinstance(key, str) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "__dict__":
                found.add(("attr", key))        # x.__dict__["NAME"] = ...
            elif isinstance(key, str) and isinstance(node.value, ast.Call) \
                    and isinstance(node.value.func, ast.Name) \
                    and node.value.func.id in ("globals", "vars"):
                found.add(("global", key))      # globals()["NAME"] = ...
            name = _held_name(node.value)
            if name is not None:
                found.add(("item", name))


def _call(node: ast.Call, found: set) -> None:
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
        name = _held_name(func.value)
        if name is not None:
            found.add(("item", name))
    elif isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and len(node.args) > 1:
        name = node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            found.add(("attr", name.value))


class Writers:
    """The writers of the test-side files, read once each, as they are asked about."""

    def __init__(self, read: Callable[[str], bytes | None], files: Iterable[str]):
        self.read = read
        self.files = sorted(set(files))
        self.known: dict[str, frozenset] = {}

    def of(self, rel: str) -> frozenset:
        if rel not in self.known:
            data = self.read(rel)
            self.known[rel] = writes(data) if data is not None else frozenset()
        return self.known[rel]

    def writer(self, file: str | None, key: str) -> str | None:
        """The test-side file whose code writes `key` of the module or class in `file`, or
        None."""
        if not key:
            return None
        if file and self.of(file) & {("global", key), ("item", key), ("attr", key)}:
            return file
        for rel in self.files:
            if rel != file and self.of(rel) & {("item", key), ("attr", key)}:
                return rel
        return None


def judge_data(result: SuiteResult, writers: Writers | None,
               baseline: SuiteResult | None) -> list[str]:
    """Add to `result.audit` each change to the tests' data that is not the tests' own (with
    no `baseline`, the baseline's own run: every change, to excuse the same in the graded
    runs); returns a note for each change golem took for the tests' own."""
    notes = []
    habits = {c["label"] for c in baseline.data} if baseline is not None else set()
    for change in result.data:
        label = change["label"]
        if baseline is None or label in habits:
            result.audit.add((EVENT + label)[:100])
            continue
        if change["filled"]:
            notes.append(f"{label}: an empty container the tests filled")
            continue
        by = writers.writer(change["file"], change["key"]) if writers is not None else None
        if by is not None:
            notes.append(f"{label}: written by the tests' own code ({by})")
            continue
        result.audit.add((EVENT + label)[:100])
    return notes
