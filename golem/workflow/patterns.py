"""The patterns the scan of a change looks for, found in one module's syntax tree.

`Finder` walks a module and records every occurrence of a pattern with its line span;
golem/workflow/suspicious.py keeps those the change added. The kinds are listed, and the
literal heuristic explained, in docs/verification.md.
"""

from __future__ import annotations

import ast
from typing import Iterable

RUNNERS = {"unittest", "pytest", "_pytest"}
EXITS = {"sys.exit", "os._exit", "os.abort", "atexit.register", "exit", "quit"}
FRAMES = {"inspect.stack", "inspect.currentframe", "inspect.getouterframes", "inspect.trace",
          "sys._getframe", "traceback.extract_stack", "traceback.walk_stack"}


def _key(value: object) -> str:
    return f"{type(value).__name__}:{value!r}"


def _imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted module or object it stands for (`import os as o`: o -> os)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _literal(value: object) -> bool:
    """A literal distinctive enough to count as copied from a test."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (str, bytes)):
        return len(value) >= 3
    if isinstance(value, (int, float, complex)):
        return value not in (0, 1)
    return False


def _literals(node: ast.AST | None, deep: bool) -> list[object]:
    """Literal values in `node`: everywhere when `deep`, else only in a literal or container."""
    if node is None:
        return []
    if deep:
        return [n.value for n in ast.walk(node)
                if isinstance(n, ast.Constant) and _literal(n.value)]
    if isinstance(node, ast.Constant):
        return [node.value] if _literal(node.value) else []
    if isinstance(node, ast.UnaryOp):
        return _literals(node.operand, False)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for item in node.elts for v in _literals(item, False)]
    if isinstance(node, ast.Dict):
        return [v for item in [*node.keys, *node.values] for v in _literals(item, False)]
    return []


def assertion_literals(sources: Iterable[str]) -> set:
    """Literals used in the assertions of these test sources, as (type name, value)."""
    found: set = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                found.update(_literals(node.test, True))
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else \
                    func.id if isinstance(func, ast.Name) else ""
                if name.lower().startswith(("assert", "fail")):
                    for arg in [*node.args, *(k.value for k in node.keywords)]:
                        found.update(_literals(arg, True))
    return {(type(v).__name__, v) for v in found}


class Finder(ast.NodeVisitor):
    """Every pattern of interest in one module, with its line span."""

    def __init__(self, tree: ast.Module, literals: set):
        self.names = _imports(tree)
        self.literals = literals
        self.scope: list[str] = []
        # (kind, key, first line, last line, detail, enclosing function)
        self.found: list[tuple[str, str, int, int, str, str]] = []
        # (function, "compares with" or "returns", type) -> comparisons or returns of a literal
        self.literal_sites: dict[tuple[str, str, str], int] = {}

    def dotted(self, node: ast.AST) -> str:
        """`a.b.c` for a name or attribute chain, imports resolved; "" for anything else."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else ""
        return ""

    def add(self, node: ast.AST, kind: str, key: str, detail: str) -> None:
        """Record one occurrence; `key` says which occurrences are the same pattern."""
        end = getattr(node, "end_lineno", None) or node.lineno
        self.found.append((kind, key, node.lineno, end, detail, ".".join(self.scope)))

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and \
                test.left.id == "__name__" and isinstance(test.ops[0], ast.Eq):
            for child in node.orelse:      # the __main__ block itself may exit
                self.visit(child)
            self.visit(test)
            return
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            if self.dotted(decorator) == "atexit.register":
                self.add(decorator, "exit", "atexit.register",
                         f"{node.name} registered with atexit")
        returns = list(_returns(node.body))
        values = [r.value.value if isinstance(r.value, ast.Constant) else r for r in returns]
        constant = bool(returns) and all(not isinstance(v, ast.AST) for v in values)
        if node.name in ("__eq__", "__ne__") and constant:
            wanted = node.name == "__eq__"
            if wanted in values and all(v in (wanted, NotImplemented) for v in values):
                self.add(node, "always-equal", node.name,
                         f"{node.name} always returns {wanted}: compares equal to anything"
                         if wanted else f"{node.name} always returns False")
        elif node.name == "__hash__" and constant:
            self.add(node, "always-equal", "__hash__", "__hash__ returns a constant")
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            self._target(target, "assigns")
            name = target.attr if isinstance(target, ast.Attribute) else \
                target.id if isinstance(target, ast.Name) else ""
            value = node.value
            if name == "__eq__" and isinstance(value, ast.Lambda) and \
                    isinstance(value.body, ast.Constant) and value.body.value is True:
                self.add(node, "always-equal", "__eq__",
                         "__eq__ is a lambda returning True: compares equal to anything")
        self.generic_visit(node)

    visit_AugAssign = visit_AnnAssign = visit_Assign

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._target(target, "deletes")
        self.generic_visit(node)

    def _target(self, target: ast.AST, verb: str) -> None:
        if isinstance(target, ast.Attribute):
            owner = self.dotted(target.value)
            if owner.split(".")[0] in RUNNERS:
                self.add(target, "runner-patch", f"{owner}.{target.attr}",
                         f"{verb} {owner}.{target.attr}: changes how tests run or report")
        elif isinstance(target, ast.Subscript) and self.dotted(target.value) == "sys.modules":
            self.add(target, "runner-patch", "sys.modules",
                     f"{verb} an entry of sys.modules: replaces a module for every importer")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for item in target.elts:
                self._target(item, verb)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if not node.level else []
        for module in modules:
            if module.split(".")[0] in RUNNERS:
                self.add(node, "runner-import", module.split(".")[0],
                         f"imports {module} outside the tests")

    visit_ImportFrom = visit_Import

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        name = self.dotted(exc) if exc is not None else ""
        if name in ("SystemExit", "builtins.SystemExit"):
            self.add(node, "exit", "SystemExit", "raises SystemExit: the process ends")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.dotted(node.func)
        if name in EXITS:
            why = "registers code to run at exit" if name == "atexit.register" else \
                "ends the process"
            self.add(node, "exit", name, f"calls {name}: {why}")
        elif name in FRAMES:
            self.add(node, "stack-inspection", name, f"calls {name}: looks at its callers")
        elif name in ("setattr", "delattr") and node.args:
            owner = self.dotted(node.args[0])
            if owner.split(".")[0] in RUNNERS:
                self.add(node, "runner-patch", f"{owner}.*", f"{name} on {owner}: changes "
                         "how tests run or report")
        elif name in ("__import__", "importlib.import_module") and node.args and \
                isinstance(node.args[0], ast.Constant) and \
                str(node.args[0].value).split(".")[0] in RUNNERS:
            self.add(node, "runner-import", str(node.args[0].value).split(".")[0],
                     f"imports {node.args[0].value} outside the tests")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and ("PYTEST_CURRENT_TEST" in node.value
                                            or node.value in RUNNERS):
            self.add(node, "test-detection", node.value,
                     f"mentions {node.value!r}: behaves differently under a test runner")

    def _site(self, node: ast.AST, verb: str, values: list[object]) -> None:
        scope = ".".join(self.scope)
        for name in {type(v).__name__ for v in values}:
            site = (scope, verb, name)
            self.literal_sites[site] = self.literal_sites.get(site, 0) + 1
        for value in values:
            if (type(value).__name__, value) in self.literals:
                self.add(node, "test-literal", _key(value), f"{verb}|{value!r}")

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        self._site(node, "compares with", [v for o in operands for v in _literals(o, False)])
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        self._site(node, "returns", _literals(node.value, False))
        self.generic_visit(node)


def _returns(body: list[ast.stmt]):
    """The return statements of a function body, not of functions nested in it."""
    for stmt in body:
        for node in _walk_local(stmt):
            if isinstance(node, ast.Return):
                yield node


def _walk_local(node: ast.AST):
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                  ast.ClassDef)):
            yield from _walk_local(child)
