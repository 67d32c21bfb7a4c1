"""The verification copy (golem/workflow/verifier/rebuild.py): golem grades a tree it
rebuilt from the snapshot plus only the allowed changes, never the workspace itself."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest

from golem.tools import sandbox
from golem.tools.process import command_env, run
from golem.workflow.verifier import rebuild
from golem.workflow.verifier.protect import Facts, protected_changes
from golem.workflow.verifier.snapshot import (MAX_COPY, Snapshot, compare, fingerprint, manifest,
                                              manifest_changes)
from golem.workflow.verifier.suite import SuiteResult
from golem.workflow.verifier.grade import judge
from golem.workflow.verifier.interpreter import locate
from tests.fixtures import (BUGGY, BUGGY_CALC, CALC_TESTS, FIX_EDIT, TEST_CMD, GolemCase, git,
                            last_json, make_repo, read, read_trace, run_cli, write_files)
from tests.provider_server import chat
from tests.test_security import bwrap_or_skip

# A "fix" that only works together with an edit to the test file (a protected change).
ZERO_IS_ONE = "def add(a, b):\n    return 1 if (a, b) == (0, 0) else a + b\n"
TESTS_EXPECT_ONE = CALC_TESTS.replace("self.assertEqual(add(0, 0), 0)",
                                      "self.assertEqual(add(0, 0), 1)")
HELPER = "def plus(a, b):\n    return a + b\n"
CALC_WITH_HELPER = "from calc_helpers import plus\n\n\ndef add(a, b):\n    return plus(a, b)\n"
HELPER_TEST = """\
import unittest

from calc_helpers import plus


class HelperTest(unittest.TestCase):
    def test_plus(self):
        self.assertEqual(plus(-1, -2), -3)
"""
# calc misbehaves while a marker file exists: deleting it (an allowed change) is the fix
LEGACY_CALC = """\
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def add(a, b):
    if os.path.exists(os.path.join(_HERE, "legacy_mode.txt")):
        return a - b
    return a + b
"""
# the test imports calc in a child Python with a plain environment, which reads bytecode
# from the workspace's __pycache__
SUBPROCESS_TEST = """\
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class AddTest(unittest.TestCase):
    def test_add(self):
        done = subprocess.run([sys.executable, "-c", "import calc; print(calc.add(2, 3))"],
                              cwd=ROOT, env={"PATH": os.environ.get("PATH", "")},
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.stdout.strip(), "5", done.stderr)
"""
# bytecode compiled from a fixed calc.py, with the buggy file's size and mtime, planted where
# the child Python above looks for it
FORGE_PYC = """\
import os, py_compile, sys, tempfile
st = os.stat("calc.py")
fake = os.path.join(tempfile.mkdtemp(), "calc.py")
with open(fake, "w") as handle:
    handle.write("def add(a, b):\\n    return a + b\\n")
os.utime(fake, ns=(st.st_atime_ns, st.st_mtime_ns))
os.makedirs("__pycache__", exist_ok=True)
py_compile.compile(fake, cfile=os.path.join("__pycache__",
                   "calc." + sys.implementation.cache_tag + ".pyc"), dfile="calc.py",
                   doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
"""
# the copy reaches the repository's `.git` (version lookups read it), but cannot change it
GIT_TEST = """\
import os
import unittest

GIT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".git")


class GitTest(unittest.TestCase):
    def test_git_is_readable_not_writable(self):
        with open(os.path.join(GIT, "HEAD")) as handle:
            self.assertTrue(handle.read().startswith("ref: "))
        with self.assertRaises(OSError):
            open(os.path.join(GIT, "planted"), "w").close()
