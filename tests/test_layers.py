"""golem's imports form layers with no circles: every import (at the top of a module or inside a
function, absolute or relative) goes to a module of the same layer or a lower one, as the Layers
table of docs/architecture.md names them, and no modules import each other, directly or round a
circle. The verifier's helpers run inside the test process and import only each other."""

from __future__ import annotations

import ast
import os
import re
import sys
import unittest

from tests.fixtures import REPO_ROOT

GOLEM = os.path.join(REPO_ROOT, "golem")
ARCHITECTURE = os.path.join(REPO_ROOT, "docs", "architecture.md")
# the bundled example is a project golem works on, not part of golem
EXAMPLES = os.path.join(GOLEM, "examples")
HELPERS = "golem.workflow.verifier.helpers"


def module_files(top: str = GOLEM) -> dict[str, str]:
    """Every module under golem/ by dotted name (a package by its own name), to its path."""
    found = {}
    for base, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__"
                         and os.path.join(base, d) != EXAMPLES)
        package = os.path.relpath(base, os.path.dirname(top)).replace(os.sep, ".")
        for name in sorted(files):
            if name.endswith(".py"):
                stem = name[:-3]
                found[package if stem == "__init__" else f"{package}.{stem}"] = \
                    os.path.join(base, name)
    return found


def imports(name: str, path: str, known: set[str]) -> dict[str, int]:
    """The golem modules the module `name` imports anywhere in it, each with its first line.
    `from P import x` names the module P.x when there is one, else P itself."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        if target in known and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                child = f"{source}.{alias.name}"
                add(child if child in known else source, node.lineno)
    return found


def with_packages(edges: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Each import also runs the `__init__` of every package above the module imported that
    is not already above the importer (its own are running when it is imported)."""
    full = {}
    for name, targets in edges.items():
        found = dict(targets)
        for target, line in targets.items():
            parts = target.split(".")
            for depth in range(1, len(parts)):
                package = ".".join(parts[:depth])
                if package in edges and not name.startswith(package + "."):
                    found.setdefault(package, line)
        full[name] = found
    return full


def graph() -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    files = module_files()
    known = set(files)
    edges = {name: imports(name, path, known) for name, path in files.items()}
    return with_packages(edges), files


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """The rows of the table under `## Layers`, lowest first: (layer, module prefixes)."""
    section = re.search(r"^## Layers\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if section is None:
        return []
    rows = []
    for line in section.group(1).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= {"-"} \
                or cells[0] == "layer":
            continue
        rows.append((cells[0], re.findall(r"`([\w.]+)`", cells[1])))
    return rows


def layer_of(name: str, table: list[tuple[str, list[str]]]) -> int | None:
    """The position of the row whose longest module prefix covers `name`."""
    best, best_len = None, -1
    for position, (_, prefixes) in enumerate(table):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = position, len(prefix)
    return best


def upward(edges, table) -> list[str]:
    """Every import from a lower layer to a higher one, and every module in no layer."""
    found = []
    for name in sorted(edges):
        mine = layer_of(name, table)
        if mine is None:
            found.append(f"{name}: in no layer of docs/architecture.md")
            continue
        for target, line in sorted(edges[name].items()):
            theirs = layer_of(target, table)
            if theirs is not None and theirs > mine:
                found.append(f"{name}:{line} ({table[mine][0]}) imports {target} "
                             f"({table[theirs][0]}, a higher layer)")
    return found


def read_table() -> list[tuple[str, list[str]]]:
    with open(ARCHITECTURE, encoding="utf-8") as handle:
        return layer_table(handle.read())


class LayersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.edges, cls.files = graph()

    def test_the_walk_sees_every_module_and_its_imports(self):
        self.assertGreater(len(self.files), 60)
        self.assertIn("golem.workflow.verifier.helpers.evidence", self.files)
        self.assertTrue(any(self.edges.values()))

    def test_no_import_circles(self):
        found = circles(self.edges)
        if found:
            self.fail("import circles (each a set of modules that import each other, directly "
                      "or round a circle):\n" + "\n".join("  " + " <-> ".join(c) for c in found))

    def test_no_import_from_a_lower_layer_up(self):
        table = read_table()
        self.assertGreater(len(table), 3, "docs/architecture.md has no Layers table")
        found = upward(self.edges, table)
        if found:
            self.fail("imports against the layers of docs/architecture.md:\n" + "\n".join(found))

    def test_every_layer_names_modules_that_exist(self):
        for layer, prefixes in read_table():
            for prefix in prefixes:
                self.assertTrue(prefix in self.files, f"layer {layer} names {prefix}, which "
                                "is no module under golem/")

    def test_the_helpers_import_only_each_other(self):
        found = [f"{name}:{line} imports {target}"
                 for name in sorted(self.edges) if name.startswith(HELPERS)
                 for target, line in sorted(self.edges[name].items())
                 if not target.startswith(HELPERS)]
        self.assertEqual(found, [])


class TheCheckItselfTest(unittest.TestCase):
    """The checks catch what they are for, on a small tree of their own."""

    def test_a_circle_through_a_function_level_relative_import_is_found(self):
        edges = {"p": {"p.a": 1}, "p.a": {}, "p.b": {"p": 3}}
        self.assertEqual(circles(edges), [])
        edges["p.a"] = {"p.b": 9}
        self.assertEqual(circles(edges), [["p", "p.a", "p.b"]])

    def test_importing_a_module_runs_the_packages_above_it(self):
        edges = {"p": {}, "p.a": {"p.b.c": 4}, "p.b": {"p.a": 2}, "p.b.c": {"p.b.d": 1},
                 "p.b.d": {}}
        self.assertEqual(with_packages(edges)["p.a"], {"p.b.c": 4, "p.b": 4})
        self.assertEqual(with_packages(edges)["p.b.c"], {"p.b.d": 1})
        self.assertEqual(circles(with_packages(edges)), [["p.a", "p.b"]])

    def test_imports_are_read_in_every_form(self):
        import tempfile
        with tempfile.TemporaryDirectory() as top:
            pkg = os.path.join(top, "golem")
            os.makedirs(os.path.join(pkg, "sub"))
            for rel in ("__init__.py", "low.py", "sub/__init__.py", "sub/mod.py"):
                open(os.path.join(pkg, rel), "w").close()
            with open(os.path.join(pkg, "sub", "user.py"), "w") as handle:
                handle.write("import golem.low\n"
                             "def later():\n"
                             "    from . import mod\n"
                             "    from .. import low\n"
                             "    from golem.sub import thing\n")
            files = module_files(pkg)
            self.assertEqual(imports("golem.sub.user", files["golem.sub.user"], set(files)),
                             {"golem.low": 1, "golem.sub.mod": 3, "golem.sub": 5})

    def test_a_lower_layer_importing_up_is_found(self):
        table = layer_table("# x\n\n## Layers\n\n| layer | modules |\n|---|---|\n"
                            "| core | `p.low` |\n| top | `p` |\n\n## Next\n| x | `p.low` |\n")
        self.assertEqual(table, [("core", ["p.low"]), ("top", ["p"])])
        self.assertEqual(upward({"p": {"p.low": 1}, "p.low": {}}, table), [])
        self.assertEqual(upward({"p": {}, "p.low": {"p": 2}}, table),
                         ["p.low:2 (core) imports p (top, a higher layer)"])


if __name__ == "__main__":
    sys.exit(unittest.main())
