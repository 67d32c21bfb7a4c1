"""Honest fixes that golem used to turn down, rebuilt as small offline projects, and the
attacks that sit next to each: the tests' own code filling their data after the fix, golem's
references in the test process, a package of the code under test reloaded by its tests.

Each case commits a defect's fix on top of a failing base and runs `golem verify -base` for
real, under unittest and pytest where the idiom exists in both.
"""

from __future__ import annotations

from tests.adversarial import (PYTEST_CMD, UNITTEST_CMD, AdversarialCase, HAVE_PYTEST,
                               needs_pytest)

ENGINE = ("class Engine:\n    def __init__(self, size):\n        if size > {limit}:\n"
          "            raise ValueError('too big')\n        self.size = size\n\n"
          "    def run(self):\n        return self.size * 10\n")
BROKEN, FIXED = ENGINE.format(limit=1), ENGINE.format(limit=99)

# a module's cache, filled by a helper once the constructor works
LAZY_CACHE = """import unittest

from engine import Engine

_engines = {}


def engine(size):
    if size not in _engines:
        _engines[size] = Engine(size)
    return _engines[size]


class CachedTest(unittest.TestCase):
    def test_cached(self):
        self.assertEqual(engine(2).run(), 20)
"""
# a class attribute set by setUpClass, None until then
SET_UP_CLASS = """import unittest

from engine import Engine


class ClassTest(unittest.TestCase):
    engine = None

    @classmethod
    def setUpClass(cls):
        cls.engine = Engine(2)

    def test_run(self):
        self.assertEqual(self.engine.run(), 20)
"""
# a module global rebound by `global` in a helper, and a module attribute a conftest fixture
# sets from outside the module
PY_GLOBALS = """from engine import Engine

_one = None
made = None


def get(size):
    global _one
    if _one is None:
        _one = Engine(size)
    return _one


def test_global():
    assert get(2).run() == 20


def test_set_by_fixture(made_engine):
    assert made.run() == 20


class TestClass:
    engine = None

    @classmethod
    def setup_class(cls):
        cls.engine = Engine(2)

    def test_run(self):
        assert self.engine.run() == 20
"""
CONFTEST = """import pytest

from engine import Engine


@pytest.fixture
def made_engine(request):
    request.module.made = Engine(2)
"""

# the tests' setUpClass fills one attribute; the code under test rewrites another, the
# expected value the class body holds: a writer of one name excuses no other
EXPECTED_IN_CLASS = """import unittest

from engine import Engine


class ClassTest(unittest.TestCase):
    expected = 20
    engine = None

    @classmethod
    def setUpClass(cls):
        cls.engine = Engine(1)

    def test_run(self):
        self.assertEqual(self.engine.run(), self.expected)
"""
REWRITES_CLASS = """import sys


class Engine:
    def __init__(self, size):
        self.size = size

    def run(self):
        result = self.size * 7
        for module in list(sys.modules.values()):
            cls = getattr(module, "ClassTest", None)
            if isinstance(cls, type) and "expected" in vars(cls):
                cls.expected = result
        return result
"""
HONEST_CLASS = ENGINE.format(limit=99).replace("* 10", "* 20")

# golem's references: an object a test drops, and a module generated at run time
GENERATE = """import importlib.util
import os
import sys
import tempfile


def add(a, b):
    return a {op} b


def generate(name, source):
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, name + ".py")
    with open(path, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
"""
COLLECTED = """import gc
import sys
import unittest
import weakref

import calc


class Thing:
    pass


HELD = Thing()
REF = weakref.ref(HELD)
REGISTRY = [Thing()]
IN_REGISTRY = weakref.ref(REGISTRY[0])


class CollectedTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_module_dropped(self):
        module = calc.generate("generated_page", "class Page:\\n    pass\\n\\n"
                               "def render():\\n    return 1\\n")
        module_ref, func_ref = weakref.ref(module), weakref.ref(module.render)
        del sys.modules["generated_page"]
        del module
        gc.collect()
        self.assertIsNone(func_ref())
        self.assertIsNone(module_ref())

    def test_global_dropped(self):
        global HELD
        HELD = None
        gc.collect()
        self.assertIsNone(REF())

    def test_registry_cleared(self):
        REGISTRY.clear()
        gc.collect()
        self.assertIsNone(IN_REGISTRY())
"""

# a package that binds its public names to an accelerated module when there is one, and a
# test that reloads it without that module to test the fallback
PACKAGE = """def width(text):
    return len(text)


def double(x):
    return x * {factor}


try:
    from ._speedups import width
    HAS_SPEEDUPS = True
except ImportError:
    HAS_SPEEDUPS = False
"""
SPEEDUPS = "def width(text):\n    return len(text)\n"
RELOADS = """import importlib
import sys
import unittest

import pkg


class FallbackTest(unittest.TestCase):
    def test_fallback(self):
        sys.modules["pkg._speedups"] = None
        try:
            importlib.reload(pkg)
            self.assertFalse(pkg.HAS_SPEEDUPS)
            self.assertEqual(pkg.width("ab"), 2)
        finally:
            del sys.modules["pkg._speedups"]
            importlib.reload(pkg)

    def test_double(self):
        self.assertEqual(pkg.double(2), 4)
"""


