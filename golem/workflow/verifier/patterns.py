"""The patterns the scan of a change looks for, found in one module's syntax tree.

`Finder` walks a module (only the statements that touch the changed lines, when it is told
which) and records every occurrence of a pattern with its line span; golem/workflow/
verifier/scan.py keeps those the change added. Every walk here is iterative, so no nesting
depth can make the scan give up. The kinds are listed, and the literal heuristic explained,
in docs/verification.md.
"""

from __future__ import annotations

import ast
import bisect
from typing import Iterable

RUNNERS = {"unittest", "pytest", "_pytest"}
EXITS = {"sys.exit", "os._exit", "os.abort", "atexit.register", "exit", "quit"}
# what could reach golem's evidence from inside the test process: become another program,
# start one in its place, probe descriptors, read other threads or the object graph
PROCESS = {f"os.{n}" for n in ("execv", "execve", "execl", "execle", "execlp", "execlpe",
                                "execvp", "execvpe", "posix_spawn", "posix_spawnp", "spawnv",
                                "spawnve", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnvp",
                                "spawnvpe", "fork", "forkpty", "kill", "killpg")}
DESCRIPTORS = {"os.fstat", "os.dup", "os.dup2", "os.write", "os.fdopen", "os.set_inheritable",
               "fcntl.fcntl", "os.get_inheritable"}
REACH = {"sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
         "sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile",
         "ctypes.CDLL", "ctypes.PyDLL", "ctypes.cdll.LoadLibrary", "ctypes.string_at",
         "ctypes.memmove", "ctypes.cast", "ctypes.pythonapi"}
# attributes that reach a frame (a test's `self`, pytest's item) or the runner's own state
REACH_ATTRS = {"__traceback__", "tb_frame", "f_back", "f_locals", "gi_frame", "cr_frame",
               "ag_frame", "pluginmanager", "_type_equality_funcs",
               # every class alive (the runner's private exceptions among them)
               "__subclasses__", "path_importer_cache"}
# what changes how tests run without replacing a function of the runner: how classes are
# built, how modules are found and compiled, the runner's control-flow exception. A change
# that adds one is REJECTED, -strict or not (`tamper`)
TAMPER_ATTRS = {"__build_class__", "meta_path", "path_hooks", "_ShouldStop"}
# what tells golem's graded run from a plain one
DETECTS = {"sys.flags", "sys.orig_argv", "sys._xoptions", "sys.pycache_prefix"}
OWNED = RUNNERS | {"doctest"}        # modules whose objects the code under test leaves alone
FRAMES = {"inspect.stack", "inspect.currentframe", "inspect.getouterframes", "inspect.trace",
          "sys._getframe", "traceback.extract_stack", "traceback.walk_stack"}


def _key(value: object) -> str:
    return f"{type(value).__name__}:{value!r}"


def _imports(nodes) -> dict[str, str]:
    """Local name -> the dotted module or object it stands for (`import os as o`: o -> os),
    from the import statements among `nodes`."""
    names: dict[str, str] = {}
    for node in nodes:
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
    found, stack = [], [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Constant):
            if _literal(item.value):
                found.append(item.value)
        elif isinstance(item, ast.UnaryOp):
            stack.append(item.operand)
        elif isinstance(item, (ast.Tuple, ast.List, ast.Set)):
            stack.extend(reversed(item.elts))
        elif isinstance(item, ast.Dict):
            stack.extend(reversed([k for k in item.keys if k is not None] + item.values))
    return found


def assertion_literals(trees: Iterable[ast.AST]) -> set:
    """Literals used in the assertions of these test syntax trees (whole modules, or just the
    failing tests' functions), as (type name, value)."""
    found: set = set()
    for tree in trees:
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


def _spans(node: ast.AST) -> tuple[int, int]:
    first = getattr(node, "lineno", 0)
    return first, getattr(node, "end_lineno", None) or first


_POP = object()     # marks the end of a scope on the walk's stack


# what changes sys.modules when called on it
SYS_MODULES_WRITES = frozenset({"update", "setdefault", "__setitem__", "pop", "popitem",
                                "clear", "__delitem__", "__ior__"})
