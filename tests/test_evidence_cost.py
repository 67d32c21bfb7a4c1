"""What a graded run costs per test: the tests of a class share a record, golem reads them in
one pass, and the run keeps nothing of a test once it ran. The security checks on the stream
and the guard hold for the shared records as they do for single ones."""

import json
import os
import sys
import tempfile
import textwrap
import unittest

from golem.tools import process
from golem.tools.process import command_env
from golem.workflow.verifier.scratch import Phase
from golem.workflow.verifier.suite import (SuiteResult, TestCommand, _StreamReader, plan_for,
                                           run_suite, seal_mac)

PY = sys.executable
KEY = b"k" * 32


def stream(*records, seal: bool = True) -> bytes:
    lines = [json.dumps(r) for r in records]
    if seal:
        lines.append(json.dumps({"e": "seal", "mac": seal_mac(KEY)}))
    return ("\n".join(lines) + "\n").encode()


def _read_stream(result: SuiteResult, raw: bytes, truncated: bool, key: bytes) -> None:
    """The whole stream `raw`, its lines as bytes.splitlines makes them, read at once."""
    reader = _StreamReader(result, key)
    for line in raw.splitlines():
        if not reader.line(line):
            break
    reader.finish(truncated)


def read(raw: bytes) -> SuiteResult:
    result = SuiteResult(0, False, "", 0.0, "unittest-json")
    _read_stream(result, raw, False, KEY)
    return result


START = {"e": "start", "runner": "unittest", "cwd": "/ws"}
COLLECTED = {"e": "collected", "count": 3, "ids": ["m.C.a", "m.C.b", "m.C.c"]}
END = {"e": "end", "ok": True, "tests_run": 3, "exit": 0}


def group(ids, outcome="passed", origins=("m.py",)):
    return {"e": "tests", "outcome": outcome, "file": "m.py", "pseudo": False,
            "origins": list(origins), "ids": ids}


class SharedRecordsTest(unittest.TestCase):
    """golem's reading of `tests` records, each naming the tests that share an outcome."""

    def test_a_shared_record_counts_for_each_test_it_names(self):
        result = read(stream(START, COLLECTED, group(["m.C.a", "m.C.b"]),
                             group(["m.C.c"], "failed", ["m.py", "lib.py"]), END))
        self.assertIsNone(result.problem)
        self.assertEqual(result.tests, {"m.C.a": "passed", "m.C.b": "passed",
                                        "m.C.c": "failed"})
        self.assertEqual(result.files, {"m.C.a": "m.py", "m.C.b": "m.py", "m.C.c": "m.py"})
        self.assertEqual(result.origins["m.C.c"], ["m.py", "lib.py"])
        self.assertEqual(result.origins["m.C.a"], ["m.py"])

    def test_a_test_never_collected_is_forged(self):
        result = read(stream(START, COLLECTED, group(["m.C.a", "m.C.zz"]), END))
        self.assertIn("never collected", result.problem)
        self.assertEqual(result.tests, {})

    def test_a_test_reported_twice_is_forged(self):
        result = read(stream(START, COLLECTED, group(["m.C.a", "m.C.b", "m.C.c"]),
                             group(["m.C.a"]), END))
        self.assertIn("reported twice", result.problem)
        self.assertEqual(result.tests, {})

    def test_a_test_that_failed_may_fail_again(self):      # subtests report each failure
        result = read(stream(START, COLLECTED, group(["m.C.a"], "failed"),
                             group(["m.C.a"], "failed"), group(["m.C.b", "m.C.c"]), END))
        self.assertIsNone(result.problem)
        self.assertEqual(result.failing, ["m.C.a"])

    def test_names_that_are_not_text_are_malformed(self):
        for ids in ([1], "m.C.a", None):
            result = read(stream(START, COLLECTED, group(ids), END))
            self.assertIn("malformed", result.problem, ids)

    def test_an_unsealed_stream_keeps_only_failures(self):
        result = read(stream(START, COLLECTED, group(["m.C.a", "m.C.b"]),
                             group(["m.C.c"], "error"), END, seal=False))
        self.assertIn("not sealed", result.problem)
        self.assertEqual(result.tests, {"m.C.c": "error"})


MANY = textwrap.dedent("""\
    import unittest
    import weakref

    GONE = []


    def helper(x=1):
        return x


    class First(unittest.TestCase):
        def test_00_first(self):
            GONE.append(weakref.ref(self))
    {methods}

    class Then(unittest.TestCase):
        def test_the_first_test_was_let_go(self):
            import gc
            gc.collect()
            self.assertIsNone(GONE[0]())
    """)


