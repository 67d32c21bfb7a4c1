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
import os
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
    class: what the tests of a class share is found once."""
    cls = _type(test)
    held = _CLASSES.get(cls)
    if held is not None and held[4] != sum(len(_vars(klass)) for klass in cls.__mro__):
        held = None         # a class that gained a member mid-run: its code read again
    if held is None:
        kind = cls.__name__
        if kind == "_FailedTest":
            return test.id(), _failed_module_file(test._testMethodName or ""), True, []
        if kind == "_ErrorHolder":
            # "setUpClass (pkg.test_mod.Case)" or "setUpModule (pkg.test_mod)"
            inner = test.description.rpartition("(")[2].rstrip(")")
            module = inner if inner in sys.modules else inner.rpartition(".")[0]
            return test.id(), _module_file(module), True, []
        # its module's file, the files its code comes from, the names its classes define
        # (and the start of its tests' ids, when it keeps unittest's `id`), and the size of
        # its classes' namespaces
        held = _CLASSES[cls] = (_module_file(cls.__module__),
                                evidence.origins(evidence.class_code(cls), CWD),
                                evidence.class_names(cls),
                                unittest.util.strclass(cls) + "." if getattr(cls, "id", None) is _TEST_ID
                                else None, sum(len(_vars(klass)) for klass in cls.__mro__))
    found = held[1]
    name = getattr(test, "_testMethodName", "") or ""
    if name not in held[2]:     # a test method its classes do not define (`__getattr__`)
        rel = _origin(getattr(test, name, None), CWD)
        if rel and rel not in found:
            found = [*found, rel]
    values = _vars(test).values()
    if _any(map(_callable, values)):        # a function test, or one kept by setUp
        for value in values:
            if _callable(value):
                rel = _origin(value, CWD)
                if rel and rel not in found:
                    found = [*found, rel]
    test_id = test.id() if held[3] is None or _type(name) is not str else held[3] + name
    equality = _vars(test).get("_type_equality_funcs")
    if equality is not None and not (_type(equality) is dict and len(equality) == len(_EQUALITY)
                                     and all(equality.get(k) is v for k, v in _EQUALITY.items())):
        for value in _equality(test, test_id, equality):
            rel = _origin(value, CWD)
            if rel and rel not in found:
                found = [*found, rel]
    return test_id, held[0], False, found


_EQUALITY = dict(unittest.TestCase()._type_equality_funcs)     # what unittest maps by type


def _equality(test, test_id, equality) -> list:
    """The functions a test's assertEqual calls by type that are not unittest's own: code
    from the tree under test, recorded with the test's origins (judged like them). Anything
    else (unittest's name of another assert method, a function from outside the tree) gets a
    guard record: the run is no evidence for that test."""
    found, wrong = [], []
    items = list(dict.items(equality)) if _isinstance(equality, dict) else [(None, None)]
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


_CLASSES = {}       # test class -> (its module's file, the files its code comes from)


def _record(test, outcome):
    test_id, file, pseudo, origins = _describe(test)
    if test_id in _tainted and outcome not in ("failed", "error"):
        outcome = "error"   # its assertEqual was not unittest's: whatever it says, no evidence
    if _failed.get(test_id) and outcome == "passed":
        return      # a subtest failed: the test as a whole did
    if outcome in ("failed", "error"):
        _failed[test_id] = outcome
    STREAM.test(test_id, outcome, file, pseudo, origins)


class _Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        _record(test, "passed")

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


class _Runner(unittest.TextTestRunner):
    resultclass = _Result


class _Loader(unittest.TestLoader):
    top = None

    def discover(self, start_dir, pattern="test*.py", top_level_dir=None):
        _Loader.top = os.path.abspath(top_level_dir or start_dir)
        return super().discover(start_dir, pattern, top_level_dir)


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
        STREAM.emit(e="collected", count=len(tests),
                    ids=[t.id() for t in tests if _type(t).__name__ not in PSEUDO_TYPES])
        spaces, seen = [], set()
        for cls in dict.fromkeys(map(_type, tests)):    # each class once, in order
            if cls.__name__ in PSEUDO_TYPES:
                continue
            for owner in (cls, sys.modules.get(cls.__module__)):
                if owner is not None and id(owner) not in seen:
                    seen.add(id(owner))
                    label = getattr(owner, "__qualname__", None) or owner.__name__
                    spaces.append((owner.__module__ + "." + label if _isinstance(owner, type)
                                   else owner.__name__, _vars(owner)))
        del tests       # each test is let go once it ran, as unittest does
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
    evidence.watch_reads(STREAM, CWD)
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
    result = program.result
    replaced = evidence.changed(before, _machinery())
    replaced += evidence.rebound(_Program.collected)
    if replaced:
        STREAM.emit(e="guard", replaced=replaced)
    ok = result.wasSuccessful() and result.testsRun > 0 and not replaced
    STREAM.emit(e="end", ok=ok, tests_run=result.testsRun, exit=0 if ok else 1)
    sealed.end()    # straight from here: the seal says this function reached its end
    _flush()
    # straight out: an atexit handler of the code under test must not run after the end
    _exit(0 if ok else 1)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass


if __name__ == "__main__":
    main()
