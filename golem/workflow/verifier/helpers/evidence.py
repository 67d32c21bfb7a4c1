"""Runs inside the test process: the record stream to golem, and the guard over the test
machinery. golem's unittest driver and pytest plugin load this file by its path.

Records are JSON objects, one per line, written with `os.write` to the descriptor named by
GOLEM_EVIDENCE_FD: a pipe golem reads while the run goes on, so a record, once written,
cannot be taken back (passing tests in small batches, everything else at once). The stream
counts only when it ends with the seal (below). The serializer is this module's own (no
`json`), and everything it calls is taken when the module loads, before any code under test
runs.

The guard records every function, method, class and instance found in the modules it is
given (and in the classes defined there) when it starts, and names whatever was replaced,
rebound or added by the end. Code under test shares this process, so the guard cannot stop
code that puts things back before the end; it makes the common forms visible.

Standard library only, nothing from golem, and nothing imported beyond what the test
interpreter has already loaded.
"""

import os
import sys

import _thread
from _weakref import ref as _weakref
from marshal import loads as _marshal_loads
try:    # the standard library's own SHA-256 (3.11): no OpenSSL to load in every test process
    from _sha256 import sha256 as _sha256
except ImportError:
    from hashlib import sha256 as _sha256

_write, _environ, _relpath, _realpath = os.write, os.environ, os.path.relpath, os.path.realpath
_read, _close, _fstat, _pipe, _getpid = os.read, os.close, os.fstat, os.pipe, os.getpid
_addaudithook, _getframe, _current_frames = sys.addaudithook, sys._getframe, sys._current_frames
_get_ident, _start_thread = _thread.get_ident, _thread.start_new_thread
_set_inheritable, _set_blocking = os.set_inheritable, os.set_blocking
from time import monotonic as _monotonic, sleep as _sleep
try:    # imported now, before the working directory is on sys.path
    import ctypes as _ctypes
except ImportError:                     # pragma: no cover - an interpreter without ctypes
    _ctypes = None
_O_ACCMODE = getattr(os, "O_ACCMODE", 3)
_open, _O_READ = os.open, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_MAGIC = getattr(sys.modules.get("_frozen_importlib_external"), "MAGIC_NUMBER", b"")


def _same_code(kept, ran) -> bool:
    """Whether the code `ran` is `kept` but for its file name: equal as Python compares code,
    and so is every code object inside, in order, down to the instructions the interpreter
    runs (`_co_code_adaptive`: `==` reads instructions in their plain form, so a specialised
    one, or a cache entry written in, would pass it), its qualified name and stack size."""
    code_type = _type(kept)
    if _type(ran) is not code_type or kept != ran:
        return False
    pending = [(kept, ran)]
    while pending:
        a, b = pending.pop()
        if _type(a) is not code_type or _type(b) is not code_type:
            return False
        if getattr(a, "_co_code_adaptive", a.co_code) != \
                getattr(b, "_co_code_adaptive", b.co_code) \
                or a.co_qualname != b.co_qualname or a.co_stacksize != b.co_stacksize:
            return False
        inner_a = [c for c in a.co_consts if _type(c) is code_type]
        inner_b = [c for c in b.co_consts if _type(c) is code_type]
        if len(inner_a) != len(inner_b):
            return False
        pending += zip(inner_a, inner_b)
    return True


def _read_all(path, limit: int = 256 * 1024 * 1024):
    """The bytes of the file at `path` (at most `limit`), or None."""
    try:
        fd = _open(path, _O_READ)
    except (OSError, TypeError, ValueError):
        return None
    try:
        parts, size = [], 0
        while size <= limit:
            part = _read(fd, 1 << 20)
            if not part:
                return b"".join(parts)
            parts.append(part)
            size += len(part)
        return None
    except OSError:
        return None
    finally:
        _close(fd)
_sep, _isinstance, _type, _vars, _callable = os.sep, isinstance, type, vars, callable
_issubclass = issubclass


def _kind(value, kinds) -> bool:
    """`isinstance` by the value's own type: an object of the tree's code (a `__class__` of
    its own) is not asked, so no code of the tree runs while golem looks at it."""
    return _issubclass(_type(value), kinds)

_id, _set, _map, _len, _sum, _all, _list = id, set, map, len, sum, all, list
_ModuleType = _type(sys)
_FunctionType = _type(lambda: None)
_CodeType, _any = _type((lambda: None).__code__), any
_DESCRIPTORS = (classmethod, staticmethod, property)
_ESCAPES = {code: "\\u%04x" % code for code in (*range(32), *range(0xD800, 0xE000))}
_ESCAPES.update({0x22: '\\"', 0x5C: "\\\\"})


def _text(value: str) -> str:
    if value.isprintable() and '"' not in value and "\\" not in value:
        return '"' + value + '"'        # the common case, without a pass per character
    return '"' + value.translate(_ESCAPES) + '"'