class PiecewiseTest(unittest.TestCase):
    """The stream read as it arrives, in pieces of any size, reads as the whole does."""

    def test_pieces_read_as_the_whole(self):
        import random
        streams = [stream(START, COLLECTED, group(["m.C.a", "m.C.b"]),
                          group(["m.C.c"], "failed", ["m.py", "lib.py"]), END),
                   stream(START, COLLECTED, group(["m.C.a", "m.C.zz"]), END),
                   stream(START, COLLECTED, group(["m.C.a"]), END, seal=False),
                   stream(START, COLLECTED, group(["m.C.a", "m.C.b", "m.C.c"]), END)[:-3],
                   b"\r\n".join(stream(START, COLLECTED, END).splitlines()),
                   stream(START, COLLECTED, END) + b"\n" + stream(END)]
        rng = random.Random(7)
        for raw in streams:
            whole = read(raw)
            for _ in range(20):
                result = SuiteResult(0, False, "", 0.0, "unittest-json")
                reader = _StreamReader(result, KEY)
                at = 0
                while at < len(raw):
                    step = rng.randint(1, 40)
                    reader.feed(raw[at:at + step])
                    at += step
                reader.finish(False)
                self.assertEqual((result.tests, result.problem, result.files, result.origins),
                                 (whole.tests, whole.problem, whole.files, whole.origins))