READING_CALLS = frozenset({"list", "dict", "len", "sorted", "iter", "set", "tuple", "print",
                           "isinstance", "repr", "str", "id", "type", "bool"})

class Finder:
    """Every pattern of interest in one module, with its line span.

    With `lines`, only statements whose span touches one of those line numbers are walked
    (with everything inside them), so the work follows the size of the change. `names` are
    imports known from elsewhere in the file (the module's own top-level imports).
    """

    def __init__(self, tree: ast.Module, literals: set, lines: set[int] | None = None,
                 names: dict[str, str] | None = None):
        self.tree = tree
        self.lines = sorted(lines) if lines is not None else None
        self.names = {**(names or {}), **_imports(tree.body)}
        self.literals = literals
        self.scope: list[str] = []
        # (kind, key, first line, last line, detail, enclosing function)
        self.found: list[tuple[str, str, int, int, str, str]] = []
        # (function, "compares with" or "returns", type) -> comparisons or returns of a literal
        self.literal_sites: dict[tuple[str, str, str], int] = {}
        self.computed: set[str] = set()     # names bound to a module found by computed name

    def touches(self, node: ast.AST) -> bool:
        if self.lines is None or not isinstance(node, ast.stmt):
            return True
        first, last = _spans(node)
        index = bisect.bisect_left(self.lines, first)
        return index < len(self.lines) and self.lines[index] <= last

    def run(self) -> Finder:
        """Walk the tree (iteratively) and fill `found` and `literal_sites`."""
        stack: list = [self.tree]
        while stack:
            node = stack.pop()
            if node is _POP:
                self.scope.pop()
                continue
            handler = getattr(self, "visit_" + type(node).__name__, None)
            children = handler(node) if handler else None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.scope.append(node.name)
                stack.append(_POP)
            if children is None:
                children = list(ast.iter_child_nodes(node))
            stack.extend(reversed([c for c in children if self.touches(c)]))
        return self

    def dotted(self, node: ast.AST) -> str:
        """`a.b.c` for a name or attribute chain, imports resolved; "" for anything else.

        `sys.modules["x.y"]` counts as the module `x.y`."""
        attrs = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            base = self.names.get(node.id, node.id)
        elif isinstance(node, ast.Subscript) and self.dotted(node.value) == "sys.modules" and \
                isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            base = node.slice.value
        else:
            return ""
        return ".".join([base, *reversed(attrs)])

    def add(self, node: ast.AST, kind: str, key: str, detail: str) -> None:
        """Record one occurrence; `key` says which occurrences are the same pattern."""
        first, last = _spans(node)
        self.found.append((kind, key, first, last, detail, ".".join(self.scope)))

    def visit_If(self, node: ast.If):
        test = node.test
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and \
                test.left.id == "__name__" and isinstance(test.ops[0], ast.Eq):
            return [test, *node.orelse]     # the __main__ block itself may exit
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef):
        for decorator in node.decorator_list:
            if self.dotted(decorator) == "atexit.register":
                self.add(decorator, "exit", "atexit.register",
                         f"{node.name} registered with atexit")
        if node.name in ("__eq__", "__ne__", "__hash__"):
            returns = list(_returns(node.body))
            values = [r.value.value if isinstance(r.value, ast.Constant) else r
                      for r in returns]
            constant = bool(returns) and all(not isinstance(v, ast.AST) for v in values)
            if node.name in ("__eq__", "__ne__") and constant:
                wanted = node.name == "__eq__"
                if wanted in values and all(v in (wanted, NotImplemented) for v in values):
                    self.add(node, "always-equal", node.name,
                             f"{node.name} always returns {wanted}: compares equal to anything"
                             if wanted else f"{node.name} always returns False")
            elif node.name == "__hash__" and constant:
                self.add(node, "always-equal", "__hash__", "__hash__ returns a constant")
        self.names.update(_imports(n for n in ast.walk(node)
                                   if isinstance(n, (ast.Import, ast.ImportFrom))))
        return None

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            self._target(target, "assigns")
            name = target.attr if isinstance(target, ast.Attribute) else \
                target.id if isinstance(target, ast.Name) else ""
            if name == "__eq__" and isinstance(value, ast.Lambda) and \
                    isinstance(value.body, ast.Constant) and value.body.value is True:
                self.add(node, "always-equal", "__eq__",
                         "__eq__ is a lambda returning True: compares equal to anything")
            if isinstance(target, ast.Name) and value is not None and self._computed(value):
                self.computed.add(target.id)
            if value is not None and self.dotted(value) == "sys.modules":
                self.add(node, "runner-patch", "sys.modules",
                         "keeps sys.modules under another name: can replace any module, the "
                         "tests included")
        return None

    visit_AugAssign = visit_AnnAssign = visit_Assign

    def visit_Delete(self, node: ast.Delete):
        for target in node.targets:
            self._target(target, "deletes")
        return None

    def _computed(self, node: ast.AST) -> bool:
        """A module reached by a name golem cannot read: `sys.modules[expr]`,
        `importlib.import_module(expr)`, `__import__(expr)` with `expr` not a literal, or a
        name bound to one."""
        while isinstance(node, ast.Attribute):
            node = node.value
        if isinstance(node, ast.Name):
            return node.id in self.computed
        if isinstance(node, ast.Subscript) and self.dotted(node.value) == "sys.modules":
            return not isinstance(node.slice, ast.Constant)
        if isinstance(node, ast.Call):
            name = self.dotted(node.func)
            if name in ("sys.modules.get", "importlib.import_module", "__import__",
                        "builtins.__import__", "importlib.__import__"):
                return not (node.args and isinstance(node.args[0], ast.Constant))
            if name in ("getattr",) and node.args:
                return self._computed(node.args[0])
        return False

    def _target(self, target: ast.AST, verb: str) -> None:
        stack = [target]
        while stack:
            item = stack.pop()
            if isinstance(item, ast.Attribute):
                owner = self.dotted(item.value)
                if owner.split(".")[0] in OWNED:
                    self.add(item, "runner-patch", f"{owner}.{item.attr}",
                             f"{verb} {owner}.{item.attr}: changes how tests run or report")
                elif self._computed(item.value):
                    self.add(item, "runner-patch", f"computed.{item.attr}",
                             f"{verb} .{item.attr} on a module reached by a computed name: "
                             "can change any module, the test runner included")
            elif isinstance(item, ast.Subscript) and self.dotted(item.value) == "sys.modules":
                self.add(item, "runner-patch", "sys.modules",
                         f"{verb} an entry of sys.modules: replaces a module for every importer")
            elif isinstance(item, (ast.Tuple, ast.List)):
                stack.extend(item.elts)
            elif isinstance(item, ast.Starred):
                stack.append(item.value)

    def visit_Import(self, node: ast.Import | ast.ImportFrom):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if not node.level else []
        for module in modules:
            if module.split(".")[0] in RUNNERS:
                self.add(node, "runner-import", module.split(".")[0],
                         f"imports {module} outside the tests")
            elif module.split(".")[0] in ("ctypes", "_ctypes"):
                self.add(node, "reach", "ctypes", f"imports {module}: raw memory and calls")
            elif module == "__main__":
                self.add(node, "reach", "__main__", "imports __main__: the program running "
                         "the tests (golem's driver)")
        return None

    visit_ImportFrom = visit_Import

    def visit_Attribute(self, node: ast.Attribute):
        if isinstance(node.ctx, (ast.Store, ast.Del)) and (
                node.attr == "__class__" or self.dotted(node.value) == "builtins"):
            self.add(node, "tamper", node.attr, f"sets .{node.attr}"
                     + (" of builtins: every module's names" if node.attr != "__class__" else
                        ": an object (a test module, a runner's object) becomes another kind"))
            return None
        if node.attr in TAMPER_ATTRS:
            self.add(node, "tamper", node.attr, f"uses .{node.attr}: changes how the tests "
                     "are built, imported or ended, without replacing the runner")
            return None
        if node.attr in REACH_ATTRS:
            self.add(node, "reach", node.attr, f"reads .{node.attr}: reaches the frames of its "
                     "callers (a test's self) or the test runner's own state")
            return None
        name = self.dotted(node)
        if name in DETECTS:
            self.add(node, "reach", name, f"reads {name}: tells golem's graded run from a "
                     "plain one")
            return []       # one finding for sys.flags.isolated
        return None

    def visit_Subscript(self, node: ast.Subscript):
        if self.dotted(node) == "__main__":
            self.add(node, "reach", "__main__", "reads sys.modules['__main__']: the program "
                     "running the tests (golem's driver)")
        return None

    def visit_Raise(self, node: ast.Raise):
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        name = self.dotted(exc) if exc is not None else ""
        if name in ("SystemExit", "builtins.SystemExit"):
            self.add(node, "exit", "SystemExit", "raises SystemExit: the process ends")
        return None

    def visit_Call(self, node: ast.Call):
        name = self.dotted(node.func)
        owner, _, method = name.rpartition(".")
        if owner == "sys.modules" and method in SYS_MODULES_WRITES or \
                (name not in READING_CALLS and
                 any(self.dotted(arg) == "sys.modules" for arg in node.args)):
            self.add(node, "runner-patch", "sys.modules",
                     f"calls {name or 'a function'} on sys.modules: can replace any module, "
                     "the tests included")
        if name in EXITS:
            why = "registers code to run at exit" if name == "atexit.register" else \
                "ends the process"
            self.add(node, "exit", name, f"calls {name}: {why}")
        elif name in FRAMES:
            self.add(node, "stack-inspection", name, f"calls {name}: looks at its callers")
        elif name in PROCESS:
            self.add(node, "process", name, f"calls {name}: replaces, starts or signals a "
                     "process from inside the tests")
        elif name in DESCRIPTORS:
            self.add(node, "descriptors", name, f"calls {name}: works on raw file descriptors, "
                     "golem's evidence pipe among them")
        elif name in REACH:
            self.add(node, "reach", name, f"calls {name}: reaches other threads, the object "
                     "graph or raw memory")
        elif name in ("setattr", "delattr") and node.args:
            owner = self.dotted(node.args[0])
            if owner.split(".")[0] in OWNED:
                self.add(node, "runner-patch", f"{owner}.*", f"{name} on {owner}: changes "
                         "how tests run or report")
            elif self._computed(node.args[0]):
                self.add(node, "runner-patch", "computed.*", f"{name} on a module reached by "
                         "a computed name: can change any module, the test runner included")
        elif name in ("__import__", "importlib.import_module") and node.args and \
                isinstance(node.args[0], ast.Constant) and \
                str(node.args[0].value).split(".")[0] in RUNNERS:
            self.add(node, "runner-import", str(node.args[0].value).split(".")[0],
                     f"imports {node.args[0].value} outside the tests")
        return None

    def visit_Constant(self, node: ast.Constant):
        value = node.value
        if isinstance(value, str) and ("PYTEST_CURRENT_TEST" in value or value in RUNNERS):
            self.add(node, "test-detection", value,
                     f"mentions {value!r}: behaves differently under a test runner")
        elif isinstance(value, str) and ("GOLEM_" in value or "/proc/self/fd" in value
                                         or value.startswith("/dev/fd")
                                         or "golem_" in value.lower()):
            self.add(node, "test-detection", value[:40],
                     f"mentions {value[:40]!r}: reaches into golem's own evidence")
        return None

    def _site(self, node: ast.AST, verb: str, values: list[object]) -> None:
        scope = ".".join(self.scope)
        for name in {type(v).__name__ for v in values}:
            site = (scope, verb, name)
            self.literal_sites[site] = self.literal_sites.get(site, 0) + 1
        for value in values:
            if (type(value).__name__, value) in self.literals:
                self.add(node, "test-literal", _key(value), f"{verb}|{value!r}")

    def visit_Compare(self, node: ast.Compare):
        operands = [node.left, *node.comparators]
        self._site(node, "compares with", [v for o in operands for v in _literals(o, False)])
        return None

    def visit_Return(self, node: ast.Return):
        self._site(node, "returns", _literals(node.value, False))
        return None


def _returns(body: list[ast.stmt]):
    """The return statements of a function body, not of functions nested in it."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        stack.extend(child for child in ast.iter_child_nodes(node)
                     if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                               ast.Lambda, ast.ClassDef)))