"""
VENV_CALC = "from fastmath import plus\n\n\ndef add(a, b):\n    return plus(a, -b)\n"


def make_venv(root: str) -> str:
    """A real virtual environment in `root/.venv` holding a module `fastmath`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(root, ".venv")],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([os.path.join(root, ".venv", "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60)
    site = done.stdout.strip()
    with open(os.path.join(site, "fastmath.py"), "w", encoding="utf-8") as handle:
        handle.write(HELPER)
    return site


class RebuildTest(unittest.TestCase):
    """The copy itself: what goes in, what stays out."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="golem-rebuild-")
        self.addCleanup(tmp.cleanup)
        self.base = os.path.realpath(tmp.name)
        self.ws = os.path.join(self.base, "ws")
        os.mkdir(self.ws)

    def put(self, rel: str, data: str | bytes) -> None:
        full = os.path.join(self.ws, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)

    def build(self, change, protected: set[str] = frozenset(),
              git: bool = False) -> rebuild.Copy:
        """Snapshot, `change()`, then rebuild the way `golem fix` does: the snapshot's
        dependency trees (and `.git` when `git`) linked in, `protected` left out."""
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        self.snap = snap
        change()
        changes = compare(snap.entries, fingerprint(self.ws, deps=snap.deps).entries)
        self.builds = getattr(self, "builds", 0) + 1
        scratch = os.path.join(self.base, f"scratch{self.builds}")
        os.mkdir(scratch)
        trees = snap.deps + ([".git"] if git else [])
        return rebuild.from_snapshot(snap, self.ws, os.path.join(scratch, "ws"), changes,
                                     set(protected), trees)

    def tree(self, root: str) -> dict[str, str]:
        found = {}
        for top, dirs, files in os.walk(root):
            for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
                full = os.path.join(top, name)
                rel = os.path.relpath(full, root)
                found[rel] = ("-> " + os.readlink(full)) if os.path.islink(full) else \
                    read(full)
        return found

    def test_originals_plus_allowed_changes_only(self):
        self.put("calc.py", "old\n")
        self.put("tests/test_calc.py", "original test\n")
        self.put("gone.py", "deleted by the run\n")
        self.put("docs/keep.txt", "kept\n")
        os.symlink(os.path.join(self.ws, "calc.py"), os.path.join(self.ws, "abs-link"))
        os.symlink("calc.py", os.path.join(self.ws, "rel-link"))
        os.makedirs(os.path.join(self.ws, "empty"))

        def change():
            self.put("calc.py", "new\n")
            self.put("tests/test_calc.py", "tampered test\n")
            self.put("conftest.py", "planted\n")
            self.put("helper.py", "added\n")
            self.put("tests/test_new.py", "new test\n")
            self.put("stale.pyc", b"\0forged")
            self.put("__pycache__/calc.cpython-311.pyc", b"\0forged")
            os.unlink(os.path.join(self.ws, "gone.py"))

        copy = self.build(change, {"tests/test_calc.py", "conftest.py"})
        self.assertEqual(copy.root, os.path.join(self.base, "scratch1", "ws"))
        self.assertEqual(self.tree(copy.root), {
            "calc.py": "new\n", "helper.py": "added\n", "tests/test_calc.py": "original test\n",
            "tests/test_new.py": "new test\n", "docs/keep.txt": "kept\n",
            "abs-link": "-> " + os.path.join(copy.root, "calc.py"), "rel-link": "-> calc.py"})
        self.assertTrue(os.path.isdir(os.path.join(copy.root, "empty")))
        self.assertEqual(copy.left_out, ["conftest.py", "tests/test_calc.py"])
        self.assertEqual(copy.applied, ["calc.py", "gone.py", "helper.py", "tests/test_new.py"])
        self.assertEqual(copy.compiled, ["stale.pyc"])
        self.assertEqual(copy.problems, [])
        self.assertIn("2 change(s) left out", copy.describe())
        self.assertIn("1 compiled file(s) left out", copy.describe())

    def test_compiled_code_from_the_run_and_caches_never_reach_the_copy(self):
        self.put("pkg/mod.py", "X = 1\n")
        self.put("pkg/mod.pyc", b"\0before the run")
        self.put("pkg/fast.so", b"\0before the run")
        self.put("pkg/old.pyc", b"\0before the run")
        self.put(".pytest_cache/v/cache/lastfailed", "{}")
        self.put("sub/.mypy_cache/x.json", "{}")

        def change():
            self.put("pkg/__pycache__/mod.cpython-311.pyc", b"\0forged")
            self.put("pkg/other.pyo", b"\0forged")
            self.put("pkg/native.cpython-311-x86_64-linux-gnu.so", b"\0forged")
            self.put("pkg/libx.so.1", b"\0forged")
            self.put("pkg/fast.so", b"\0forged")
            os.unlink(os.path.join(self.ws, "pkg", "old.pyc"))

        copy = self.build(change)
        # what the workspace held before the run is trusted; compiled code the run added or
        # changed is not (its source is all that counts), and a deletion stays a deletion
        self.assertEqual(self.tree(copy.root), {"pkg/mod.py": "X = 1\n",
                                                "pkg/mod.pyc": "\0before the run",
                                                "pkg/fast.so": "\0before the run"})
        self.assertEqual(copy.compiled, ["pkg/fast.so", "pkg/libx.so.1",
                                         "pkg/native.cpython-311-x86_64-linux-gnu.so",
                                         "pkg/other.pyo"])
        self.assertEqual(copy.applied, ["pkg/old.pyc"])
        self.assertFalse(rebuild.compiled("pkg/mod.py"))

    def test_nothing_is_written_through_a_link_the_run_put_in_place_of_a_directory(self):
        outside = os.path.join(self.base, "outside")
        os.makedirs(os.path.join(outside, "tree"))
        self.put("tests/test_a.py", "original test\n")
        os.symlink(os.path.join(outside, "tree"), os.path.join(self.ws, "shared"))

        def change():
            os.unlink(os.path.join(self.ws, "tests", "test_a.py"))
            os.rmdir(os.path.join(self.ws, "tests"))
            os.symlink(outside, os.path.join(self.ws, "tests"))

        copy = self.build(change, {"tests/test_a.py"})
        self.assertEqual(os.listdir(outside), ["tree"])
        self.assertFalse(os.path.islink(os.path.join(copy.root, "tests")))
        self.assertEqual(read(os.path.join(copy.root, "tests", "test_a.py")), "original test\n")
        # a directory link that was there before the run is kept as a link
        self.assertEqual(os.readlink(os.path.join(copy.root, "shared")),
                         os.path.join(outside, "tree"))
        # the link in place of tests/ is an allowed change that cannot be applied without
        # dropping the original test file: said, so the verdict cannot be VERIFIED
        self.assertEqual(len(copy.problems), 1, copy.problems)
        self.assertIn("tests: the run put something else in place of a directory",
                      copy.problems[0])

    def test_a_file_too_large_to_keep_is_taken_only_while_unchanged(self):
        big = b"x" * (MAX_COPY + 1)
        self.put("data/big.bin", big)
        self.put("calc.py", "old\n")
        copy = self.build(lambda: self.put("calc.py", "new\n"))
        self.assertEqual(copy.problems, [])
        with open(os.path.join(copy.root, "data", "big.bin"), "rb") as handle:
            self.assertEqual(handle.read(), big)

        os.rename(os.path.join(self.base, "run"), os.path.join(self.base, "run-1"))
        copy = self.build(lambda: self.put("data/big.bin", b"y" + big[1:]),
                          {"data/big.bin"})
        self.assertEqual(len(copy.problems), 1)
        self.assertIn("data/big.bin is too large to have been kept", copy.problems[0])
        self.assertFalse(os.path.exists(os.path.join(copy.root, "data", "big.bin")))

    def test_top_level_dependency_trees_and_git_are_linked_from_the_workspace(self):
        self.put(".venv/lib/site/dep.py", "DEP = 1\n")
        self.put("env/pyvenv.cfg", "home = /usr/bin\n")      # a venv by its pyvenv.cfg
        self.put("env/lib/mod.py", "M = 1\n")
        self.put("web/node_modules/left-pad/index.js", "module.exports = 1\n")
        self.put("web/app.js", "require('left-pad')\n")
        self.put(".git/HEAD", "ref: refs/heads/main\n")
        copy = self.build(lambda: None, git=True)
        self.assertEqual(self.snap.deps, [".venv", "env"])
        self.assertEqual(copy.linked, [".venv", "env", ".git"])
        for rel in copy.linked:
            self.assertEqual(os.readlink(os.path.join(copy.root, rel)), os.path.join(self.ws, rel))
        self.assertEqual(copy.read_only, tuple(os.path.join(self.ws, rel) for rel in copy.linked))
        with open(os.path.join(copy.root, ".venv", "lib", "site", "dep.py")) as handle:
            self.assertEqual(handle.read(), "DEP = 1\n")
        # below the top, node_modules is project content like any other: copied, not linked
        nested = os.path.join(copy.root, "web", "node_modules", "left-pad")
        self.assertFalse(os.path.islink(os.path.dirname(nested)))
        self.assertEqual(read(os.path.join(nested, "index.js")), "module.exports = 1\n")
        self.assertIn("web/node_modules/left-pad/index.js", self.snap.entries)
        self.assertFalse(any(p.startswith((".venv/", "env/", ".git/")) for p in self.snap.entries))

    def test_a_dependency_tree_the_run_replaced_is_not_linked(self):
        self.put("node_modules/dep/index.js", "module.exports = 1\n")
        self.put("app.js", "require('dep')\n")
        outside = os.path.join(self.base, "outside")
        os.mkdir(outside)
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        self.assertEqual(snap.deps, ["node_modules"])
        os.rename(os.path.join(self.ws, "node_modules"), os.path.join(outside, "nm"))
        os.symlink(os.path.join(outside, "nm"), os.path.join(self.ws, "node_modules"))
        # the manifest tells (the fingerprint never looks inside a dependency tree) ...
        changed = manifest_changes(snap.manifest, manifest(self.ws, snap.deps))
        self.assertEqual(list(changed), ["node_modules"])
        changes = compare(snap.entries, fingerprint(self.ws, deps=snap.deps).entries)
        self.assertEqual(changes.added, ["node_modules"])
        # ... the changed tree is protected, and the copy links no tree in its place
        facts = Facts(test_argv=["node", "--test"], before=set(snap.entries),
                      trees_changed=changed)
        held = {p for p, _ in protected_changes(changes, facts)}
        self.assertEqual(held, {"node_modules"})
        os.mkdir(os.path.join(self.base, "scratch"))
        copy = rebuild.from_snapshot(snap, self.ws, os.path.join(self.base, "scratch", "ws"),
                                     changes, held, snap.deps)
        self.assertEqual(copy.linked, [])
        self.assertEqual(copy.problems,
                         ["node_modules is no longer a real directory in the workspace"])
        self.assertFalse(os.path.lexists(os.path.join(copy.root, "node_modules")))
        self.assertEqual(self.tree(copy.root), {"app.js": "require('dep')\n"})

    def test_the_manifest_sees_every_change_inside_a_dependency_tree(self):
        self.put(".venv/pyvenv.cfg", "home = /usr/bin\n")
        self.put(".venv/lib/site/dep.py", "DEP = 1\n")
        self.put(".git/HEAD", "ref: refs/heads/main\n")
        self.put(".git/refs/heads/main", "0" * 40 + "\n")
        self.put(".git/objects/ab/cdef", b"\0")
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        self.assertEqual(snap.deps, [".venv"])
        self.assertIn(".venv/lib/site/dep.py", snap.manifest)
        self.assertIn(".git/refs/heads/main", snap.manifest)

        def changed() -> dict[str, str]:
            return manifest_changes(snap.manifest, manifest(self.ws, snap.deps))

        self.assertEqual(changed(), {})
        self.put(".git/objects/12/3456", b"\0")    # git objects are not what lookups read
        self.assertEqual(changed(), {})
        # (the first difference is named: the new entry, or its directory's new times)
        self.put(".venv/lib/site/planted.pth", "import os\n")
        self.assertEqual(list(changed()), [".venv"])
        self.assertIn(changed()[".venv"], ("added .venv/lib/site/planted.pth",
                                           "changed .venv/lib/site"))
        os.unlink(os.path.join(self.ws, ".venv", "lib", "site", "planted.pth"))
        self.assertEqual(list(changed()), [".venv"])
        snap.manifest = manifest(self.ws, snap.deps)
        self.assertEqual(changed(), {})
        os.chmod(os.path.join(self.ws, ".venv", "lib", "site", "dep.py"), 0o600)
        self.assertEqual(changed(), {".venv": "changed .venv/lib/site/dep.py"})
        self.put(".git/refs/heads/main", "1" * 40 + "\n")
        self.assertEqual(changed()[".git"], "changed .git/refs/heads/main")
        # none of it is a change to the workspace's own files
        self.assertEqual(compare(snap.entries,
                                 fingerprint(self.ws, deps=snap.deps).entries).all, [])

    def test_bytecode_inside_a_dependency_tree_is_no_change_but_a_tool_cache_is(self):
        # snapshot.MANIFEST_SKIP: bytecode is read only from golem's own cache, so a .pyc
        # written into a tree's __pycache__ is no change; anything else is, a tool cache
        # in node_modules included (a babel cache holds transformed code)
        self.put(".venv/pyvenv.cfg", "home = /usr/bin\n")
        self.put(".venv/lib/site/dep.py", "DEP = 1\n")
        os.makedirs(os.path.join(self.ws, ".venv", "lib", "site", "__pycache__"))
        self.put("node_modules/dep/index.js", "module.exports = 1\n")
        os.makedirs(os.path.join(self.ws, "node_modules", ".cache"))
        os.utime(os.path.join(self.ws, ".venv/lib/site/__pycache__"),
                 (1_000_000_000, 1_000_000_000))
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        self.assertEqual(snap.deps, [".venv", "node_modules"])
        self.put(".venv/lib/site/__pycache__/dep.cpython-311.pyc", b"\0")
        self.assertEqual(manifest_changes(snap.manifest, manifest(self.ws, snap.deps)), {})
        self.put("node_modules/.cache/babel/x.json", "{}")
        self.assertEqual(list(manifest_changes(snap.manifest, manifest(self.ws, snap.deps))),
                         ["node_modules"])

    def test_under_bubblewrap_a_linked_tree_is_readable_but_not_writable(self):
        bwrap_or_skip(self)
        self.put(".venv/lib/dep.py", "DEP = 1\n")
        copy = self.build(lambda: None)
        self.assertEqual(copy.linked, [".venv"])
        scratch = os.path.join(self.base, "scratch1")
        env = command_env(scratch, scratch)
        interp = locate(sys.executable, env, self.ws)
        wrap, _ = sandbox.wrapper("bwrap", copy.root, scratch, env.get("PATH"),
                                  read_only=copy.read_only, tools=interp.roots)
        probe = ("import errno\nprint(open('.venv/lib/dep.py').read().strip())\n"
                 "try:\n    open('.venv/lib/planted.py', 'w')\n"
                 "except OSError as exc:\n    print(errno.errorcode[exc.errno])\n")
        done = run([interp.executable, "-c", probe], cwd=copy.root, timeout=60, wrap=wrap,
                   env=env)
        self.assertEqual(done.output.split(), ["DEP", "=", "1", "EROFS"], done.output)
        self.assertFalse(os.path.exists(os.path.join(self.ws, ".venv", "lib", "planted.py")))


class GradeTest(unittest.TestCase):
    def result(self, tests, exit_code):
        return SuiteResult(exit_code, False, "", 0.1, "unittest-json", tests)

    def test_a_failing_test_now_expected_to_fail_is_not_fixed(self):
        before = self.result({"t.a": "failed", "t.b": "passed"}, 1)
        verdict = judge(before, self.result({"t.a": "xfail", "t.b": "passed"}, 0), [])
        self.assertEqual(verdict.name, "FAILED")
        self.assertEqual(verdict.still_failing, ["t.a"])
        self.assertEqual(verdict.fixed, [])


class FixInCopyTest(GolemCase):
    """`golem fix`: the verdict's evidence comes from the rebuilt copy."""

    def run_fix(self, files, calls, *extra, test: str = TEST_CMD, sandbox: str = "none"):
        repo = make_repo(self.tmp, files)
        server = self.serve([chat(tool_calls=calls), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test", test, "-provider", "openai",
                                  "-base-url", server.url, "-sandbox", sandbox, "-trace",
                                  self.trace, "-json", *extra])
        return repo, code, last_json(out)

    def test_a_protected_test_edit_never_reaches_the_evidence(self):
        repo, code, report = self.run_fix(BUGGY, [
            ("write_file", {"path": "calc.py", "content": ZERO_IS_ONE}),
            ("write_file", {"path": "tests/test_calc.py", "content": TESTS_EXPECT_ONE})])
        self.assertEqual((report["verdict"], code), ("REJECTED", 3), report["summary"])
        self.assertEqual(report["verified_in"], "copy")
        # in the workspace the edited tests pass; the copy ran the original test file
        self.assertEqual(read(os.path.join(repo, "tests", "test_calc.py")), TESTS_EXPECT_ONE)
        self.assertFalse(report["tests"]["after"]["passed"])
        self.assertEqual(report["newly_failing"], ["test_calc.AddTest.test_zero"])
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])
        [note] = [e for e in read_trace(self.trace) if e["event"] == "note"
                  and e["message"].startswith("verification copy rebuilt")]
        self.assertEqual(note["left_out"], ["tests/test_calc.py"])
        self.assertEqual(note["applied"], ["calc.py"])
        [verification] = [e for e in read_trace(self.trace) if e["event"] == "verification"]
        self.assertEqual(verification["verified_in"], "copy")

    def test_a_new_helper_module_and_a_new_test_file_are_verified_in_the_copy(self):
        repo, code, report = self.run_fix(BUGGY, [
            ("write_file", {"path": "calc_helpers.py", "content": HELPER}),
            ("write_file", {"path": "calc.py", "content": CALC_WITH_HELPER}),
            ("write_file", {"path": "tests/test_helpers.py", "content": HELPER_TEST})])
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["verified_in"], "copy")
        self.assertEqual(report["flaky"], [])
        # the new test file is held out of the first pass and runs in a second one
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 2})
        self.assertEqual(report["new_tests"], ["tests/test_helpers.py"])
        self.assertEqual(report["new_test_results"],
                         {"test_helpers.HelperTest.test_plus": "passed"})
        self.assertIn("1 new test(s) pass", report["summary"])

    def test_a_new_test_file_that_fails_fails_the_verdict(self):
        failing_test = HELPER_TEST.replace("plus(-1, -2), -3", "plus(1, 1), 3")
        repo, code, report = self.run_fix(BUGGY, [
            FIX_EDIT, ("write_file", {"path": "tests/test_helpers.py", "content": failing_test}),
            ("write_file", {"path": "calc_helpers.py", "content": HELPER})])
        self.assertEqual((report["verdict"], code), ("FAILED", 1), report["summary"])
        # the first pass (the original tests) is green; the new file's own pass is not
        self.assertTrue(report["tests"]["after"]["passed"])
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])
        self.assertEqual(report["new_test_results"],
                         {"test_helpers.HelperTest.test_plus": "failed"})
        self.assertIn("1 new test(s) fail: test_helpers.HelperTest.test_plus", report["summary"])

    def test_forged_bytecode_in_the_workspace_is_not_used(self):
        files = {"calc.py": BUGGY_CALC, "tests/test_calc.py": SUBPROCESS_TEST}
        repo, code, report = self.run_fix(files, [
            ("run_command", {"argv": ["python3", "-c", FORGE_PYC]})], "-allow", "python3")
        planted = f"__pycache__/calc.{sys.implementation.cache_tag}.pyc"
        self.assertTrue(os.path.exists(os.path.join(repo, *planted.split("/"))))
        # never used by the graded run (still failing there), and named as what it is
        self.assertEqual(report["changed_files"], [planted])
        self.assertEqual((report["verdict"], code), ("REJECTED", 3), report["summary"])
        self.assertEqual(report["still_failing"], ["test_calc.AddTest.test_add"])
        self.assertIn("compiled bytecode", report["protected_changes"][0]["reason"])

    def test_an_allowed_deletion_is_a_deletion_in_the_copy(self):
        files = {"calc.py": LEGACY_CALC, "legacy_mode.txt": "on\n",
                 "tests/test_calc.py": CALC_TESTS}
        repo, code, report = self.run_fix(files, [
            ("run_command", {"argv": ["rm", "legacy_mode.txt"]})], "-allow", "rm")
        self.assertEqual(report["changed_files"], ["legacy_mode.txt"])
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])

    def venv_project(self, sandbox: str):
        files = {"calc.py": VENV_CALC, "tests/test_calc.py": CALC_TESTS}
        repo = make_repo(self.tmp, files)
        make_venv(repo)
        server = self.serve([chat(tool_calls=[
            ("edit_file", {"path": "calc.py", "old_string": "plus(a, -b)",
                           "new_string": "plus(a, b)"})]), chat("fixed")])
        code, out, err = run_cli(["fix", "-dir", repo, "-test",
                                  ".venv/bin/python -m unittest discover -s tests",
                                  "-provider", "openai", "-base-url", server.url,
                                  "-sandbox", sandbox, "-trace", self.trace, "-json"])
        report = last_json(out)
        self.assertEqual(report["tests"]["before"]["failing"], ["test_calc.AddTest.test_add"])
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"] + err)
        [note] = [e for e in read_trace(self.trace) if e["event"] == "note"
                  and e["message"].startswith("verification copy rebuilt")]
        self.assertEqual(note["linked"], [".venv"])

    def test_a_virtual_environment_in_the_workspace_serves_the_copy(self):
        self.venv_project("none")

    def test_a_virtual_environment_in_the_workspace_serves_the_copy_under_bubblewrap(self):
        bwrap_or_skip(self)
        self.venv_project("bwrap")


