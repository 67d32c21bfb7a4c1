"""golem's unittest driver: runs a suite like `python -m unittest ARGS` and reports each test
to golem as it finishes.

golem writes this file, with evidence.py beside it, into a read-only directory of its own and
runs it with the test interpreter in isolated mode, so nothing beside it or in the working
directory is imported before the standard library it needs is loaded:

    PYTHON -I -X pycache_prefix=DIR unittest_driver.py [--golem-only=TEST_ID] [ARGS...]

With `--golem-only`, the tests are found as the arguments say and only TEST_ID runs (golem's
`-repeat` re-runs one test alone this way). Each record names the test, its outcome, the file
its module came from and the workspace files its code came from. After the run, the guard
names what the code under test replaced in unittest, in this driver, or in the test modules
and classes; a last record says the run finished, and the seal (evidence.py) that only this
driver's `main` can ask for follows it. The driver leaves with os._exit, so no atexit
handler of the code under test runs after that record.
"""

import sys

# Everything the driver uses is imported here, before the working directory is on sys.path.
import doctest
import importlib.util
import itertools
import operator
import os
import time
import traceback
import unittest
import unittest.case
import unittest.loader
import unittest.main
import unittest.result
import unittest.runner
import unittest.signals
import unittest.suite
import unittest.util

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("golem_evidence", os.path.join(_here, "evidence.py"))
evidence = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(evidence)

_exit, _getcwd, _isinstance, _type, _vars = os._exit, os.getcwd, isinstance, type, vars
_callable, _origin, _any = callable, evidence.origin, any
_map, _len, _sum, _all, _list, _is = map, len, sum, all, list, operator.is_
_repeat, _monotonic = itertools.repeat, time.monotonic
_PLAIN_NAME = "_testMethodName"
_TEST_ID = unittest.TestCase.id
STREAM = evidence.Stream()
CWD = os.path.realpath(_getcwd())
PSEUDO_TYPES = ("_ErrorHolder", "_FailedTest")
_failed = {}            # test id -> outcome already reported as failing
_tainted = set()        # tests whose assertEqual table the code under test rebound


def _module_file(name):
    module = sys.modules.get(name)
    return evidence.relative(getattr(module, "__file__", None), CWD)


def _failed_module_file(name):
    """The file of a test module that could not be imported, from its dotted name."""
    for top in (_Loader.top, CWD):
        if not top:
            continue
        base = os.path.join(top, *name.split("."))
        for path in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.exists(path):
                return evidence.relative(path, CWD)
    return None


def _describe(test):
    """(id, file, is pseudo, origins) for one test, at a cost that does not grow with its
    class: what the tests of a class share is found once, and read again when a class of
    its `__mro__` gains or loses a member."""
    cls = _type(test)
    held = _CLASSES.get(cls)
    if held is None or held[0] is not cls or held[1] is not cls.__mro__ \
            or _sum(_map(_len, held[2])) != held[3]:
        held = _class(test, cls)
        if held[0] is None:
            return held[1]      # not a test of a class: one of unittest's stand-ins
    found = held[5]
    name = getattr(test, "_testMethodName", "") or ""
    if name not in held[6]:     # a test method its classes do not define (`__getattr__`)
        rel = _origin(getattr(test, name, None), CWD)
        if rel and rel not in found:
            found = [*found, rel]
    space = _vars(test)
    if _any(_map(_callable, space.values())):       # a function test, or one kept by setUp
        for value in _list(space.values()):
            if _callable(value):
                rel = _origin(value, CWD)
                if rel and rel not in found:
                    found = [*found, rel]
    prefix = held[7]
    test_id = prefix + name if prefix is not None and _type(name) is str else test.id()
    if _shadowed(held[2]) and test_id not in _tainted:
        _tainted.add(test_id)
        STREAM.emit(e="guard", replaced=[f"the method name or assertEqual table of {test_id}, "
                                         "held by its class"])
    equality = space.get("_type_equality_funcs")
    if equality is not None and not _unittests_table(equality):
        for value in _equality(test, test_id, equality):
            rel = _origin(value, CWD)
            if rel and rel not in found:
                found = [*found, rel]
    return test_id, held[4], False, found