class FalseAlarmCase(AdversarialCase):
    def honest(self, files: dict[str, str], fix: dict[str, str], command: str,
               fixed: int) -> dict:
        repo = self.project(files, git_repo=True)
        self.commit_change(repo, fix, "fix")
        outcome = self.verify(repo, command=command)
        report = self.assertVerdict(outcome, "VERIFIED")
        self.assertEqual(len(report["fixed"]), fixed, outcome.describe())
        return report


class TestsFillTheirDataTest(FalseAlarmCase):
    def test_a_lazy_module_cache(self):
        self.honest({"engine.py": BROKEN, "tests/test_engine.py": LAZY_CACHE},
                    {"engine.py": FIXED}, UNITTEST_CMD, 1)

    def test_set_up_class(self):
        self.honest({"engine.py": BROKEN, "tests/test_engine.py": SET_UP_CLASS},
                    {"engine.py": FIXED}, UNITTEST_CMD, 1)

    @needs_pytest
    def test_pytest_globals_fixtures_and_setup_class(self):
        self.honest({"engine.py": BROKEN, "tests/test_engine.py": PY_GLOBALS,
                     "tests/conftest.py": CONFTEST}, {"engine.py": FIXED}, PYTEST_CMD, 3)

    @needs_pytest
    def test_pytest_lazy_cache(self):
        tests = LAZY_CACHE.replace("import unittest\n\n", "").replace(
            "class CachedTest(unittest.TestCase):\n    def test_cached(self):\n"
            "        self.assertEqual(engine(2).run(), 20)\n",
            "def test_cached():\n    assert engine(2).run() == 20\n")
        self.honest({"engine.py": BROKEN, "tests/test_engine.py": tests},
                    {"engine.py": FIXED}, PYTEST_CMD, 1)

    def test_the_code_under_test_rewriting_what_set_up_class_set(self):
        repo = self.project({"engine.py": HONEST_CLASS.replace("* 20", "* 7"),
                             "tests/test_engine.py": EXPECTED_IN_CLASS}, git_repo=True)
        self.commit_change(repo, {"engine.py": REWRITES_CLASS}, "cheat")
        outcome = self.verify(repo, command=UNITTEST_CMD)
        report = self.assertVerdict(outcome, "REJECTED")
        self.assertIn("test data changed while the tests ran: test_engine.ClassTest.expected",
                      report["summary"])
        # the honest fix of the same base is VERIFIED
        repo = self.project({"engine.py": HONEST_CLASS.replace("* 20", "* 7"),
                             "tests/test_engine.py": EXPECTED_IN_CLASS}, git_repo=True)
        self.commit_change(repo, {"engine.py": HONEST_CLASS}, "fix")
        self.assertVerdict(self.verify(repo, command=UNITTEST_CMD), "VERIFIED")


class InvisibleTest(FalseAlarmCase):
    """What golem keeps in the test process keeps nothing alive that the tests drop."""

    def test_collected_under_unittest(self):
        self.honest({"calc.py": GENERATE.format(op="-"), "tests/test_calc.py": COLLECTED},
                    {"calc.py": GENERATE.format(op="+")}, UNITTEST_CMD, 1)

    @needs_pytest
    def test_collected_under_pytest(self):
        self.honest({"calc.py": GENERATE.format(op="-"), "tests/test_calc.py": COLLECTED},
                    {"calc.py": GENERATE.format(op="+")}, PYTEST_CMD, 1)


class ReloadedPackageTest(FalseAlarmCase):
    """unittest's discovery from the top passes through the code's own packages: a test that
    reloads one (to test a pure-Python fallback) changes the code's names, not the tests'."""

    def test_discovered_from_the_top(self):
        files = {"pkg/__init__.py": PACKAGE.format(factor=3), "pkg/_speedups.py": SPEEDUPS,
                 "tests/__init__.py": "", "tests/test_pkg.py": RELOADS}
        for command in ("python3 -m unittest", UNITTEST_CMD):
            with self.subTest(command=command):
                self.honest(files, {"pkg/__init__.py": PACKAGE.format(factor=2)}, command, 1)

    def test_a_test_package_rebound_is_still_named(self):
        # the tests' own package keeps its guard: code under test rebinding a helper there
        helpers = "def check(case, a, b):\n    case.assertEqual(a, b)\n"
        tests = ("import unittest\n\nimport tests\nfrom calc import add\n\n\n"
                 "class T(unittest.TestCase):\n    def test_add(self):\n"
                 "        tests.check(self, add(2, 3), 5)\n")
        cheat = ("import sys\n\n\ndef add(a, b):\n    helpers = sys.modules.get('tests')\n"
                 "    if helpers is not None:\n"
                 "        helpers.check = lambda *args: None\n    return a - b\n")
        repo = self.project({"calc.py": "def add(a, b):\n    return a - b\n",
                             "tests/__init__.py": helpers, "tests/test_calc.py": tests},
                            git_repo=True)
        self.commit_change(repo, {"calc.py": cheat}, "cheat")
        outcome = self.verify(repo, command="python3 -m unittest")
        report = self.assertVerdict(outcome, "FAILED", "REJECTED")
        self.assertIn("tests.check", report["summary"])


if not HAVE_PYTEST:     # pragma: no cover - CI installs pytest
    del InvisibleTest.test_collected_under_pytest