class VerifyInCopyTest(GolemCase):
    """`golem verify -base REV`: the re-run happens in an export of REV plus allowed changes."""

    def verify(self, repo: str, *extra: str, base: str = "HEAD") -> tuple[int, dict]:
        code, out, err = run_cli(["verify", "-dir", repo, "-base", base, "-test", TEST_CMD,
                                  "-sandbox", "none", "-json", *extra])
        self.assertIn(code, (0, 1, 3), err)
        return code, last_json(out)

    def test_a_protected_test_edit_never_reaches_the_evidence(self):
        repo = make_repo(self.tmp, git_repo=True)
        write_files(repo, {"calc.py": ZERO_IS_ONE, "tests/test_calc.py": TESTS_EXPECT_ONE})
        code, report = self.verify(repo)
        self.assertEqual((report["verdict"], code), ("REJECTED", 3), report["summary"])
        self.assertEqual(report["verified_in"], "copy")
        self.assertFalse(report["tests"]["after"]["passed"])
        self.assertEqual(report["newly_failing"], ["test_calc.AddTest.test_zero"])

    def test_allowed_changes_commits_and_deletions_are_verified_in_the_copy(self):
        repo = make_repo(self.tmp, {"calc.py": LEGACY_CALC, "legacy_mode.txt": "on\n",
                                    "tests/test_calc.py": CALC_TESTS}, git_repo=True)
        write_files(repo, {"calc_helpers.py": HELPER, "tests/test_helpers.py": HELPER_TEST})
        git(repo, "add", "calc_helpers.py")
        git(repo, "commit", "-q", "-m", "helper")
        git(repo, "rm", "-q", "legacy_mode.txt")
        code, report = self.verify(repo, base="HEAD~1")
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"])
        self.assertEqual(report["verified_in"], "copy")
        # the first pass holds out the new test file; the second runs it
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 2})
        self.assertEqual(report["new_tests"], ["tests/test_helpers.py"])
        self.assertEqual(report["new_test_results"],
                         {"test_helpers.HelperTest.test_plus": "passed"})
        self.assertEqual(report["changed_files"], ["calc_helpers.py", "legacy_mode.txt",
                                                   "tests/test_helpers.py"])

    def test_under_bubblewrap_the_copy_runs_with_the_repository_read_only(self):
        bwrap_or_skip(self)
        repo = make_repo(self.tmp, git_repo=True)
        write_files(repo, {"calc.py": BUGGY_CALC.replace("a - b", "a + b"),
                           "tests/test_git.py": GIT_TEST})
        code, out, err = run_cli(["verify", "-dir", repo, "-base", "HEAD", "-test", TEST_CMD,
                                  "-sandbox", "bwrap", "-json"])
        report = last_json(out)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"] + err)
        # test_git.py is a new test file: it runs (and must pass) in the second pass
        self.assertEqual(report["tests"]["after"]["counts"], {"passed": 2})
        self.assertEqual(report["new_test_results"],
                         {"test_git.GitTest.test_git_is_readable_not_writable": "passed"})

    def test_a_git_ignored_virtual_environment_serves_the_baseline_and_the_copy(self):
        repo = make_repo(self.tmp, {"calc.py": VENV_CALC, "tests/test_calc.py": CALC_TESTS,
                                    ".gitignore": ".venv/\n"}, git_repo=True)
        make_venv(repo)
        write_files(repo, {"calc.py": VENV_CALC.replace("plus(a, -b)", "plus(a, b)")})
        code, out, err = run_cli(["verify", "-dir", repo, "-base", "HEAD", "-test",
                                  ".venv/bin/python -m unittest discover -s tests",
                                  "-sandbox", "none", "-json"])
        report = last_json(out)
        self.assertEqual((report["verdict"], code), ("VERIFIED", 0), report["summary"] + err)
        self.assertEqual(report["fixed"], ["test_calc.AddTest.test_add"])
        self.assertEqual(report["changed_files"], ["calc.py"])