def _class(test, cls) -> tuple:
    """What the tests of `cls` share, read now: (the class, its `__mro__`, the namespaces in
    it, their sizes, its module's file, the files its code comes from, the names its classes
    define, the start of its tests' ids when it keeps unittest's `id`); for unittest's
    stand-ins for a module or class that failed, (None, the test's description)."""
    kind = cls.__name__
    if kind == "_FailedTest":
        return None, (test.id(), _failed_module_file(test._testMethodName or ""), True, [])
    if kind == "_ErrorHolder":
        # "setUpClass (pkg.test_mod.Case)" or "setUpModule (pkg.test_mod)"
        inner = test.description.rpartition("(")[2].rstrip(")")
        module = inner if inner in sys.modules else inner.rpartition(".")[0]
        return None, (test.id(), _module_file(module), True, [])
    mro = cls.__mro__
    spaces = tuple([_vars(klass) for klass in mro])
    files, names = evidence.class_code(cls, CWD)
    held = _CLASSES[cls] = (cls, mro, spaces, _sum(_map(_len, spaces)),
                            _module_file(cls.__module__), files, names, _prefix(cls))
    return held


def _prefix(cls):
    """The start of the ids of the tests of `cls` ("module.Class."), when it keeps unittest's
    `id`; else None."""
    return unittest.util.strclass(cls) + "." if getattr(cls, "id", None) is _TEST_ID else None


def _collected(tests) -> list:
    """The ids of `tests` (unittest's stand-ins left out), as `_describe` makes them: the
    tests of a class that keeps unittest's `id` from its prefix, in one loop."""
    ids, prefixes = [], {}
    for cls, group in itertools.groupby(tests, _type):
        if cls.__name__ in PSEUDO_TYPES:
            continue
        group = _list(group)
        got = prefixes.get(cls)
        if got is None or got[0] is not cls:
            got = prefixes[cls] = (cls, _prefix(cls))
        count = _len(group)
        names = _list(_map(getattr, group, _repeat(_PLAIN_NAME, count), _repeat("", count)))
        if got[1] is not None and _all(_map(_is, _map(_type, names), _repeat(str, count))):
            ids += _map(got[1].__add__, names)
        else:
            for test, name in zip(group, names):
                name = name or ""
                ids.append(got[1] + name if got[1] is not None and _type(name) is str
                           else test.id())
    return ids


_EQUALITY = dict(unittest.TestCase()._type_equality_funcs)     # what unittest maps by type


def _unittests_table(table, _dict=dict, _size=len(_EQUALITY), _keys=tuple(_EQUALITY),
                     _values=tuple(_EQUALITY.values()), _pairs=tuple(_EQUALITY.items())):
    """Whether `table` maps the types unittest's own table maps each to the very same object
    (a fresh instance's table, as most tests keep it). Compared by identity, so no code of
    the test's runs: unittest's six entries (dict, list, tuple, set, frozenset, str) one by
    one in unittest's order, anything else by looking each type up."""
    if _type(table) is not _dict or _len(table) != _size:
        return False
    if _size == 6:
        k0, k1, k2, k3, k4, k5 = _keys
        v0, v1, v2, v3, v4, v5 = _values
        a, b, c, d, e, f = table
        if a is k0 and b is k1 and c is k2 and d is k3 and e is k4 and f is k5:
            a, b, c, d, e, f = table.values()
            if a is v0 and b is v1 and c is v2 and d is v3 and e is v4 and f is v5:
                return True
    return _all(table.get(k) is v for k, v in _pairs)


def _equality(test, test_id, equality) -> list:
    """The functions a test's assertEqual calls by type that are not unittest's own: code
    from the tree under test, recorded with the test's origins (judged like them). Anything
    else (unittest's name of another assert method, a function from outside the tree) gets a
    guard record: the run is no evidence for that test."""
    found, wrong = [], []
    items = list(dict.items(equality)) if _isinstance(equality, dict) else [(None, None)]
    if _isinstance(equality, dict) and _type(equality) is not dict:
        # its entries may be unittest's own while its `get`, which assertEqual calls, is not
        wrong.append("every type (a table of another kind)")
    for kind, func in items:
        if _type(func) is str:
            if _EQUALITY.get(kind) is func or str.__eq__(_EQUALITY.get(kind) or "", func):
                continue
            func = getattr(_type(test), func, None)     # a method of the test's own class
        if func is not None and evidence.origin(func, CWD) is not None:
            found.append(func)
        else:
            wrong.append(getattr(kind, "__qualname__", "?"))
    if wrong:
        _tainted.add(test_id)
        STREAM.emit(e="guard", replaced=[f"assertEqual for {', '.join(wrong)} in {test_id}"])
    return found