class DriverTest(unittest.TestCase):
    """The unittest driver run as golem runs it."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.root = os.path.realpath(tmp.name)
        os.mkdir(os.path.join(self.root, "tests"))
        home = os.path.join(self.root, "home")
        os.mkdir(home)
        self.env = command_env(home, home)
        self.phase = Phase("cost")
        self.addCleanup(self.phase.close)
        self.plan = plan_for(TestCommand([PY, "-m", "unittest", "discover", "-s", "tests"],
                                         "unittest", "-test"), self.env, self.root)

    def put(self, text: str, extra: str = "") -> None:
        methods = "".join(f"    def test_{i:02d}(self):\n        pass\n\n"
                          for i in range(1, 30))
        with open(os.path.join(self.root, "tests", "test_many.py"), "w") as handle:
            handle.write(text.format(methods=methods) + extra)

    def test_the_tests_of_a_class_share_a_record(self):
        self.put(MANY)
        run = self.phase.run()
        argv = self.plan.argv(self.root, run, self.phase.helpers())
        done = process.run(argv, cwd=self.root, env=run.env(self.env), timeout=120,
                           cap=200_000, evidence=1_000_000, seal=KEY)
        records = [json.loads(line) for line in done.evidence.splitlines()]
        shared = [r for r in records if r["e"] in ("test", "tests")]
        # one record for the tests of a class that ran together (a batch older than 50 ms
        # is written at once, so a slow machine may split it; never into one per test)
        self.assertLess(len(shared), 31, shared)
        self.assertEqual(sum(len(r["ids"]) for r in shared), 31)
        result = SuiteResult(done.exit_code, False, done.output, 0.0, "unittest-json")
        _read_stream(result, done.evidence, done.evidence_truncated, KEY)
        self.assertIsNone(result.problem)
        self.assertEqual(len(result.tests), 31)
        self.assertEqual(set(result.tests.values()), {"passed"})

    def suite(self) -> SuiteResult:
        return run_suite(self.plan, cwd=self.root, env=self.env, run=self.phase.run(),
                         helpers=self.phase.helpers(), timeout=120)

    def test_each_test_is_let_go_once_it_ran(self):
        self.put(MANY)
        result = self.suite()
        self.assertTrue(result.passed, result.output)
        self.assertEqual(result.tests["test_many.Then.test_the_first_test_was_let_go"],
                         "passed")

    def test_defaults_changed_by_the_run_are_named(self):
        for change, named in (("helper.__defaults__ = (2,)", True),
                              ("helper.__code__ = (lambda x=1: 2).__code__", True),
                              ("old = helper.__defaults__\n"
                               "        helper.__defaults__ = (2,)\n"
                               "        helper.__defaults__ = old", False)):
            with self.subTest(change=change):
                self.put(MANY, textwrap.dedent("""\

                    helper.__kwdefaults__ = {{}}      # at import: before the guard looks

                    class Changes(unittest.TestCase):
                        def test_change(self):
                            {change}
                    """).format(change=change.replace("\n        ", "\n        ")))
                result = self.suite()
                guard = [t for t in result.tests if t.startswith("golem: the code under")]
                self.assertEqual(bool(guard), named, (guard, result.output))
                if named:
                    self.assertIn("test_many.helper", guard[0])
                    self.assertFalse(result.passed)

    def test_a_test_that_differs_in_a_batch_is_described_on_its_own(self):
        # passing tests of a class are checked together: the one whose assertEqual table the
        # tree's code changed, and the one that keeps a function of the tree, among them
        with open(os.path.join(self.root, "helper.py"), "w") as handle:
            handle.write("def double(x):\n    return 2 * x\n\n\n"
                         "def prepare(case):\n"
                         "    if case._testMethodName == 'test_20':\n"
                         "        case._type_equality_funcs[int] = 'assertNotEqual'\n"
                         "    if case._testMethodName == 'test_25':\n"
                         "        case.keep = double\n")
        methods = "".join(f"    def test_{i:02d}(self):\n        self.assertEqual(1, 1)\n\n"
                          for i in range(40) if i != 20)
        with open(os.path.join(self.root, "tests", "test_batch.py"), "w") as handle:
            handle.write("import unittest\n\nimport helper\n\n\n"
                         "class Many(unittest.TestCase):\n"
                         "    def setUp(self):\n        helper.prepare(self)\n\n"
                         "    def test_20(self):\n        self.assertEqual(1, 2)\n\n"
                         + methods)
        result = self.suite()
        self.assertEqual(result.tests.pop("test_batch.Many.test_20"), "error")
        guard = [t for t in result.tests if t.startswith("golem: the code under")]
        self.assertEqual(len(guard), 1, result.tests)
        self.assertIn("assertEqual for int in test_batch.Many.test_20", guard[0])
        del result.tests[guard[0]]
        self.assertEqual(len(result.tests), 39)
        self.assertEqual(set(result.tests.values()), {"passed"})
        self.assertIn("helper.py", result.origins["test_batch.Many.test_25"])
        self.assertNotIn("helper.py", result.origins["test_batch.Many.test_24"])
        self.assertEqual(result.files["test_batch.Many.test_24"], "tests/test_batch.py")

    def test_an_assertequal_table_of_another_kind_is_no_evidence(self):
        # a dict subclass holding unittest's own entries, whose `get` answers otherwise
        with open(os.path.join(self.root, "helper.py"), "w") as handle:
            handle.write("class Table(dict):\n"
                         "    def get(self, key, default=None):\n"
                         "        return (lambda *a, **k: None) if key is int else "
                         "dict.get(self, key, default)\n\n\n"
                         "def prepare(case):\n"
                         "    case._type_equality_funcs = Table(case._type_equality_funcs)\n")
        with open(os.path.join(self.root, "tests", "test_table.py"), "w") as handle:
            handle.write("import unittest\n\nimport helper\n\n\n"
                         "class Case(unittest.TestCase):\n"
                         "    def setUp(self):\n        helper.prepare(self)\n\n"
                         "    def test_wrong(self):\n        self.assertEqual(1, 2)\n")
        result = self.suite()
        self.assertEqual(result.tests.get("test_table.Case.test_wrong"), "error", result.tests)
        self.assertFalse(result.passed)



DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golem",
                      "workflow", "verifier", "helpers", "unittest_driver.py")


class Counted:
    """A stream that counts its writes and flushes."""

    def __init__(self):
        self.writes, self.flushes = [], 0

    def write(self, text):
        self.writes.append(text)

    def flush(self):
        self.flushes += 1


class RunnerStreamTest(unittest.TestCase):
    """The driver's runner writes its dots without a flush for each (a write to golem's pipe
    per test); a verbose run, whose lines name each test before it runs, flushes as
    unittest does."""

    def setUp(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("golem_driver_under_test", DRIVER)
        self.driver = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.driver)

    def run_with(self, verbosity: int) -> Counted:
        class Many(unittest.TestCase):
            pass
        for i in range(40):
            setattr(Many, f"test_{i:02d}", lambda self: None)
        stream = Counted()
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Many)
        result = self.driver._Runner(stream=stream, verbosity=verbosity).run(suite)
        self.assertEqual(result.testsRun, 40)
        return stream

    def test_dots_are_not_flushed_one_by_one(self):
        stream = self.run_with(1)
        self.assertEqual("".join(stream.writes).count("."), 40 + 1)     # and "Ran 40 tests in"
        self.assertLess(stream.flushes, 3)
        self.assertIn(stream, self.driver._STREAMS)     # flushed before the driver leaves

    def test_a_verbose_run_flushes_as_unittest_does(self):
        self.assertGreaterEqual(self.run_with(2).flushes, 40)


if __name__ == "__main__":
    unittest.main()