def _json(value) -> str:
    kind = _type(value)
    if kind is str:
        return _text(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _isinstance(value, int):
        return str(int(value))
    if _isinstance(value, str):
        return _text(str(value))
    if _isinstance(value, dict):
        return "{" + ",".join(_text(str(k)) + ":" + _json(v) for k, v in value.items()) + "}"
    if _isinstance(value, (list, tuple, set, frozenset)):
        return "[" + _items(_list(value)) + "]"
    return _json(str(value))


def _items(values: list) -> str:
    """The JSON of `values`, without the brackets: a list of plain text with nothing to
    escape (test ids, most often) in one join."""
    if _set(_map(_type, values)) == {str}:
        joined = "".join(values)
        if joined.isprintable() and '"' not in joined and "\\" not in joined:
            return '"' + '","'.join(values) + '"'
    return ",".join([_json(v) for v in values])


FAILING = ("failed", "error")


class Stream:
    """The record stream to golem (nothing is written when golem did not start the run)."""

    # none can stand in for `emit`
    __slots__ = ("fd", "_held", "_size", "_since", "_key", "_head", "_ids")

    def __init__(self):
        fd = _environ.pop("GOLEM_EVIDENCE_FD", "")
        self.fd = int(fd) if fd.isdigit() else -1
        self._held, self._size, self._since = [], 0, _monotonic()
        self._key, self._head, self._ids = None, "", []
        if self.fd >= 0:
            try:    # no program this process starts or becomes inherits it
                _set_inheritable(self.fd, False)
            except OSError:
                self.fd = -1

    def emit(self, **record) -> None:
        if self.fd >= 0:
            self._close_group()
            self._held.append(_json(record) + "\n")
            self.flush()

    def flush(self) -> None:
        """Write what `test` held back. Passing tests are written in batches (at most 16 KiB
        or 50 ms old), failures and every other record at once: the seal, not the moment of
        writing, is what makes a passing outcome golem's."""
        self._close_group()
        held, self._held, self._size, self._since = self._held, [], 0, _monotonic()
        if held and self.fd >= 0:
            self._write("".join(held))

    def test(self, test_id, outcome, file, pseudo, origins) -> None:
        """One finished test. Consecutive tests with the same outcome, file and origins go
        in one record, `{"e":"tests","outcome":...,"file":...,"pseudo":...,"origins":[...],
        "ids":[...]}`: what they share is serialised and read once."""
        if self.fd < 0:
            return
        key = self._key
        # the same objects as the test before (the driver hands over its constants and its
        # per-class values): nothing to compare by value
        if key is None or key[0] is not origins or key[1] is not outcome \
                or key[2] is not file or key[3] is not pseudo:
            if key is None or key[1] != outcome or key[2] != file or key[3] != pseudo \
                    or key[0] != origins:
                self._close_group()
                self._head = ('{"e":"tests","outcome":' + _json(outcome) + ',"file":'
                              + _json(file) + ',"pseudo":' + _json(pseudo) + ',"origins":'
                              + _json(list(origins)) + ',"ids":[')
            self._key = (origins, outcome, file, pseudo)
        self._ids.append(test_id)       # serialised with the batch (`_close_group`)
        self._size += len(test_id) + 3 if _type(test_id) is str else 64
        if outcome in FAILING or self._size > 16384 or _monotonic() - self._since > 0.05:
            self.flush()    # a failure at once: it is evidence even if the run never ends

    def tests(self, ids: list, outcome, file, pseudo, origins) -> None:
        """Finished tests (`ids`, text) that share an outcome, file and origins: `test` for
        each, in one call."""
        if self.fd < 0 or not ids:
            return
        if _set(_map(_type, ids)) != {str} or outcome in FAILING:
            for test_id in ids:
                self.test(test_id, outcome, file, pseudo, origins)
            return
        self.test(ids[0], outcome, file, pseudo, origins)   # the group, opened as for one
        if _len(ids) > 1:
            more = ids[1:]
            self._ids += more
            self._size += _sum(_map(_len, more)) + 3 * _len(more)
            if self._size > 16384 or _monotonic() - self._since > 0.05:
                self.flush()

    def _close_group(self) -> None:
        ids = self._ids
        if ids:
            self._held.append(self._head + _items(ids) + "]}\n")
            self._ids = []

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
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
    if _type(obj) is _FunctionType and "__wrapped__" not in obj.__dict__:
        return obj.__code__.co_filename     # the common case, without a failed lookup
    for _ in range(20):
        wrapped = getattr(obj, "__wrapped__", None) if not _kind(obj, _type) else None
        if wrapped is None:
            break
        obj = wrapped
    obj = getattr(obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    return getattr(code, "co_filename", None)


_ORIGIN = {}     # function (or the id of another callable) -> (it, cwd, its workspace file)


def origin(obj, cwd: str):
    """The workspace file the code of `obj` comes from, once per function. A function is
    its own key (its hash is its identity, and `id` is an audited call, which every audit
    hook of the process sees)."""
    key = getattr(obj, "__func__", obj)
    slot = key if _type(key) is _FunctionType else _id(key)
    held = _ORIGIN.get(slot)
    if held is None or held[0] is not key or held[1] != cwd:
        held = (key, cwd, relative(code_file(obj), cwd))    # `key` kept alive: its id stays
        _ORIGIN[slot] = held
    return held[2]


def origins(objects, cwd: str) -> list:
    """Workspace files (relative to `cwd`) the code of `objects` comes from."""
    found = []
    for obj in objects:
        rel = origin(obj, cwd)
        if rel and rel not in found:
            found.append(rel)
    return found


def test_origins(objects, cls, cwd: str) -> list:
    """Workspace files the code of a test comes from: its own `objects`, then its class's."""
    found = origins(objects, cwd)
    for rel in (class_code(cls, cwd)[0] if cls is not None else ()):
        if rel not in found:
            found.append(rel)
    return found


def _own(klass) -> bool:
    module = getattr(klass, "__module__", "")
    return not (module in ("builtins",) or module == "unittest" or module.startswith("unittest."))


_DEFINED = {}   # class -> (it, cwd, its namespace's size, (files, names) of what it defines)
_PARTS = tuple(vars(property)[name].__get__ for name in ("fget", "fset", "fdel"))


def _property_parts(value) -> list:
    """A property's getter, setter and deleter, read as `property` keeps them (a subclass
    that answers otherwise is not asked)."""
    return [part(value) for part in _PARTS]


def _defined(klass, cwd: str) -> tuple:
    """(the workspace files the code of the functions `klass` defines comes from, the names
    it defines), read once per class and again when its namespace changes size: a base
    shared by many test classes is read once, not once for each."""
    space = _vars(klass)
    held = _DEFINED.get(klass)
    if held is not None and held[0] is klass and held[1] == cwd:
        if held[2] == _len(space):
            return held[3]
        grown = _grown(space, held)
        if grown is not None:
            return grown
    items = _list(space.items())
    files, paths, function, codes = [], {}, _FunctionType, {}
    for name, value in items:
        if _type(value) is function and getattr(value, "__wrapped__", None) is None:
            # `code_file`, read afresh (a function whose code was swapped included): one
            # audited read; its path made relative once
            code = codes[name] = value.__code__
            path = code.co_filename
            rel = paths.get(path, paths)
            if rel is paths:
                rel = paths[path] = relative(path, cwd)
        elif _kind(value, property):     # its getter, setter and deleter
            for part in _property_parts(value):
                rel = origin(part, cwd) if part is not None else None
                if rel and rel not in files:
                    files.append(rel)
            continue
        elif _callable(value) or _kind(value, _DESCRIPTORS):
            rel = origin(getattr(value, "__func__", value), cwd)
        else:
            continue
        if rel and rel not in files:
            files.append(rel)
    found = (files, [name for name, _ in items])
    # the class kept alive (a key); the code of each plain function, for `classes_as_defined`
    _DEFINED[klass] = (klass, cwd, _len(items), found, codes)
    return found


def _grown(space, held):
    """What `_defined` found, when the class has only gained members that hold no code since
    (unittest's `_classSetupFailed`, set on each test class when its tests start): the names
    it defines then, kept for the new size; else None."""
    names = held[3][1]
    if _len(space) <= held[2] or _len(space) - held[2] > 8:
        return None
    known = _set(names)
    added = [key for key in space if key not in known]
    if _len(added) != _len(space) - held[2]:
        return None     # a member went too
    for key in added:
        value = space.get(key)
        if _callable(value) or _kind(value, _DESCRIPTORS):
            return None
    found = (held[3][0], names + added)
    _DEFINED[held[0]] = (held[0], held[1], _len(space), found, held[4])
    return found


_CLASS_CODE = {}    # class -> (it, cwd, its __mro__, the namespaces in it, their sizes, code)


def class_code(cls, cwd: str) -> tuple:
    """(the workspace files the functions of `cls` and of its bases outside unittest and the
    builtins come from, the set of names those classes define: a test method named there has
    its code among them), read once per class and again when a class of its `__mro__` gains
    or loses a member, or the `__mro__` changes. What a test records costs the same however
    many methods its class has."""
    mro = getattr(cls, "__mro__", ())
    # `cls` is its own key, checked by identity: a metaclass that hashes or compares its
    # classes alike only has them read again
    held = _CLASS_CODE.get(cls)
    if held is not None and held[0] is cls and held[2] is mro and held[1] == cwd \
            and _sum(_map(_len, held[3])) == held[4]:
        return held[5]
    classes = _list(mro)
    spaces = tuple([_vars(klass) for klass in classes])
    files, names = [], _set()
    for klass in classes:
        if _own(klass):
            more, defined = _defined(klass, cwd)
            files += [rel for rel in more if rel not in files]
            names.update(defined)
    found = (files, names)
    # kept with the very `__mro__` read above (a new one when `__bases__` is set) and the
    # sizes of the namespaces now
    _CLASS_CODE[cls] = (cls, cwd, mro, spaces, _sum(_map(_len, spaces)), found)
    return found


def _guarded(value, prefixes) -> bool:
    if _kind(value, _ModuleType):
        return False
    if _callable(value) or _kind(value, _DESCRIPTORS):
        return True
    module = getattr(_type(value), "__module__", "") or ""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _identity(value) -> tuple:
    if _kind(value, _FunctionType):
        return (value, value.__code__, value.__defaults__, value.__kwdefaults__)
    if _kind(value, (classmethod, staticmethod)):
        inner = value.__func__
        return (value, inner, getattr(inner, "__code__", None))
    if _kind(value, property):
        return (value, value.fget, value.fset, value.fdel)
    if _kind(value, _type):
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
            if _kind(value, _type) and getattr(value, "__module__", None) == name:
                for key, member in list(_vars(value).items()):
                    if _callable(member) or _kind(member, _DESCRIPTORS):
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


def namespace(objects) -> list:
    """The callables and classes in test modules and test classes, to see whether the run
    rebound them (a test module's `add`, a test class's `test_add`): for each (label, live
    namespace) of `objects`, key -> identity. A function is kept as itself: reading its code
    or defaults is an audited event, and the audit hook (`_audit`) keeps every function
    whose code or defaults are set from now on instead. Labels are made only for what
    `rebound` names."""
    found = []
    function, identity = _FunctionType, _identity
    for label, space in objects:
        kept, cells = {}, {}
        for key, value in list(space.items()):
            if _type(value) is function:
                kept[key] = value
                if value.__closure__:   # a decorator's wrapper: what it calls is in a cell
                    cells[key] = _cells(value)
            elif _callable(value) or _kind(value, _DESCRIPTORS):
                kept[key] = identity(value)
        found.append((label, space, kept, cells))
    return found, len(_SET)


def _cells(function) -> tuple:
    """What the cells of `function`'s closure hold (a cell set empty: itself)."""
    held = []
    for cell in function.__closure__ or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:
            held.append(cell)
    return tuple(held)


_CONTAINERS = (dict, list, set, bytearray)
_RUNNERS_OWN = frozenset({"_class_cleanups", "_classSetupFailed", "pytestmark"})


def _held(value):
    """`value` as golem keeps it to tell later whether it is still the same object: a weak
    reference where its type takes one, else the value itself (numbers, strings, tuples,
    the containers), so keeping it does not keep alive what the tests drop."""
    if _weakrefoffset(_type(value)):
        try:
            return _Weak(value)
        except TypeError:
            pass
    return value


def _is_held(held, value) -> bool:
    """Whether `value` is the object `held` (from `_held`) stands for."""
    if _type(held) is _Weak:
        return held() is value
    return held is value


class _Weak(_weakref):
    """golem's own weak references (a value of the tests may be a weak reference itself)."""

    __slots__ = ()


def data(objects, limit: int = 100_000) -> list:
    """The data of test modules and test classes (what is neither a function, a class, a
    descriptor nor a module; not `__dunder__` names or the runners' own), to see whether the
    run changed it: for each (label, live namespace[, the file of its module]) of `objects`,
    key -> (the value, what a dict, list, set or bytearray holds, or None), each kept as
    `_held` keeps it. A container of more than `limit` entries is kept by identity only."""
    found = []
    held = _held
    for each in objects:
        label, space = each[0], each[1]
        file = each[2] if _len(each) > 2 else None
        kept = {}
        for key, value in list(space.items()):
            if _type(key) is not str or key[:2] == "__" or key in _RUNNERS_OWN \
                    or _callable(value) or _kind(value, (*_DESCRIPTORS, _ModuleType)):
                continue
            kind, shallow = _type(value), None
            if kind in _CONTAINERS and _len(value) <= limit:
                shallow = tuple([(k, held(v)) for k, v in value.items()]) if kind is dict \
                    else tuple(_map(held, value))
            kept[key] = (held(value), shallow)
        for key, value in list(space.items()):      # pytest's marks on its tests and classes
            if _type(key) is not str:
                continue
            own = value.__dict__ if _type(value) is _FunctionType else \
                _class_dict(value) if _kind(value, _type) else None
            marks = own.get("pytestmark") if own is not None else None
            if _type(marks) is list and _len(marks) <= 100:
                kept[key + ".pytestmark"] = ((own, marks), _marks(marks, limit))
        found.append((label, space, kept, file))
    return found


def _marks(marks, limit: int) -> tuple:
    """What pytest's marks hold (a parametrize's list of values included), by identity."""
    shape = [tuple(marks)]
    for mark in marks:
        for part in (getattr(mark, "args", None), getattr(mark, "kwargs", None)):
            if _type(part) is tuple or _type(part) is dict:
                items = tuple(part.items()) if _type(part) is dict else part
                shape.append(items)
                for item in (v for _, v in items) if _type(part) is dict else items:
                    if _type(item) in _CONTAINERS and _len(item) <= limit:
                        shape.append(tuple(item.items()) if _type(item) is dict
                                     else tuple(item))
    return tuple(shape)


def data_changed(before) -> list:
    """What of the data of `data` the run rebound, or changed in place (an entry of a dict,
    list or set replaced, added or removed): for each, {label, key, file, filled}, `filled`
    when a container empty at the snapshot is the same object now and only gained entries
    (a cache or a record the tests fill)."""
    found, missing, same = [], object(), _is_held
    for label, space, kept, file in before:
        for key, (old, shallow) in kept.items():
            filled = False
            if key.endswith(".pytestmark"):
                own, marks = old
                now = _marks(marks, 1 << 62)
                if own.get("pytestmark") is marks and _len(now) == _len(shallow) and _all(
                        _len(a) == _len(b) and _all(x is y for x, y in zip(a, b))
                        for a, b in zip(now, shallow)):
                    continue
            else:
                new = space.get(key, missing)
                if not same(old, new):
                    pass
                elif shallow is None:
                    continue
                else:
                    now = tuple(new.items()) if _type(new) is dict else tuple(new)
                    if _len(now) == _len(shallow) and (
                            _all(a is c and same(d, b) for (a, b), (c, d) in zip(now, shallow))
                            if _type(new) is dict else _all(_map(same, shallow, now))):
                        continue
                    filled = not shallow
            # a mark's change is never the tests' filling: no key to find a writer by
            found.append({"label": label + "." + key,
                          "key": "" if key.endswith(".pytestmark") else key,
                          "file": file, "filled": filled})
    return found


def gained(before, names) -> list:
    """Labels of members named like one of `names` (what unittest's TestCase defines) that a
    class of `namespace` (a class's namespace, not a module's) holds now and did not hold as a
    function, class or descriptor at collection: a test class that gained its own
    `assertEqual` (or `run`, `setUp`, ...) from code that ran with the tests answers in
    unittest's stead, with code that need not come from the tree."""
    snapshot, _ = before
    found = []
    for label, space, kept, _ in snapshot:
        if _type(space) is dict:
            continue        # a module's
        for name in names:
            if name in space and name not in kept:
                value = space.get(name)
                if _callable(value) or _kind(value, _DESCRIPTORS):
                    found.append(label + "." + name)
    return found


def rebound(before) -> list:
    """Labels of `namespace` entries that the run replaced or removed since `before`, or
    whose code or defaults it changed (and did not put back)."""
    snapshot, mark = before
    first = {}
    for obj, name, old in _SET[mark:]:
        first.setdefault((_id(obj), name), (obj, name, old))
    altered = {_id(obj) for obj, name, old in first.values()
               if getattr(obj, name, None) is not old}
    names = []
    function, missing = _FunctionType, object()
    for label, space, kept, cells in snapshot:
        for key, old in kept.items():
            new = space.get(key, missing)
            if new is old and _type(new) is function:
                held = cells.get(key)
                if held is not None:    # a wrapper: what its cells hold, the same objects
                    now = _cells(new)
                    if len(now) != len(held) or not all(a is b for a, b in zip(now, held)):
                        names.append(label + "." + key + " (what it wraps)")
                        continue
                if not altered or _id(new) not in altered:
                    continue
            elif new is not missing and _type(old) is tuple:
                now = _identity(new)
                if len(now) == len(old) and all(a is b for a, b in zip(old, now)):
                    continue
            names.append(label + "." + key)
    return names


_CODE = (".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd")


def watch_reads(stream, cwd: str, limit: int = 5000) -> None:
    """Record every file of the workspace (not code) that the tests open, or try to open,
    for reading, with the workspace file whose code asked for it: one `read` record per
    pair. golem protects what the baseline's tests read as test data.

    Besides `open` (io, os.open, and what is built on them: json, csv, dbm's own files),
    what Python audits as opening data in C: `sqlite3.connect`'s database. A program the
    tests start (`subprocess.Popen`, `os.system`, `os.posix_spawn`, `os.spawn*`) reads in
    a process of its own, unseen: every word of its command line that names an existing
    file of the workspace counts as read, relative to the directory it starts in. A
    directory the tests list (`os.listdir`, `os.scandir`; `glob`, `os.walk` and `pathlib`
    through them) is recorded as `dir/`."""
    seen = set()
    fspath, fsdecode, join, isfile = os.fspath, os.fsdecode, os.path.join, \
        os.path.isfile

    def text(value):
        try:
            value = fspath(value)
            return fsdecode(value) if _isinstance(value, bytes) else value
        except Exception:
            return None

    def emit(path, mark=""):
        rel = relative(path, cwd)
        if rel is None:
            return
        rel += mark
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

    def started(argv, where):
        base = text(where) if where is not None else None
        if _isinstance(argv, (str, bytes)) or not _isinstance(argv, (list, tuple)):
            argv = [argv]
        for item in argv[:200]:
            item = text(item)
            if not item:
                continue
            for word in {item, *item.translate(_WORDS).split()}:
                if word and not word.endswith(_CODE):
                    path = join(base, word) if base else word
                    if isfile(path):
                        emit(path)

    def hook(event, args):
        if event == "object.__getattr__" or event == "builtins.id" or len(seen) >= limit:
            return      # the most frequent events, first out
        try:
            if event == "open":
                path, mode, flags = text(args[0]), args[1], args[2]
                if path is None or path.endswith(_CODE):
                    return
                if mode is not None:
                    if "r" not in mode or "+" in mode:
                        return
                elif not _isinstance(flags, int) or flags & _O_ACCMODE != os.O_RDONLY:
                    return
                emit(path)
            elif event == "sqlite3.connect":
                path = text(args[0])
                if path and path != ":memory:":
                    if path.startswith("file:"):
                        path = path[5:].partition("?")[0]
                    for suffix in ("", "-wal", "-journal"):   # what sqlite reads beside it
                        emit(path + suffix)
            elif event == "subprocess.Popen":
                started(args[1] if args[1] is not None else args[0], args[2])
            elif event in ("os.listdir", "os.scandir"):    # a directory of cases: "dir/"
                path = text(args[0]) if args[0] is not None else "."
                if path is not None:
                    emit(path, "/")
            elif event == "os.system":
                started(args[0], None)
            elif event in ("os.posix_spawn", "os.exec"):
                started(args[1], None)
            elif event == "os.spawn":
                started(args[2], None)
        except Exception:
            return      # never in the way of the code under test

    join = _JOIN.pop() if _JOIN else None
    if join is None or not join(hook):
        _addaudithook(hook)


_WORDS = str.maketrans({c: " " for c in "=:,;|&<>()'\"`"})   # what separates words in a command


# -- the seal and the audit ------------------------------------------------------------------
#
# Code under test runs in this process and can write to the record stream like the driver.
# What it cannot make is the seal: the last record, a MAC with a key golem made for this run
# alone. The key is read from its own pipe, before any code under test is imported, by a
# thread of its own that keeps it only in its frame (no object, global or closure holds it;
# another thread's frames are reachable only through the audited `sys._current_frames`, `gc`
# or `ctypes`). The thread signs once, when asked by `Sealed.end` called straight from the
# driver's own `main` (the very frame that started it) with nothing else on the main
# thread's stack: after the runner returned. A run that leaves early, is replaced by another
# program, or asks from anywhere else, has no seal.
#
# The audit hook (which Python code cannot remove) records what could reach the key or the
# stream from inside: process replacement (blocked), other threads' frames, the garbage
# collector's object lists, tracing, ctypes, a process's memory or descriptor table, and code
# objects swapped on functions. golem compares them with the baseline's.

SEAL_MESSAGE = b"golem-seal-v1"
SEAL_WAIT = 5.0     # seconds the driver waits for the seal at most (`Sealed.end`)
# events whose every occurrence is recorded, by name
_AUDITED = frozenset({"sys._current_frames", "gc.get_objects", "gc.get_referrers",
                      "gc.get_referents", "sys.settrace", "sys.setprofile", "os.exec",
                      "sys.addaudithook"})
_FD_LISTS = ("/proc/self/fd", "/dev/fd", "/proc/thread-self/fd")
_SET_NAMES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
# (function, attribute, its value before) for every function whose code or defaults were set
# since the audit started: what `rebound` checks instead of reading every function
_SET = []
_JOIN = []      # how `watch_reads` joins the audit hook (`_audit`), until it has
_TRUST = []     # how the launcher names pytest's loader to the audit hook, until it has


class Sealed:
    """The seal and the audit of one run; `start` before any code under test is imported."""

    __slots__ = ("_ask", "_answer")

    def __init__(self, ask: int = -1, answer: int = -1):
        self._ask, self._answer = ask, answer

    @staticmethod
    def start(stream) -> "Sealed":
        """Called by the driver's `main`: read the key in a thread of its own, install the
        audit hook; records go to `stream`."""
        key_fd = _environ.pop("GOLEM_SEAL_FD", "")
        fd, sealer = stream.fd, []
        if key_fd.isdigit() and fd >= 0:
            _undumpable()
        _audit(fd, sealer)
        if not key_fd.isdigit() or fd < 0:
            return Sealed()
        ask_r, ask_w = _pipe()
        answer_r, answer_w = _pipe()
        for each in (ask_r, ask_w, answer_r, answer_w):
            _set_inheritable(each, False)
        # the driver's own ends never block: a pipe the code under test filled, or a
        # sealer it stopped, is no seal, at once, never a wait (`end`)
        _set_blocking(ask_w, False)
        _set_blocking(answer_r, False)
        main_frame = _getframe(1)
        sealer.append(_start_thread(_sealer, (int(key_fd), fd, ask_r, answer_w, _get_ident(),
                                              main_frame, Sealed.end.__code__)))
        del main_frame, sealer
        Sealed._answer_of(answer_r)     # the key is read and its pipe closed
        return Sealed(ask_w, answer_r)

    def end(self) -> None:
        """Ask for the seal: call straight from the driver's `main`, after the end record.
        Waits `SEAL_WAIT` seconds at most: the code under test shares the process and can
        write into, read from or close these pipes, so an answer that does not come is no
        seal (golem says so), never a run that hangs."""
        if self._ask < 0:
            return
        try:
            _write(self._ask, b"s")
        except OSError:
            return      # full or closed: no seal
        # waited for here, not in a function of its own: the sealer checks that the main
        # thread's frame is this one, called from the driver's `main`
        fd, deadline, pause = self._answer, _monotonic() + SEAL_WAIT, 0.0002
        while True:
            try:
                got = _read(fd, 1)
            except BlockingIOError:
                got = None
            except OSError:
                return
            if got == b"" or got == b"d" or got == b"n":
                return      # sealed, refused, or every write end closed
            if got is None:
                if _monotonic() > deadline:
                    return
                _sleep(pause)
                pause = min(pause * 2, 0.05)

    @staticmethod
    def _answer_of(fd) -> None:
        """Wait for the sealer's first answer ("r": it holds the key) on `fd`
        (non-blocking), at most `SEAL_WAIT` seconds; before any code under test runs."""
        deadline, pause = _monotonic() + SEAL_WAIT, 0.0002
        while True:
            try:
                got = _read(fd, 1)
            except BlockingIOError:
                got = None
            except OSError:
                return
            if got == b"":
                return      # every write end closed: no answer can come
            if got == b"r":
                return
            if got is None:
                if _monotonic() > deadline:
                    return
                _sleep(pause)
                pause = min(pause * 2, 0.05)


def _undumpable() -> None:
    """PR_SET_DUMPABLE 0 (Linux): no other process of the user, a child the tests start
    included, can read this process's memory through /proc or ptrace."""
    if _ctypes is None or not sys.platform.startswith("linux"):
        return
    try:
        _ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError, TypeError, ValueError):
        pass


def _sealer(key_fd, fd, ask, answer, main_ident, main_frame, end_code):
    # Everything this thread calls is bound here, before any code under test exists: a
    # module attribute or builtin replaced later must not see the key.
    read, write, close, fstat, frames, sha256 = _read, _write, _close, _fstat, \
        _current_frames, _sha256
    error, message = OSError, SEAL_MESSAGE
    try:
        key = read(key_fd, 4096)
        close(key_fd)
    except error:
        key = b""
    if len(key) > 64:
        key = sha256(key).digest()
    key = key + bytes(64 - len(key))
    inner = sha256(bytes(b ^ 0x36 for b in key))
    outer = sha256(bytes(b ^ 0x5C for b in key))
    key = None
    identity = fstat(fd)
    identity = (identity.st_dev, identity.st_ino)
    write(answer, b"r")
    while True:
        try:
            asked = read(ask, 1)
        except error:
            return
        if asked == b"":
            return      # every write end closed
        if asked != b"s":
            continue    # a byte from anywhere else: ignored, the sealer stays
        frame = frames().get(main_ident)
        if frame is None or frame.f_code is not end_code or frame.f_back is not main_frame \
                or inner is None:
            frame = None
            write(answer, b"n")
            continue    # asked from anywhere but the driver's main: no seal
        frame = None
        try:
            now = fstat(fd)
            if (now.st_dev, now.st_ino) == identity:
                mac = inner.copy()
                mac.update(message)
                digest = mac.digest()
                mac = outer.copy()
                mac.update(digest)
                write(fd, b'{"e":"seal","mac":"' + mac.hexdigest().encode("ascii") + b'"}\n')
        except error:
            pass
        inner = outer = None        # one seal per run
        write(answer, b"d")


def _audit(fd: int, sealer: list) -> None:
    """Install the hook that records what could reach the seal or the stream (see above);
    `sealer` will hold the sealing thread's id. Everything the hook calls is bound here,
    before any code under test exists, and the hook itself is reachable from nowhere."""
    if fd < 0:
        return
    write, fstat, get_ident, getpid, isinstance_, len_ = _write, _fstat, _get_ident, \
        _getpid, _isinstance, len
    audited, fd_lists, error = _AUDITED, _FD_LISTS, RuntimeError
    set_names, function, getattr_, keep = _SET_NAMES, _FunctionType, getattr, _SET.append
    pid = getpid()
    identity = fstat(fd)
    identity = (identity.st_dev, identity.st_ino)
    seen, text = set(), _text

    def report(kind):
        if kind in seen or len_(seen) > 200:
            return
        seen.add(kind)
        now = fstat(fd)
        if (now.st_dev, now.st_ino) != identity:
            raise error("golem: the evidence stream was replaced")
        write(fd, b'{"e":"audit","event":' + text(kind).encode("utf-8", "surrogatepass")
              + b'}\n')

    def reached():
        me = get_ident()
        if me in busy:
            return      # the hook's own frame lookup
        busy.add(me)
        try:
            where = reacher(getframe(2))
        finally:
            busy.discard(me)
        if where is not None:
            report("frame reached by " + where)

    def hook(event, args):
        if event == "object.__getattr__":       # the most frequent events, first out
            if len_(args) > 1 and args[1] in frame_attrs:
                reached()
            return
        if event == "builtins.id":
            return
        if event == "sys._getframe":    # the hook's own lookup among them: no more to do
            reached()
            return
        check(event, args)      # may raise: the operation is refused, nothing else runs
        if watch:
            watch[0](event, args)

    def check(event, args):
        if event in audited:
            if event == "sys._current_frames" and sealer and get_ident() == sealer[0]:
                return
            if event == "os.exec":
                if getpid() != pid:
                    return      # a forked child becoming another program: not this run
                report(event)
                raise error("golem: a graded test run may not replace its process")
            report(event)
        elif event.startswith("ctypes."):
            report("ctypes")
        elif event == "open":
            path = args[0]
            if isinstance_(path, str):
                if path.endswith(".pyc"):
                    seal.bytecode(path, args[1], args[2])
                elif path.startswith("/proc/") and path.endswith("/mem"):
                    report("process memory")
        elif event == "exec":     # code of a file, as a loader executes a module's
            code = args[0]
            if code.co_name == "<module>" and code.co_filename[:1] not in ("<", ""):
                seal.executed(code)
        elif event == "import":
            seal.pinned()
        elif event in ("os.listdir", "os.scandir"):
            path = args[0] if args else None
            if isinstance_(path, str) and (path in fd_lists or (
                    path.startswith("/proc/") and path.rstrip("/").endswith("/fd"))):
                report("descriptor list")
        elif event == "fcntl.fcntl":
            if args and args[0] == fd:
                report("descriptor probed")
        elif event == "object.__setattr__" and len_(args) > 1:
            name = args[1]
            if name in set_names and isinstance_(args[0], function):
                # kept with what it was before (read here: audited, and seen as nothing)
                keep((args[0], name, getattr_(args[0], name, None)))
                if name == "__code__":
                    report("code swapped")

    frame_attrs, busy, getframe = _FRAME_ATTRS, set(), _getframe
    root = _realpath(os.getcwd())
    reacher = _frame_reacher(root)
    # the read watcher (`watch_reads`) runs inside this hook, after it, as a second hook
    # would: each audited event costs one call of Python code, not two. It can join once,
    # before any code under test runs (the joining function is then gone from `_JOIN`).
    watch = []

    def join(handler) -> bool:
        if watch:
            return False
        watch.append(handler)
        return True

    del _JOIN[:]
    _JOIN.append(join)
    seal = _ImportSeal(report, busy, root)
    del _TRUST[:]
    _TRUST.append(seal.trust)
    global imported, planted, handed
    imported, planted, handed = seal.imported, seal.planted, seal.handed
    _addaudithook(hook)


_MODULES, _values, _get = sys.modules, dict.values, dict.get


def loaded(limit: int = 20_000) -> list:
    """The source files of the modules in `sys.modules` (as the interpreter started it), for
    golem to compile the next runs' bytecode from: a list of paths to consider, nothing more.
    Runs no code but the standard library's: only exact modules' own namespaces are read."""
    files = []
    if _type(_MODULES) is not dict:
        return files
    for module in _list(_values(_MODULES)):
        if _type(module) is _ModuleType:
            path = _get(_vars(module), "__file__")
            if _type(path) is str and path.endswith(".py"):
                files.append(path)
                if _len(files) >= limit:
                    break
    return files


def trust(code=None, rewritten=None) -> None:
    """Name the code of pytest's own loader (`AssertionRewritingHook.exec_module`), which
    executes rewritten test modules, to the audit hook: once, before any code under test runs
    (the launcher right after importing pytest; the unittest driver with nothing, to close
    the door). `rewritten`: (directory, pytest's version) of the rewritten test modules golem
    keeps (pytest_plugin.rewrite_from_cache), which that loader's code must match."""
    named = _TRUST.pop() if _TRUST else None
    if named is not None and code is not None:
        named(code, rewritten)


def imported(modules) -> None:
    """Check that each collected test module was loaded by the import system from its file
    (`_ImportSeal.imported`); a no-op until the audit hook is installed."""


def planted(label, module) -> None:
    """Check that a test module holds no runner hook its code does not name
    (`_ImportSeal.planted`); a no-op until the audit hook is installed."""


def handed(label, module) -> list:
    """Check a test module as the runner is handed it and return the namespaces for the
    guard's snapshot (`_ImportSeal.handed`); nothing until the audit hook is installed."""
    return []


class _ImportSeal:
    """What the import system loads a test module from, pinned before any code under test
    runs (the audit hook calls it).

    Bytecode: `sys.pycache_prefix` (golem's view of its cache) and `_imp`'s
    `check_hash_based_pycs` must not change (checked on every `import` event, when a module
    that is not in `sys.modules` is looked for, and after collection), and no bytecode may be
    read from outside the prefix: the import system and pytest's assertion rewriter read it
    only from there, so a read elsewhere is bytecode brought in by other means (a patched
    `cache_from_source`, a finder of its own).

    Test modules: every `exec` of a module's code by a loader (the standard library's
    `exec_module`, or pytest's rewriting loader) records the module's namespace and the file
    the loader read; a collected test module whose namespace no loader filled, or filled
    from another file, was made by other means (put into `sys.modules` by the code under
    test). Every finding is an `audit` record: REJECTED unless the baseline's run made it too.
    """

    __slots__ = ("report", "busy", "cwd", "prefix", "under", "hashed", "loaded", "trusted",
                 "early", "call", "exec_module", "source_loader", "sys", "normpath",
                 "getframe", "ident", "kept", "reads", "loads", "magic", "sha256", "spec")

    def __init__(self, report, busy, cwd):
        import _imp
        bootstrap = sys.modules.get("_frozen_importlib")
        external = sys.modules.get("_frozen_importlib_external")
        self.report, self.busy, self.cwd = report, busy, cwd
        # what the hook calls, bound now: nothing the code under test rebinds later
        self.sys, self.normpath, self.getframe, self.ident = sys, os.path.normpath, \
            _getframe, _get_ident
        self.prefix = sys.pycache_prefix
        self.under = os.path.normpath(self.prefix) + _sep if self.prefix else None
        self.hashed = (_imp, _imp.check_hash_based_pycs)
        # id of a module's namespace -> (a weak reference to the module, the file its code
        # came from, the code): held weakly, so a module the tests make and drop goes as it
        # would under the bare runner
        self.loaded = {}
        self.trusted = {}       # code of another loader's exec_module -> True
        # modules loaded before any code under test ran: the runner's own
        self.early = {_id(m): m for m in _list(sys.modules.values())}
        self.call = getattr(getattr(bootstrap, "_call_with_frames_removed", None),
                            "__code__", None)
        basics = getattr(external, "_LoaderBasics", None)
        self.exec_module = getattr(getattr(basics, "exec_module", None), "__code__", None)
        self.source_loader = getattr(external, "SourceFileLoader", None)
        self.kept = None        # (directory, pytest's version) of golem's rewritten modules
        self.spec = getattr(bootstrap, "ModuleSpec", None)
        self.reads, self.loads, self.magic, self.sha256 = _read_all, _marshal_loads, \
            _MAGIC, _sha256

    def trust(self, code, kept=None) -> None:
        self.trusted[code] = True
        if kept is not None:
            self.kept = kept

    def pinned(self) -> None:
        prefix = self.sys.pycache_prefix
        if prefix is not self.prefix and prefix != self.prefix:
            self.report("sys.pycache_prefix changed")
        module, value = self.hashed
        if module.check_hash_based_pycs != value:
            self.report("_imp.check_hash_based_pycs changed")

    def bytecode(self, path: str, mode, flags) -> None:
        """An `open` of a .pyc file: reading one from outside golem's cache is a finding."""
        under = self.under
        if under is None:
            return
        if mode is not None:
            if "r" not in mode or "+" in mode:
                return
        elif not _isinstance(flags, int) or flags & _O_ACCMODE != os.O_RDONLY:
            return
        try:
            inside = self.normpath(path).startswith(under)
        except (TypeError, ValueError):
            inside = False
        if not inside:
            self.report("bytecode read from outside golem's cache")

    def as_kept(self, path: str, ran) -> None:
        """The code pytest's loader executes for the file `path` must be the rewriting golem
        keeps for that file's content, where it keeps one (compared as Python compares code:
        everything but the file name): code that differs was swapped in between golem's
        plugin and the loader, whatever replaced what and put it back."""
        directory, version = self.kept
        source = self.reads(path)
        if source is None:
            return
        data = self.reads(directory + _sep + self.sha256(source).hexdigest() + "-" + version
                          + ".pyc")
        if data is None or data[:len(self.magic)] != self.magic:
            return      # none kept: pytest rewrote it itself
        if not _same_code(self.loads(memoryview(data)[len(self.magic):]), ran):
            self.report("test module not as pytest rewrites it: "
                        + (relative(path, self.cwd) or path))

    def executed(self, ran=None) -> None:
        """An `exec` event: when a loader executes a module's code (`ran`), record the
        module's namespace and the file the loader read."""
        busy, me = self.busy, self.ident()
        busy.add(me)    # the hook's own frame lookup is no frame reached
        try:
            frame = self.getframe(3)    # exec's caller (after this, the hook's `check`, the hook)
        except ValueError:
            return
        finally:
            busy.discard(me)
        try:
            code = frame.f_code
            if code is self.call:   # the standard library's loaders
                frame = frame.f_back
                if frame is None or frame.f_code is not self.exec_module:
                    return
                found = frame.f_locals
                module, loader = found.get("module"), found.get("self")
                path = loader.path if _type(loader) is self.source_loader else None
            elif code in self.trusted:      # pytest's rewriting loader: the file it read
                found = frame.f_locals
                module, path = found.get("module"), found.get("fn")
                path = str(path) if path is not None else None
                if self.kept is not None and _type(path) is str and ran is not None:
                    self.as_kept(path, ran)
            else:
                return
            if _type(module) is _ModuleType:
                space = module.__dict__
                self.loaded[_id(space)] = (_weakref(module), path if _type(path) is str
                                           else None, ran)
        except Exception:
            return      # never in the way of the code under test: the module goes unrecorded

    def imported(self, modules) -> None:
        """Each (label, module, the file it was collected from or None) of `modules`: a test
        module not loaded by a loader from that file (or from the file its `__file__` names)
        inside the tree under test is a finding, named by its label."""
        self.pinned()
        early, loaded, cwd = self.early, self.loaded, self.cwd
        for label, module, file in modules:
            if module is not None and early.get(_id(module)) is module:
                continue        # the runner's own (doctest's test case class)
            held = loaded.get(_id(module.__dict__)) if _type(module) is _ModuleType else None
            ok = held is not None and held[0]() is module and held[1] is not None
            if ok:
                file = file if file is not None else getattr(module, "__file__", None)
                try:
                    real = _realpath(held[1])
                    ok = _type(file) is str and real == _realpath(file) \
                        and real.startswith(cwd + _sep)
                except (TypeError, ValueError, OSError):
                    ok = False
            if not ok:
                self.report("test module not loaded from its file: " + str(label))
            elif _type(held[2]) is _CodeType and not (len(held) > 3 and held[3]):
                # not checked as it was handed to the runner (its snapshot since then
                # shows what the run rebound)
                self.plain_record(label, module)
                self.as_defined(label, module.__dict__, held[2])
                self.classes_as_defined(label, module.__dict__, held[2])
                self.planted(label, module)

    def handed(self, label, module) -> list:
        """A test module as the runner is handed it, right after its code ran (unittest's
        loader, pytest's look for `pytest_plugins`): checked as at collection (its import
        record, its namespace, its classes', the hooks in it), and (label, namespace, the
        module or class) of it and of the classes its code defines returned, for the guard to take its snapshot now
        rather than after the runner collected: code the runner calls while it collects
        (a value's `__class__`, a name's `__lt__`) cannot rebind a test unseen."""
        if _type(module) is not _ModuleType:
            return []
        space = module.__dict__
        name = space.get("__name__")
        name = name if _type(name) is str else "?"
        held = self.loaded.get(_id(space))
        if held is None or held[0]() is not module or _type(held[2]) is not _CodeType:
            return [(name, space, module)]      # not filled by a loader: `imported` names it
        self.loaded[_id(space)] = (*held[:3], True)     # checked now, not again
        self.plain_record(label, module)
        self.as_defined(label, space, held[2])
        classes = self.classes_as_defined(label, space, held[2]) or []
        self.planted(label, module)
        return [(name, space, module)] + [(name + "." + qualname, names, cls)
                                          for qualname, names, cls in classes]

    def plain_record(self, label, module) -> None:
        """What the import system and the runners read off a test module by name must be of
        the exact built-in kinds (its name, file, package, spec and the spec's name, the
        names in its namespace, the keys of `sys.modules`): a subclass's `__eq__` runs when
        the import system looks the module up right after its code ran, or when a runner
        sorts its names."""
        space, wrong = module.__dict__, []
        for key in ("__name__", "__file__", "__package__"):
            value = space.get(key)
            if value is not None and _type(value) is not str:
                wrong.append(key)
        spec = space.get("__spec__")
        if spec is not None:
            if _type(spec) is not self.spec:
                wrong.append("__spec__")
            else:
                fields = _instance_dict(spec)
                for key in ("name", "origin"):
                    value = fields.get(key)
                    if value is not None and _type(value) is not str:
                        wrong.append("__spec__." + key)
        modules = self.sys.modules
        if _type(modules) is not dict or _set(_map(_type, modules)) - _STR:
            wrong.append("sys.modules")
        if _set(_map(_type, space)) - _STR:
            wrong.append("a name in it")
        if wrong:
            self.report(f"test module's import record not plain ({', '.join(wrong)}): "
                        + str(label))

    def planted(self, label, module) -> None:
        """A test module must not hold, under a name the runner looks up by itself
        (`_HOOKS`: its `load_tests`, `setUpModule`, `pytest_plugins`, ..., or a module
        `__getattr__`, which answers each such lookup of a name the module lacks), what its
        own code never names: code the module imports can reach the half-built module and
        put it there, for the runner to call. Checked when the runner is handed the module
        (unittest's loader, pytest's look for `pytest_plugins`) and at collection."""
        if _type(module) is not _ModuleType:
            return
        space = module.__dict__
        held = self.loaded.get(_id(space))
        if held is None or held[0]() is not module or _type(held[2]) is not _CodeType:
            return      # not loaded from a file: `imported` names it
        present = [hook for hook in _HOOKS if hook in space]
        if not present:
            return      # most modules: nothing to look up in their code
        names, starred = _named(held[2])
        for hook in present:
            if hook not in names and (not starred or hook in _HOOKS[:2]):
                self.report(f"test module's {hook} put there from outside it: {label}")

    def as_defined(self, label, space, ran) -> None:
        """A name the test module's code `ran` defines with `def` at its top must hold, at
        collection, the function that `def` made (or a decorator's function wrapping it):
        code the module imports can reach the half-built module and rebind one test to
        another's function (its file unchanged, so its origins say nothing), or to code
        from outside the tree (a function of the standard library, a builtin, a `partial`),
        unseen by the guard, which compares namespaces from then on."""
        made = {}
        for code in ran.co_consts:
            if _type(code) is _CodeType and code.co_flags & _OPTIMIZED:
                made.setdefault(code.co_name, []).append(code)
        for name, why in self.misbound(space, made, ran, [None]):
            self.report(f"test module's {name} rebound to {why}: {label}")

    def misbound(self, space, made, ran, every) -> list:
        """(name, why) for each name of `made` (name -> the codes its `def`s made) that
        `space` holds something else under (`judged`); `every`, a one-item list, keeps
        `_functions(ran)` once it is needed."""
        found = []
        for name, codes in made.items():
            value = space.get(name)
            if _type(value) is _FunctionType and value.__code__ is codes[-1]:
                continue        # most: the function its (last) def made
            if every[0] is None:
                every[0] = _functions(ran)
            why = self.judged(value, codes, every[0])
            if why:
                found.append((name, why))
        return found

    def judged(self, value, codes, every):
        """Why `value`, held by a name whose `def`s made `codes`, is not what they made:
        "another of its functions" (a function made by another `def` of the module, `every`
        by first line), "code from outside the tree" (a builtin, a `partial`, a function of
        the standard library or an installed package, wrapping none of `codes`); or None (the
        function a `def` made, a decorator's function that wraps it, a decorator's object)."""
        kind = _type(value)
        if kind is staticmethod or kind is classmethod:
            value = value.__func__
            kind = _type(value)
        if _any(kind is other for other in _C_CALLABLES):
            return "code from outside the tree"     # no code of its own: a def made none
        if kind is not _FunctionType:
            return None
        outer, step = value.__code__, value
        for _ in range(20):     # the function, and what it wraps (a decorator's work)
            held = step.__code__
            if _any(held is code for code in codes):
                return None
            step = step.__dict__.get("__wrapped__")
            if _type(step) is not _FunctionType:
                break
        if _any(outer is other for other in every.get(outer.co_firstlineno, ())):
            return "another of its functions"
        if relative(outer.co_filename, self.cwd) is None:
            return "code from outside the tree"
        return None

    def classes_as_defined(self, label, space, ran) -> list:
        """The same for the classes the test module's code defines at its top (and the
        classes they define): a name a class body defines with `def` must hold what that
        `def` made. The classes' names must be plain text too. Returns (qualified name,
        namespace, class) of each class looked at."""
        every, visited = [None], []
        pending = [(space.get(code.co_name), code) for code in ran.co_consts
                   if _type(code) is _CodeType and not code.co_flags & _OPTIMIZED]
        for _ in range(1000):
            if not pending:
                break
            cls, body = pending.pop()
            if not _kind(cls, _type):
                continue
            names = _class_dict(cls)
            visited.append((body.co_qualname, names, cls))
            if _set(_map(_type, names)) - _STR or _type(names.get("__module__")) is not str \
                    or _type(_type_name(cls)) is not str \
                    or _type(_type_qualname(cls)) is not str:
                # a name of another kind has methods of its own, run when a runner sorts
                # or formats it
                self.report(f"test class's names not plain text: {body.co_qualname}: {label}")
            made = {}
            for code in body.co_consts:
                if _type(code) is not _CodeType:
                    continue
                if code.co_flags & _OPTIMIZED:
                    made.setdefault(code.co_name, []).append(code)
                else:       # a class defined in the class's body
                    pending.append((names.get(code.co_name), code))
            for name, why in self.misbound(names, made, ran, every):
                self.report(f"test class's {body.co_qualname}.{name} rebound to {why}: "
                            + str(label))
        return visited


_OPTIMIZED = 0x0001     # CO_OPTIMIZED: a function's code (a class body's and a module's lack it)
# names a runner looks up on a test module by itself; the first two answer any lookup
_HOOKS = ("__getattr__", "__dir__", "load_tests", "setUpModule", "tearDownModule",
          "pytest_plugins", "pytestmark", "setup_module", "teardown_module",
          "setup_function", "teardown_function", "__test__")
_class_dict = vars(_type)["__dict__"].__get__      # a class's own namespace, asked of `type`
_weakrefoffset = vars(_type)["__weakrefoffset__"].__get__     # 0: takes no weak reference
_type_name = vars(_type)["__name__"].__get__        # its name and qualified name, the same way
_type_qualname = vars(_type)["__qualname__"].__get__
_instance_dict = _vars      # a ModuleSpec's own attributes (its exact type checked first)
_STR = frozenset({str})
# callables with no code of their own: builtins, slot wrappers, methods of builtin types,
# and functools.partial
_C_CALLABLES = (_type(len), _type(object.__init__), _type(str.join), _type(object().__str__),
                _type(vars(dict)["fromkeys"]), getattr(sys.modules.get("_functools"), "partial",
                                                       _type(len)))


def _named(code) -> tuple:
    """(every name the code of a module, or code inside it, loads or stores, whether it
    imports `*`)."""
    names, pending, starred = _set(), [code], ("*",) in code.co_consts
    while pending:
        each = pending.pop()
        names.update(each.co_names)
        pending += [c for c in each.co_consts if _type(c) is _CodeType]
    return names, starred


def _functions(code) -> dict:
    """First line -> the code of every function the module's code `code` makes there with
    `def`, at its top and in the bodies of its classes (at any depth), found again by
    identity among the few of its line, without `id` (an audited call). A function made
    inside another (a decorator's wrapper) is not one."""
    found, pending = {}, [code]
    while pending:
        each = pending.pop()
        for inner in each.co_consts:
            if _type(inner) is _CodeType:
                if inner.co_flags & _OPTIMIZED:
                    found.setdefault(inner.co_firstlineno, []).append(inner)
                else:
                    pending.append(inner)       # a class's body
    return found


# frames reached through a traceback, a generator or coroutine, or sys._getframe (with `f_back`
# and `f_locals` from there: a test's `self`, pytest's item); functions of the standard library
# that hand such frames to their caller are looked through, to the code that asked
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_HANDS_OUT = frozenset({("inspect.py", "currentframe"), ("inspect.py", "stack"),
                        ("inspect.py", "trace"), ("inspect.py", "getouterframes"),
                        ("inspect.py", "getinnerframes"), ("traceback.py", "walk_tb"),
                        ("traceback.py", "walk_stack"), ("base_tasks.py", "_task_get_stack"),
                        ("__init__.py", "<lambda>"), ("__init__.py", "currentframe")})  # logging
_TEST_NAMES = ("test_", "conftest.py")
_TEST_ENDS = ("_test.py", "_tests.py", "tests.py")
_LIBRARIES = frozenset({"site-packages", "dist-packages"})     # a virtual environment's


def test_side(rel) -> bool:
    """Whether the workspace file `rel` (relative, "/"-separated) is the tests' by its name
    or place: a test module's name, `conftest.py`, or inside a test directory."""
    if _type(rel) is not str:
        return False
    parts = rel.lower().split("/")
    return parts[-1].startswith(_TEST_NAMES) or parts[-1].endswith(_TEST_ENDS) or _any(
        p.startswith("test") or p.endswith(("_test", "_tests")) for p in parts[:-1])


def _frame_reacher(root: str):
    """A function: the frame that reached for a frame -> the workspace file (not a test file
    by name) whose code asked, or None."""
    basename, prefix = os.path.basename, root + _sep
    # the names of the functions that hand frames out: most frames reached (unittest's
    # `assertRaises` clears the frames of every traceback it catches) are told apart by name
    handing = frozenset(name for _, name in _HANDS_OUT)

    def reacher(frame):
        for _ in range(8):
            if frame is None:
                return None
            code = frame.f_code
            name = code.co_filename
            if not name.startswith(prefix):
                if code.co_name not in handing or (basename(name), code.co_name) \
                        not in _HANDS_OUT:
                    return None
                frame = frame.f_back
                continue
            rel = name[len(prefix):].replace(_sep, "/")
            if test_side(rel) or not _LIBRARIES.isdisjoint(rel.lower().split("/")[:-1]):
                return None     # the tests' own code (protected), or an installed library
            return rel
        return None

    return reacher


# -- a plain run ------------------------------------------------------------------------------
#
# golem starts the test interpreter with -I and -X pycache_prefix: code that reads sys.flags or
# sys.orig_argv could tell a graded run from a developer's `python -m unittest` and behave only
# there. Those it reads as a plain run has them; what stays visible is in docs/verification.md.

_PLAIN_FLAGS = ("isolated", "ignore_environment", "no_user_site", "safe_path")


def look_plain(module: str, args: list) -> None:
    """sys.flags, sys.orig_argv and sys._xoptions as `python -m MODULE ARGS` has them."""
    flags = sys.flags
    names = getattr(flags, "__match_args__", None)
    if names and len(names) == len(flags):
        values = tuple(_type(v)(0) if n in _PLAIN_FLAGS else v for n, v in zip(names, flags))
        space = {"__slots__": (), "__module__": "sys", "n_fields": len(names),
                 "n_sequence_fields": len(names), "n_unnamed_fields": 0,
                 "__match_args__": names,
                 "__repr__": lambda self: "sys.flags(" + ", ".join(
                     n + "=" + repr(v) for n, v in zip(names, self)) + ")"}
        for index, name in enumerate(names):
            space[name] = property(lambda self, i=index: tuple.__getitem__(self, i))
        sys.flags = _type("flags", (tuple,), space)(values)
    if getattr(sys, "orig_argv", None):
        sys.orig_argv = [sys.orig_argv[0], "-m", module, *args]
    getattr(sys, "_xoptions", {}).pop("pycache_prefix", None)