_CLASSES = {}       # test class -> what its tests share (`_class`)
_ModuleType = type(sys)
_handed = evidence.handed       # the audit's once it is installed (`main`)
_EARLY = []                     # the guard's snapshots taken as each module was handed over
_EARLY_OWNERS = set()           # the ids of the modules and classes in them
_EARLY_KEPT = []
_EARLY_DATA = []                # the data of the same modules and classes (`evidence.data`)


def _record(test, outcome):
    _settle()       # the passing tests before it first, in order
    _report(test, outcome)


def _report(test, outcome):
    test_id, file, pseudo, origins = _describe(test)
    if test_id in _tainted and outcome not in ("failed", "error"):
        outcome = "error"   # its assertEqual was not unittest's: whatever it says, no evidence
    if _failed.get(test_id) and outcome == "passed":
        return      # a subtest failed: the test as a whole did
    if outcome in ("failed", "error"):
        _failed[test_id] = outcome
    STREAM.test(test_id, outcome, file, pseudo, origins)


# Passing tests of one class wait in `_passed` (at most `_BATCH` of them, for at most 50 ms,
# and never past the start of a test of another class) and are described together by
# `_settle`: the same reads and checks as `_describe` makes for each, in one loop, with what
# the tests of the class share looked up once.
# What the checks read (a test's assertEqual table, the members of its class) the code under
# test could as well have put back before `addSuccess` (from the test's own cleanups), so
# reading it a few tests later reads nothing it could not have hidden anyway; a class that
# changed within a batch has its code read again for every test of the batch.
_passed = []
_since = [0.0]
_BATCH = 256
_TABLE = "_type_equality_funcs"
_TABLE_KEYS, _TABLE_VALUES = tuple(_EQUALITY), tuple(_EQUALITY.values())
_SLOTS = tuple(_vars(unittest.TestCase()))     # the attributes unittest gives each test
_CASE_NAMES = tuple(name for name in dir(unittest.TestCase) if not name.startswith("__"))


def _settle() -> None:
    """Record the passing tests waiting in `_passed`."""
    if not _passed:
        return
    tests = _passed[:]
    del _passed[:]
    if not _plain(tests):
        for test in tests:      # one at a time, as `_describe` sees each
            _report(test, "passed")
    if _monotonic() - _since[0] > 0.05:
        STREAM.flush()


def _plain(tests) -> bool:
    """Record `tests` (of one class) as passed when each is what `_describe` finds for most:
    a method its class defines, no callable of its own, unittest's own assertEqual table,
    no failing subtest; else record nothing and say so."""
    cls = _type(tests[0])
    held = _CLASSES.get(cls)
    if held is None or held[0] is not cls or held[1] is not cls.__mro__ \
            or _sum(_map(_len, held[2])) != held[3]:
        held = _class(tests[0], cls)
    prefix = held[7]
    if held[0] is None or prefix is None or _len(_TABLE_KEYS) != 6 or _len(_SLOTS) != 6 \
            or _shadowed(held[2]):
        return False
    names, ids, callables = held[6], [], _callable
    k0, k1, k2, k3, k4, k5 = _TABLE_KEYS
    v0, v1, v2, v3, v4, v5 = _TABLE_VALUES
    s0, s1, s2, s3, s4, s5 = _SLOTS
    for test in tests:
        space = _vars(test)
        if _type(test) is not cls or _type(space) is not dict:
            return False
        a = b = c = d = e = f = None
        if _len(space) == 6:
            a, b, c, d, e, f = space
        if a is s0 and b is s1 and c is s2 and d is s3 and e is s4 and f is s5:
            # unittest's own attributes and nothing else (most tests): the name and the
            # table read from them, each of the others as a finished run leaves it
            name, a, doc, b, c, table = space.values()
            if a is not None or c is not None or _type(b) is not list \
                    or (doc is not None and _type(doc) is not str):
                return False
        else:
            name = getattr(test, _PLAIN_NAME, "")
            table = space.get(_TABLE)
            for value in space.values():
                if callables(value):
                    return False
        if _type(name) is not str or name not in names:
            return False
        # the assertEqual table: a dict of unittest's size, its keys and values the very
        # objects of unittest's own table, in its order (a fresh instance's): compared by
        # identity, so no code of the test's runs
        if _type(table) is not dict or _len(table) != 6:
            return False
        a, b, c, d, e, f = table
        if a is not k0 or b is not k1 or c is not k2 or d is not k3 or e is not k4 \
                or f is not k5:
            return False
        a, b, c, d, e, f = table.values()
        if a is not v0 or b is not v1 or c is not v2 or d is not v3 or e is not v4 \
                or f is not v5:
            return False
        ids.append(prefix + name)
    if (_failed and not _failed.keys().isdisjoint(ids)) or (_tainted and not
                                                            _tainted.isdisjoint(ids)):
        return False
    STREAM.tests(ids, "passed", held[4], False, held[5])
    return True