class SharedDataTest(unittest.TestCase):
    """Where the file system has reflinks, the store and every copy share the snapshot's
    data instead of writing it (simulated here: this machine's file system has none, so a
    clone is a copy made by the stand-in); a kept copy missing from the store is a problem
    of the copy, never an empty file."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.base = os.path.realpath(tmp.name)
        self.ws = os.path.join(self.base, "ws")
        files = {"calc.py": b"def add(a, b):\n    return a - b\n", "data/blob.bin": bytes(range(256)) * 64,
                 "empty.txt": b""}
        for rel, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(self.ws, rel)), exist_ok=True)
            with open(os.path.join(self.ws, rel), "wb") as handle:
                handle.write(data)
        self.files = files

    def test_clones_where_the_file_system_can(self):
        from golem.tools import tree
        cloned = []

        def clone(dst, src):        # what FICLONE does, observably: dst gets src's bytes
            data = os.pread(src, 1 << 20, 0)
            os.pwrite(dst, data, 0)
            cloned.append(len(data))
        saved = tree._FICLONE
        tree._FICLONE = clone
        self.addCleanup(setattr, tree, "_FICLONE", saved)
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        self.assertEqual(len(cloned), 3)            # into the store: every file
        copy = rebuild.from_snapshot(snap, self.ws, os.path.join(self.base, "copy"),
                                     compare(snap.entries, snap.entries), set(), [])
        self.assertEqual(copy.problems, [])
        self.assertEqual(len(cloned), 5)            # into the copy: every file with data
        for rel, data in self.files.items():
            with open(os.path.join(copy.root, rel), "rb") as handle:
                self.assertEqual(handle.read(), data)

    def test_a_clone_refused_is_a_copy(self):
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        copy = rebuild.from_snapshot(snap, self.ws, os.path.join(self.base, "copy"),
                                     compare(snap.entries, snap.entries), set(), [])
        self.assertEqual(copy.problems, [])
        for rel, data in self.files.items():
            with open(os.path.join(copy.root, rel), "rb") as handle:
                self.assertEqual(handle.read(), data)

    def test_a_kept_copy_missing_from_the_store_is_a_problem(self):
        snap = Snapshot.take(self.ws, os.path.join(self.base, "run"))
        os.unlink(os.path.join(snap.store, snap.entries["calc.py"].sha))
        copy = rebuild.from_snapshot(snap, self.ws, os.path.join(self.base, "copy"),
                                     compare(snap.entries, snap.entries), set(), [])
        self.assertTrue(any("calc.py" in p for p in copy.problems), copy.problems)
        self.assertFalse(os.path.exists(os.path.join(copy.root, "calc.py")))


if __name__ == "__main__":
    unittest.main()
