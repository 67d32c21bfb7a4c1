"""golem's bytecode for the workspace's own sources: compiled by content, by golem's own
process, placed where each run's Python looks for it, read-only to the run, and never used
for a source that differs from what it was compiled from."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import unittest

from golem.tools import sandbox
from golem.tools.process import command_env
from golem.trace import Trace
from golem.workflow.verifier import Environment, bytecode, run_baseline
from golem.workflow.verifier.scratch import cache_dir, cache_state
from golem.workflow.verifier.suite import TestCommand, run_suite
from tests import devenv
from tests.adversarial import QUICK, needs_pytest
from tests.fixtures import GolemCase, read_trace, run_cli, last_json, write_files
from tests.provider_server import chat
from tests.test_environments import EnvironmentCase

SANDBOXES = ["none"] + (["bwrap"] if shutil.which("bwrap")
                        and sandbox.usable(shutil.which("bwrap")) is None else [])
TAG = sys.implementation.cache_tag

# A test of the suite itself: every module of the tree it imports that the run did not
# change has golem's bytecode where Python looks for it, hash-checked; and, in a sandbox,
# the run cannot write it.
WARM_TEST = """\
SANDBOXED = {sandboxed}

import importlib.util
import os
import unittest

import calc


def _flags(path):
    with open(path, "rb") as handle:
        return int.from_bytes(handle.read(8)[4:8], "little")


class WarmTest(unittest.TestCase):
    def test_golem_compiled_the_tree(self):
        for source in (calc.__file__, __file__):
            cached = importlib.util.cache_from_source(source)
            self.assertTrue(os.path.isfile(cached), cached)
            self.assertEqual(_flags(cached), 3)      # hash-based, checked against the source
            if SANDBOXED:
                with self.assertRaises(OSError):
                    open(cached, "r+b").close()

    def test_what_the_suite_loaded_is_warm_after_the_baseline(self):
        # a module of the standard library that neither the runner nor golem loads: found
        # by the baseline's run, and placed for the runs after it
        import colorsys
        self.assertTrue(os.path.isfile(importlib.util.cache_from_source(colorsys.__file__)))