def _shadowed(spaces) -> bool:
    """Whether a class of a test's `__mro__` (`spaces`: their namespaces, live) holds the
    name unittest keeps the test's method name or its assertEqual table under: what unittest
    reads through the class then, not the test's own attribute golem checks."""
    for space in spaces:
        if _PLAIN_NAME in space or _TABLE in space:
            return True
    return False


_text_start, _text_success = unittest.TextTestResult.startTest, \
    unittest.TextTestResult.addSuccess


class _Result(unittest.TextTestResult):
    def startTest(self, test):
        if _passed and (_type(test) is not _type(_passed[0]) or _len(_passed) >= _BATCH
                        or _monotonic() - _since[0] > 0.05):
            _settle()       # the tests before it let go
        _text_start(self, test)

    def addSuccess(self, test):
        _text_success(self, test)
        if not _passed:
            _since[0] = _monotonic()
        _passed.append(test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        _record(test, "failed")

    def addError(self, test, err):
        super().addError(test, err)
        _record(test, "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        _record(test, "skipped")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        _record(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        _record(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            _record(test, "failed" if failed else "error")


class _Unflushed:
    """The runner's stream in dots mode, with its `flush` left out. unittest flushes after
    every dot: one write to golem's pipe per test, which costs more than the test itself when
    it is small. golem reads a graded run's output once the run ended, so the dots now go out
    as the stream's buffer fills, with each line written to it (the stream of `sys.stderr`
    flushes at every line break) and at the end (`_flush`). Verbose runs are left as they are:
    there each test's name is out before it runs."""

    __slots__ = ("stream",)

    def __init__(self, stream):
        self.stream = stream
        _STREAMS.append(stream)

    def write(self, text):
        return self.stream.write(text)

    def flush(self):
        pass

    def __getattr__(self, name):
        return getattr(self.stream, name)


_STREAMS = []       # the streams of `_Unflushed`, flushed before the driver leaves


class _Runner(unittest.TextTestRunner):
    resultclass = _Result

    def __init__(self, stream=None, descriptions=True, verbosity=1, *args, **kwargs):
        super().__init__(stream, descriptions, verbosity, *args, **kwargs)
        if verbosity == 1:
            self.stream = unittest.runner._WritelnDecorator(_Unflushed(self.stream.stream))


class _Loader(unittest.TestLoader):
    top = None

    def discover(self, start_dir, pattern="test*.py", top_level_dir=None):
        _Loader.top = os.path.abspath(top_level_dir or start_dir)
        return super().discover(start_dir, pattern, top_level_dir)

    def loadTestsFromModule(self, module, *args, **kwargs):
        # right after the module's code ran, before unittest looks for its `load_tests` or
        # through its names: checked, and the guard's snapshot of it and its classes taken
        space = _vars(module) if _type(module) is _ModuleType else {}
        name, file = space.get("__name__"), evidence.relative(space.get("__file__"), CWD)
        if "__path__" in space and not evidence.test_side(file):
            # a package of the code under test that discovery passed through on its way to
            # the tests (`python -m unittest` from the top): the code's own, not the tests'
            return super().loadTestsFromModule(module, *args, **kwargs)
        spaces = _handed(name if _type(name) is str else "?", module)
        if spaces:
            _EARLY.append(evidence.namespace([(label, space) for label, space, _ in spaces]))
            _EARLY_DATA.append(evidence.data([(label, space, file)
                                              for label, space, _ in spaces]))
            _EARLY_OWNERS.update(_map(id, (owner for _, _, owner in spaces)))
            _EARLY_KEPT.extend(owner for _, _, owner in spaces)     # their ids stay theirs
        return super().loadTestsFromModule(module, *args, **kwargs)


def _flatten(suite):
    stack = [iter(suite)]
    while stack:
        for test in stack[-1]:
            if _isinstance(test, unittest.TestSuite):
                stack.append(iter(test))
                break
            yield test
        else:
            stack.pop()


class _Program(unittest.TestProgram):
    only = None
    collected = ([], 0)

    def createTests(self, *args, **kwargs):
        super().createTests(*args, **kwargs)
        if self.only is not None:
            self.test = unittest.TestSuite(t for t in _flatten(self.test) if t.id() == self.only)

    def runTests(self):
        tests = list(_flatten(self.test))
        STREAM.emit(e="collected", count=len(tests), ids=_collected(tests))
        spaces, seen, modules = [], set(), {}
        for cls in dict.fromkeys(map(_type, tests)):    # each class once, in order
            if cls.__name__ in PSEUDO_TYPES:
                continue
            name = cls.__module__
            modules.setdefault(name, (name, sys.modules.get(name), None))
            for owner in (cls, sys.modules.get(cls.__module__)):
                if owner is not None and id(owner) not in seen:
                    seen.add(id(owner))
                    if id(owner) in _EARLY_OWNERS:
                        continue    # in the snapshot taken when its module was handed over
                    label = getattr(owner, "__qualname__", None) or owner.__name__
                    spaces.append((owner.__module__ + "." + label if _isinstance(owner, type)
                                   else owner.__name__, _vars(owner)))
        del tests       # each test is let go once it ran, as unittest does
        # each test module loaded by the import system from its file, not made by other means
        evidence.imported(list(modules.values()))
        _Program.collected = evidence.namespace(spaces)
        super().runTests()


def _machinery():
    return evidence.members(("unittest", "doctest"), [sys.modules[__name__], evidence])


def _load_relocate():
    spec = importlib.util.spec_from_file_location("golem_relocate",
                                                  os.path.join(_here, "relocate.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    args = sys.argv[1:]
    if args and args[0].startswith("--golem-only="):
        _Program.only, args = args[0].split("=", 1)[1], args[1:]
    sys.argv = ["python -m unittest", *args]
    _load_relocate().apply(CWD)     # the copy's code, never the workspace's
    evidence.look_plain("unittest", args)
    sys.path.insert(0, CWD)     # what `python -m unittest` puts first
    STREAM.emit(e="start", runner="unittest", cwd=CWD)
    sealed = evidence.Sealed.start(STREAM)      # before any code under test is imported
    evidence.trust()    # no loader but the standard library's
    evidence.watch_reads(STREAM, CWD)
    global _handed
    _handed = evidence.handed       # the audit's, bound before any code under test runs
    before = _machinery()
    try:
        program = _Program(module=None, argv=sys.argv, testRunner=_Runner,
                           testLoader=_Loader(), exit=False)
    except SystemExit as exc:   # bad arguments: unittest printed why
        STREAM.emit(e="end", ok=False, tests_run=0, exit=2)
        sealed.end()
        _flush()
        _exit(2)
    except BaseException:
        traceback.print_exc()
        STREAM.emit(e="end", ok=False, tests_run=0, exit=2)
        sealed.end()
        _flush()
        _exit(2)
    _settle()
    evidence.imported([])       # the import system's settings as they were
    result = program.result
    replaced = evidence.changed(before, _machinery())
    for snapshot in (*_EARLY, _Program.collected):
        replaced += evidence.rebound(snapshot)
        replaced += evidence.gained(snapshot, _CASE_NAMES)
    if replaced:
        STREAM.emit(e="guard", replaced=replaced)
    for snapshot in _EARLY_DATA:    # golem judges each against the baseline and its writer
        for change in evidence.data_changed(snapshot):
            STREAM.emit(e="data", **change)
    ok = result.wasSuccessful() and result.testsRun > 0 and not replaced
    STREAM.emit(e="modules", files=evidence.loaded())
    STREAM.emit(e="end", ok=ok, tests_run=result.testsRun, exit=0 if ok else 1)
    sealed.end()    # straight from here: the seal says this function reached its end
    _flush()
    # straight out: an atexit handler of the code under test must not run after the end
    _exit(0 if ok else 1)


def _flush():
    for stream in (*_STREAMS, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


if __name__ == "__main__":
    main()
