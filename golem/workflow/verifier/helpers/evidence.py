"""Runs inside the test process: the record stream to golem, and the guard over the test
machinery. golem's unittest driver and pytest plugin load this file by its path.

Records are JSON objects, one per line, written with `os.write` to the descriptor named by
GOLEM_EVIDENCE_FD: a pipe golem reads while the run goes on, so a record, once written,
cannot be taken back. The serializer is this module's own (no `json`), and everything it
calls is taken when the module loads, before any code under test runs.

The guard records every function, method, class and instance found in the modules it is
given (and in the classes defined there) when it starts, and names whatever was replaced,
rebound or added by the end. Code under test shares this process, so the guard cannot stop
code that puts things back before the end; it makes the common forms visible.

Standard library only, nothing from golem, and nothing imported beyond what the test
interpreter has already loaded.
"""

import os
import sys

_write, _environ, _relpath, _realpath = os.write, os.environ, os.path.relpath, os.path.realpath
_addaudithook, _getframe = sys.addaudithook, sys._getframe
_O_ACCMODE = getattr(os, "O_ACCMODE", 3)
_sep, _isinstance, _type, _vars, _callable = os.sep, isinstance, type, vars, callable
_ModuleType = _type(sys)
_FunctionType = _type(lambda: None)
_DESCRIPTORS = (classmethod, staticmethod, property)
_ESCAPES = {code: "\\u%04x" % code for code in (*range(32), *range(0xD800, 0xE000))}
_ESCAPES.update({0x22: '\\"', 0x5C: "\\\\"})


def _json(value) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _isinstance(value, int):
        return str(int(value))
    if _isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if _isinstance(value, dict):
        return "{" + ",".join(_json(str(k)) + ":" + _json(v) for k, v in value.items()) + "}"
    if _isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return _json(str(value))


class Stream:
    """The record stream to golem (nothing is written when golem did not start the run)."""

    __slots__ = ("fd",)     # no instance attribute can stand in for `emit`

    def __init__(self):
        fd = _environ.pop("GOLEM_EVIDENCE_FD", "")
        self.fd = int(fd) if fd.isdigit() else -1

    def emit(self, **record) -> None:
        if self.fd < 0:
            return
        data = (_json(record) + "\n").encode("utf-8", "surrogatepass")
        while data:
            try:
                data = data[_write(self.fd, data):]
            except InterruptedError:
                continue
            except OSError:
                self.fd = -1    # golem is gone: the run is void anyway
                return


_RELATIVE = {}


def relative(path, cwd: str):
    """`path` relative to `cwd` when it lies inside it, else None."""
    if not path:
        return None
    key = (path, cwd)
    if key in _RELATIVE:
        return _RELATIVE[key]
    try:
        real = _realpath(path)
    except (TypeError, ValueError):
        return None
    found = None
    if real != cwd and real.startswith(cwd + _sep):
        found = _relpath(real, cwd).replace(_sep, "/")
    _RELATIVE[key] = found
    return found