"""


def _flags(path: str) -> int:
    with open(path, "rb") as handle:
        return int.from_bytes(handle.read(8)[4:8], "little")


def _found(master: str, module: str) -> list[str]:
    return [os.path.join(d, f) for d, _, names in os.walk(master)
            for f in names if f == f"{module}.{TAG}.pyc"]


class ViewTest(unittest.TestCase):
    """bytecode.sources and bytecode.view on their own."""

    def setUp(self):
        import tempfile
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = os.path.realpath(tmp.name)

    def test_the_record_of_a_cache_holds_what_its_links_point_to(self):
        # bytecode installed beside a source is linked into golem's cache: a change to it
        # (the same size, its modification time put back) is a change of the cache
        target = os.path.join(self.tmp, "case.pyc")
        with open(target, "wb") as handle:
            handle.write(b"1234")
        cache = os.path.join(self.tmp, "cache")
        os.makedirs(os.path.join(cache, "lib"))
        os.symlink(target, os.path.join(cache, "lib", "case.pyc"))
        before = cache_state(cache)
        info = os.stat(target)
        with open(target, "r+b") as handle:
            handle.write(b"4321")
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
        self.assertNotEqual(cache_state(cache), before)

    def test_sources_skip_dependency_trees_caches_and_links(self):
        root = os.path.join(self.tmp, "ws")
        write_files(root, {"a.py": "A = 1\n", "pkg/b.py": "B = 2\n", ".venv/lib/c.py": "",
                           "pkg/__pycache__/x.py": "", ".git/hooks/d.py": "",
                           "notes.txt": "not python\n"})
        os.symlink(os.path.join(root, "a.py"), os.path.join(root, "link.py"))
        found, wanted = bytecode.sources(root, keep=lambda key: True)
        self.assertEqual(sorted(found), ["a.py", "pkg/b.py"])
        self.assertEqual(found["a.py"], hashlib.sha256(b"A = 1\n").hexdigest())
        self.assertEqual(wanted[found["pkg/b.py"]], (os.path.join(root, "pkg/b.py"), b"B = 2\n"))

    def test_view_places_the_cached_bytecode_where_python_looks_and_links_the_rest(self):
        root = os.path.join(self.tmp, "ws")
        write_files(root, {"a.py": "A = 1\n", "pkg/b.py": "B = 2\n", "new.py": "N = 3\n"})
        master = os.path.join(self.tmp, "master")
        write_files(master, {f"usr/lib/json.{TAG}.pyc": "stdlib"})
        found, wanted = bytecode.sources(root, keep=lambda key: True)
        code = bytecode.code_dir(master, TAG)
        os.makedirs(code)
        for rel in ("a.py", "pkg/b.py"):            # new.py is not in the cache
            with open(os.path.join(code, found[rel] + ".pyc"), "w") as handle:
                handle.write(rel)
        view = bytecode.view(self.tmp, master, TAG, [root])
        self.assertTrue(os.path.islink(os.path.join(view, "usr")))
        self.assertFalse(os.path.exists(os.path.join(view, bytecode.CODE)))
        for rel in ("a.py", "pkg/b.py"):
            where = os.path.join(view + root, os.path.dirname(rel),
                                 os.path.basename(rel)[:-3] + f".{TAG}.pyc")
            with open(where) as handle:
                self.assertEqual(handle.read(), rel)
        self.assertFalse(os.path.exists(os.path.join(view + root, f"new.{TAG}.pyc")))
        with open(os.path.join(view, "usr", "lib", f"json.{TAG}.pyc")) as handle:
            self.assertEqual(handle.read(), "stdlib")

    def test_the_tree_shares_a_directory_with_the_cache(self):
        """The tree lies below a directory the cache has entries in (a venv beside it)."""
        root = os.path.join(self.tmp, "ws")
        write_files(root, {"a.py": "A = 1\n"})
        master = os.path.join(self.tmp, "master")
        beside = os.path.join(master + self.tmp, "env", f"site.{TAG}.pyc")
        write_files(os.path.dirname(beside), {os.path.basename(beside): "site"})
        found, _ = bytecode.sources(root)
        os.makedirs(bytecode.code_dir(master, TAG))
        with open(os.path.join(bytecode.code_dir(master, TAG), found["a.py"] + ".pyc"),
                  "w") as handle:
            handle.write("a")
        view = bytecode.view(self.tmp, master, TAG, [root])
        with open(view + beside[len(master):]) as handle:
            self.assertEqual(handle.read(), "site")
        with open(os.path.join(view + root, f"a.{TAG}.pyc")) as handle:
            self.assertEqual(handle.read(), "a")

    def test_compiled_bytecode_is_hash_checked_and_runs_as_its_source(self):
        root = os.path.join(self.tmp, "ws")
        write_files(root, {"mod.py": "# -*- coding: latin-1 -*-\nVALUE = '\xe9'\n"})
        with open(os.path.join(root, "mod.py"), "wb") as handle:
            handle.write("# -*- coding: latin-1 -*-\nVALUE = '\xe9'\n".encode("latin-1"))
        master = os.path.join(self.tmp, "master")
        os.makedirs(master)
        new = bytecode.compile_sources(sys.executable, TAG, master, [root], self.tmp,
                                       {"PATH": os.environ.get("PATH", "")})
        self.assertEqual(new, 1)
        self.assertEqual(bytecode.compile_sources(sys.executable, TAG, master, [root], self.tmp,
                                                  {"PATH": os.environ.get("PATH", "")}), 0)
        found, _ = bytecode.sources(root)
        path = os.path.join(bytecode.code_dir(master, TAG), found["mod.py"] + ".pyc")
        with open(path, "rb") as handle:
            data = handle.read()
        self.assertEqual(int.from_bytes(data[4:8], "little"), 3)
        with open(os.path.join(root, "mod.py"), "rb") as handle:
            self.assertEqual(data[8:16], importlib.util.source_hash(handle.read()))
        import marshal
        space = {}
        exec(marshal.loads(data[16:]), space)
        self.assertEqual(space["VALUE"], "\xe9")


class GradedRunTest(EnvironmentCase):
    """End to end, on a git checkout with an editable install of a src/ layout in its
    `.venv`: the baseline, the agent's commands and the verification all find golem's
    bytecode for the tree they run, and cannot write it."""

    def test_every_run_starts_warm(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-{mode}.jsonl")
                project = devenv.make(self.tmp, "src-pth", name=f"warm-{mode}",
                                      extra={"tests/test_warm.py": WARM_TEST.format(
                                          sandboxed=mode != "none")})
                server = self.serve([
                    chat(tool_calls=[("write_file", {"path": project.core,
                                                     "content": devenv.FIXED_CORE})]),
                    chat(tool_calls=[("run_tests", {})]),
                    chat("fixed add and mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertEqual(report.get("verdict"), "VERIFIED", out + err)
                events = read_trace(self.trace)
                baseline = next(e for e in events if e["event"] == "baseline")
                # add, mul, and the module only the baseline's run could name
                self.assertEqual(baseline["counts"]["failed"], 3, baseline)
                run = [e for e in events if e["event"] == "tool_result"
                       and e.get("name") == "run_tests"]
                # the agent's edit ran, not the bytecode placed for the file it replaced
                self.assertTrue(run and "test_golem_compiled_the_tree" not in
                                str(run[0].get("content", "")), run)
                self.assertIn("Ran 5 tests", run[0]["content"])
                self.assertNotIn("FAILED", run[0]["content"])
                after = next(e for e in events if e["event"] == "verification")
                self.assertEqual(after["counts"], {"passed": 5}, after)

    def test_bytecode_the_agent_planted_is_never_graded(self):
        """The model's code, run by its own `run_tests`, writes bytecode that passes every
        test, with the real test file's hash, into golem's cache through its view: read-only
        in a sandbox; unconfined, the change is seen and the cache thrown away, so the
        verification compiles the real tests."""
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-{mode}.jsonl")
                project = devenv.make(self.tmp, "src-pth", name=f"plant-{mode}")
                server = self.serve([
                    chat(tool_calls=[("write_file", {"path": project.core,
                                                     "content": devenv.BUGGY_CORE + PLANT})]),
                    chat(tool_calls=[("run_tests", {})]),
                    chat("fixed add and mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertNotEqual(report.get("verdict"), "VERIFIED", out + err)
                after = next(e for e in read_trace(self.trace) if e["event"] == "verification")
                self.assertEqual(after["counts"], {"failed": 2, "passed": 1}, after)
                thrown = [e for e in read_trace(self.trace) if e["event"] == "note"
                          and "bytecode cache changed" in e["message"]]
                self.assertEqual(bool(thrown), mode == "none", thrown)


    def test_a_source_hidden_in_a_dependency_tree_s_bytecode_directory_is_seen(self):
        """`__pycache__` directories of the `.venv` hold bytecode golem never reads from
        there; a module written into one is imported like any other
        (`import __pycache__.cheat`), so it is a change of the dependency tree."""
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.trace = os.path.join(self.tmp, f"trace-hidden-{mode}.jsonl")
                project = devenv.make(self.tmp, "src-pth", name=f"hidden-{mode}")
                site = os.path.relpath(project.site_packages(), project.root)
                # as pip leaves it for a top-level module it installed (`six.py`)
                write_files(project.site_packages(), {
                    "six.py": "X = 1\n", f"__pycache__/six.{TAG}.pyc": "bytecode"})
                server = self.serve([
                    chat(tool_calls=[("write_file", {
                        "path": f"{site}/__pycache__/cheat.py",
                        "content": devenv.FIXED_CORE})]),
                    chat(tool_calls=[("write_file", {
                        "path": project.core,
                        "content": "from __pycache__.cheat import add, mul  # noqa\n"})]),
                    chat("fixed add and mul")])
                code, out, err, report = self.fix(project, server, sandbox=mode)
                self.assertEqual(report.get("verdict"), "REJECTED", out + err)
                self.assertIn("dependency tree changed", out + err)


# Runs wherever the workspace's `src` is on the path (an editable install's .pth): at start-up
# of any process with site, as a `sitecustomize` the workspace supplies.
PLANT_CACHE = """\
import os
prefix = os.environ.get("PYTHONPYCACHEPREFIX")
if prefix:
    try:
        os.close(os.open(os.path.join(prefix, "planted.pyc"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError:
        pass
"""


class CacheWritersTest(GolemCase):
    """Only golem's own compiler writes its cache: never a process that may run the
    workspace's code, and never from a source whose compiling warns."""

    def baseline(self, project, mode: str, state: str, argv=None):
        home = os.path.join(self.tmp, f"home-{mode}")
        os.makedirs(home, exist_ok=True)
        env = Environment(mode, command_env(home, home), Trace(), 120.0)
        argv = argv or [project.python, "-m", "unittest", "discover", "-s", "tests"]
        baseline = run_baseline(env, TestCommand(argv, "unittest", "-test"), project.root,
                                cache=lambda interp: cache_dir(state, interp, project.root))
        self.addCleanup(baseline.phase.close)
        return baseline

    def test_warnings_of_compiling_reach_a_run_that_makes_them_errors(self):
        # a cold checkout's run compiles `"\\d"` itself and, with warnings as errors, fails
        # to import it: golem's bytecode must not make that module import cleanly
        project = devenv.make(self.tmp, "src-pth", extra={
            "src/calc/escape.py": 'PATTERN = "\\d+"\n',
            "tests/test_escape.py": "import unittest, warnings\nwarnings.simplefilter('error')\n"
                                    "from calc import escape\n\n\n"
                                    "class EscapeTest(unittest.TestCase):\n"
                                    "    def test_pattern(self):\n"
                                    "        self.assertTrue(escape.PATTERN)\n"})
        state = os.path.join(self.tmp, "state")
        baseline = self.baseline(project, "none", state)
        failing = baseline.result.failing
        self.assertTrue(any("test_escape" in name for name in failing), baseline.result.tests)
        # the clean sources are compiled all the same
        code = bytecode.code_dir(baseline.master, TAG)
        with open(os.path.join(project.root, "src/calc/escape.py"), "rb") as handle:
            warned = hashlib.sha256(handle.read()).hexdigest()
        with open(os.path.join(project.root, project.core), "rb") as handle:
            clean = hashlib.sha256(handle.read()).hexdigest()
        self.assertIn(clean + ".pyc", os.listdir(code))
        self.assertNotIn(warned + ".pyc", os.listdir(code))
        # and the runner's own modules are warm, hash-checked
        # (the bytecode installed beside unittest's source, linked, or golem's own)
        found = _found(baseline.master, "case")
        self.assertEqual(len(found), 1, found)
        source = os.path.realpath(unittest.case.__file__)
        beside = os.path.join(os.path.dirname(source), "__pycache__", f"case.{TAG}.pyc")
        if os.path.islink(found[0]):
            self.assertEqual(os.readlink(found[0]), beside)
        else:
            self.assertEqual(_flags(found[0]), 3)

    def test_processes_that_run_the_workspace_s_code_never_write_the_cache(self):
        # the probe and the runner's imports start the test interpreter with site: the
        # editable install puts `src` on the path, and its sitecustomize runs there
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                project = devenv.make(self.tmp, "src-pth", name=f"writers-{mode}",
                                      extra={"src/sitecustomize.py": PLANT_CACHE})
                state = os.path.join(self.tmp, f"state-{mode}")
                baseline = self.baseline(project, mode, state)
                self.assertEqual(sorted(baseline.result.failing),
                                 ["test_calc.CalcTest.test_add", "test_calc.CalcTest.test_mul"])
                self.assertNotIn("planted.pyc", os.listdir(baseline.master))
                self.assertEqual(baseline.trusted_master(), baseline.master)
                # nothing golem runs before the suite writes bytecode into the workspace
                self.assertFalse(os.path.exists(os.path.join(project.root, "src",
                                                             "__pycache__")))
                if mode != "none":      # unconfined, the plant is seen and the cache begun again
                    self.assertEqual(len(_found(baseline.master, "case")), 1)

    @unittest.skipUnless("bwrap" in SANDBOXES, "bubblewrap cannot run here")
    def test_a_sealed_run_never_trusts_a_cache_an_unconfined_run_could_write(self):
        # an unconfined run's code can write the cache golem keeps between runs, and the
        # record of it beside it: a sealed run makes its own
        project = devenv.make(self.tmp, "src-pth")
        state = os.path.join(self.tmp, "state")
        kept = self.baseline(project, "none", state).master
        tests = os.path.join(project.root, "tests", "test_calc.py")
        with open(tests, "rb") as handle:
            source = handle.read()
        passing = (b"import unittest\nclass CalcTest(unittest.TestCase):\n"
                   b"    def test_add(self): pass\n    def test_mul(self): pass\n"
                   b"    def test_zero(self): pass\n")
        from importlib import _bootstrap_external as external
        planted = os.path.join(bytecode.code_dir(kept, TAG),
                               hashlib.sha256(source).hexdigest() + ".pyc")
        self.assertTrue(os.path.isfile(planted))
        with open(planted, "wb") as handle:
            handle.write(external._code_to_hash_pyc(compile(passing, tests, "exec"),
                                                    importlib.util.source_hash(source), True))
        with open(kept + ".state", "w") as handle:
            handle.write(json.dumps(cache_state(kept)))
        baseline = self.baseline(project, "bwrap", state)
        self.assertEqual(sorted(baseline.result.failing),
                         ["test_calc.CalcTest.test_add", "test_calc.CalcTest.test_mul"])
        self.assertFalse(baseline.master.startswith(state + os.sep), baseline.master)


# an existing test module that sorts before test_calc and imports the package
EARLIER = {"tests/test_a.py": "import unittest\n\nimport calc\n\n\n"
                              "class ATest(unittest.TestCase):\n"
                              "    def test_import(self):\n"
                              "        self.assertTrue(calc.add)\n"}

# imported by test_a during golem's verification: passing bytecode for test_calc, with the
# real source's hash, written through the view's link into golem's cache, or in place of
# the view's link
POISON = """

VIEW = {view}


def _poison():
    import importlib.util, os
    from importlib import _bootstrap_external as external
    tests = os.path.join(os.getcwd(), "tests", "test_calc.py")
    if "golem-verify" not in os.getcwd() or not os.path.isfile(tests):
        return
    with open(tests, "rb") as handle:
        source = handle.read()
    fake = (b"import unittest\\nclass CalcTest(unittest.TestCase):\\n"
            b"    def test_add(self): pass\\n    def test_mul(self): pass\\n"
            b"    def test_zero(self): pass\\n")
    data = external._code_to_hash_pyc(compile(fake, tests, "exec"),
                                      importlib.util.source_hash(source), True)
    cached = importlib.util.cache_from_source(tests)
    try:
        if VIEW:
            with open(cached + ".x", "wb") as handle:
                handle.write(data)
            os.replace(cached + ".x", cached)
        else:
            with open(os.path.realpath(cached), "wb") as handle:
                handle.write(data)
    except OSError:
        pass


_poison()
"""


class GradedCacheTest(GolemCase):
    """Code under test that rewrites, during golem's own verification, the bytecode a later
    test module is read from: refused read-only under bubblewrap; unconfined, the change is
    seen after the run, which then is not evidence."""

    def test_bytecode_changed_during_the_verification_is_no_evidence(self):
        for mode in SANDBOXES:
            for view in (False, True):
                with self.subTest(sandbox=mode, view=view):
                    trace = os.path.join(self.tmp, f"trace-{mode}-{view}.jsonl")
                    project = devenv.make(self.tmp, "src-pth", name=f"poison-{mode}-{view}",
                                          extra=EARLIER)
                    server = self.serve([
                        chat(tool_calls=[("write_file", {
                            "path": project.core,
                            "content": devenv.BUGGY_CORE + POISON.format(view=view)})]),
                        chat("fixed add and mul")])
                    code, out, err = run_cli(
                        ["fix", "-dir", project.root, "-provider", "openai", "-base-url",
                         server.url, "-sandbox", mode, "-trace", trace, "-json"],
                        project.env(False))
                    report = last_json(out) if out.strip() else {}
                    self.assertNotEqual(report.get("verdict"), "VERIFIED", out + err)
                    after = next(e for e in read_trace(trace) if e["event"] == "verification")
                    if mode == "none":
                        self.assertIn("changed golem's bytecode cache", str(after), after)
                    else:
                        self.assertEqual(after["counts"], {"failed": 2, "passed": 2}, after)


PLANT = """

def _plant():
    import importlib.util, os
    from importlib import _bootstrap_external as external
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tests = os.path.join(root, "tests", "test_calc.py")
    cached = importlib.util.cache_from_source(tests)
    with open(tests, "rb") as handle:
        source = handle.read()
    fake = (b"import unittest\\nclass CalcTest(unittest.TestCase):\\n"
            b"    def test_add(self): pass\\n    def test_mul(self): pass\\n"
            b"    def test_zero(self): pass\\n")
    data = external._code_to_hash_pyc(compile(fake, tests, "exec"),
                                      importlib.util.source_hash(source), True)
    try:
        with open(os.path.realpath(cached), "wb") as handle:
            handle.write(data)
    except OSError:
        pass


_plant()
"""


PYTEST_TESTS = """\
from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_runs_from_its_own_file():
    assert test_runs_from_its_own_file.__code__.co_filename == __file__
"""


@needs_pytest
class RewrittenTest(GolemCase):
    """pytest's assertion rewriting of the test modules, made once after the baseline by
    golem's compiler with pytest's own rewriter and taken by every later graded run for a
    source of the same content, as a developer's second run takes pytest's cache."""

    def test_the_runs_after_the_baseline_take_golem_s_rewriting(self):
        for mode in SANDBOXES:
            with self.subTest(sandbox=mode):
                self.rewritten_once(mode)

    def rewritten_once(self, mode: str) -> None:
        project = devenv.make(self.tmp, "src-pth", name=f"rewritten-{mode}", extra={
            "tests/test_calc.py": PYTEST_TESTS, "tests/conftest.py": "import pytest\n"})
        home = os.path.join(self.tmp, f"home-{mode}")
        os.makedirs(home)
        env = command_env(home, home)
        argv = [project.python, "-m", "pytest", "-p", "no:cacheprovider", *QUICK.split()]
        baseline = run_baseline(Environment(mode, env, Trace(), 120.0),
                                TestCommand(argv, "pytest", "-test"), project.root)
        self.addCleanup(baseline.phase.close)
        self.assertEqual(sorted(baseline.result.failing),
                         ["tests/test_calc.py::test_add", "tests/test_calc.py::test_mul"])
        tests = os.path.join(project.root, "tests")
        self.assertEqual(sorted(map(os.path.basename, baseline.result.rewritten)),
                         ["conftest.py", "test_calc.py"])
        kept = os.path.join(baseline.master, bytecode.REWRITTEN, TAG)
        keys = {name.split("-")[0] for name in os.listdir(kept)}
        for name in ("conftest.py", "test_calc.py"):
            with open(os.path.join(tests, name), "rb") as handle:
                self.assertIn(hashlib.sha256(handle.read()).hexdigest(), keys)

        # a graded run of a copy elsewhere, as golem's verification makes one
        copy = os.path.join(self.tmp, f"copy-{mode}")
        shutil.copytree(project.root, copy, symlinks=True,
                        ignore=shutil.ignore_patterns(".venv", ".git"))
        os.symlink(project.venv, os.path.join(copy, ".venv"))

        def graded():
            run = baseline.phase.run()
            run.pycache = baseline.phase.view(baseline.master, TAG, copy) or baseline.master
            return run_suite(baseline.plan, cwd=copy, env=env, run=run,
                             helpers=baseline.phase.helpers(), timeout=120)

        result = graded()
        self.assertEqual(result.rewritten, [])      # nothing rewritten in the run itself
        self.assertEqual(sorted(result.failing), sorted(baseline.result.failing))
        # the code ran from the copy's file, and its assertions are rewritten
        self.assertEqual(result.tests["tests/test_calc.py::test_runs_from_its_own_file"],
                         "passed", result.output)
        self.assertIn("where -1 = add(2, 3)", result.output)
        self.assertIsNone(result.problem, result.problem)

        # a test module that changed is rewritten by pytest itself, as it is
        with open(os.path.join(copy, "tests", "test_calc.py"), "a") as handle:
            handle.write("\n\ndef test_new():\n    assert add(0, 0) == 0\n")
        result = graded()
        self.assertEqual(result.rewritten, [os.path.join(copy, "tests", "test_calc.py")])
        self.assertEqual(result.tests["tests/test_calc.py::test_new"], "passed")
        self.assertEqual(len(result.failing), 2, result.tests)


if __name__ == "__main__":
    unittest.main()