def code_file(obj):
    """The file the code of a function (or method, or wrapped function) was compiled from."""
    for _ in range(20):
        wrapped = getattr(obj, "__wrapped__", None) if not _isinstance(obj, _type) else None
        if wrapped is None:
            break
        obj = wrapped
    obj = getattr(obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    return getattr(code, "co_filename", None)


def origins(objects, cwd: str) -> list:
    """Workspace files (relative to `cwd`) the code of `objects` comes from."""
    found = []
    for obj in objects:
        rel = relative(code_file(obj), cwd)
        if rel and rel not in found:
            found.append(rel)
    return found


def class_code(cls) -> list:
    """The functions a class and its bases (outside unittest and the builtins) define."""
    found = []
    for klass in getattr(cls, "__mro__", ()):
        module = getattr(klass, "__module__", "")
        if module in ("builtins",) or module == "unittest" or module.startswith("unittest."):
            continue
        for value in list(_vars(klass).values()):
            if _callable(value) or _isinstance(value, _DESCRIPTORS):
                found.append(getattr(value, "__func__", value))
    return found


def _guarded(value, prefixes) -> bool:
    if _isinstance(value, _ModuleType):
        return False
    if _callable(value) or _isinstance(value, _DESCRIPTORS):
        return True
    module = getattr(_type(value), "__module__", "") or ""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _identity(value) -> tuple:
    if _isinstance(value, _FunctionType):
        return (value, value.__code__, value.__defaults__, value.__kwdefaults__)
    if _isinstance(value, (classmethod, staticmethod)):
        inner = value.__func__
        return (value, inner, getattr(inner, "__code__", None))
    if _isinstance(value, property):
        return (value, value.fget, value.fset, value.fdel)
    if _isinstance(value, _type):
        return (value, value.__bases__)
    return (value,)


def members(prefixes, modules=()) -> dict:
    """label -> identity of every guarded member of the modules named by `prefixes` (and
    of `modules`), and of the classes they define. Class members are labelled with "::"."""
    chosen = [(name, module) for name, module in list(sys.modules.items())
              if _isinstance(module, _ModuleType)
              and any(name == p or name.startswith(p + ".") for p in prefixes)]
    chosen += [(getattr(m, "__name__", "?"), m) for m in modules]
    found = {}
    for name, module in chosen:
        for attr, value in list(_vars(module).items()):
            if not _guarded(value, prefixes):
                continue
            found[name + "." + attr] = _identity(value)
            if _isinstance(value, _type) and getattr(value, "__module__", None) == name:
                for key, member in list(_vars(value).items()):
                    if _callable(member) or _isinstance(member, _DESCRIPTORS):
                        found[name + "." + attr + "::" + key] = _identity(member)
    return found


def changed(before: dict, after: dict) -> list:
    """Labels whose member was replaced or removed, or added to a guarded class."""
    names = []
    for label, old in before.items():
        new = after.get(label)
        if new is None or len(new) != len(old) or any(a is not b for a, b in zip(old, new)):
            names.append(label.replace("::", "."))
    classes = {label.split("::")[0] for label in before if "::" in label}
    for label in after:
        if "::" in label and label not in before and label.split("::")[0] in classes:
            names.append(label.replace("::", "."))
    return names


def namespace(objects) -> dict:
    """label -> identity of the callables and classes in test modules and test classes, to
    see whether the run rebound them (a test module's `add`, a test class's `test_add`)."""
    found = {}
    for label, space in objects:
        for key, value in list(space.items()):
            if _callable(value) or _isinstance(value, _DESCRIPTORS):
                found[label + "." + key] = _identity(value)
    return found


def rebound(before: dict, after: dict) -> list:
    """Labels of `namespace` entries that the run replaced or removed."""
    return [label for label, old in before.items()
            if label not in after or any(a is not b for a, b in zip(old, after[label]))]


_CODE = (".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd")


def watch_reads(stream, cwd: str, limit: int = 5000) -> None:
    """Record every file of the workspace (not code) that the tests open, or try to open,
    for reading, with the workspace file whose code asked for it: one `read` record per
    pair. golem protects what the baseline's tests read as test data."""
    seen = set()

    def hook(event, args):
        if event != "open" or len(seen) >= limit:
            return
        try:
            path, mode, flags = args[0], args[1], args[2]
            if not _isinstance(path, str) or path.endswith(_CODE):
                return
            if mode is not None:
                if "r" not in mode or "+" in mode:
                    return
            elif not _isinstance(flags, int) or flags & _O_ACCMODE != os.O_RDONLY:
                return
            rel = relative(path, cwd)
            if rel is None:
                return
            frame, opener = _getframe(1), None
            for _ in range(200):
                if frame is None:
                    break
                opener = relative(frame.f_code.co_filename, cwd)
                if opener:
                    break
                frame = frame.f_back
            if (rel, opener) not in seen:
                seen.add((rel, opener))
                stream.emit(e="read", path=rel, by=opener)
        except Exception:
            return      # never in the way of the code under test

    _addaudithook(hook)
