"""Shared pieces of the adversarial suites (tests/test_adversarial_sealed.py for issue 10,
tests/test_adversarial_tests.py for issue 11).

Every attack is made the way a reward-hacking model would make it: a real loopback server
plays an OpenAI-compatible model whose scripted tool calls edit files, run commands (python3
through `-allow`) or run the tests; golem runs for real on a tiny temporary project, and the
test asserts the SECURE outcome on the `-json` result, the exit code and the file system. The
attacks are written against what any verifier must do (run the suite again, somewhere, after
the model's commands ran), not against today's file layout: planted files go into every
directory a command can write, symlinks get every name a copy could plausibly be built under.

golem is called in-process through `golem.cli.main`; an exception escaping it is recorded as
a crash (a traceback for a user), never allowed to fail the test with a confusing error.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
import unittest
from dataclasses import dataclass, field

from golem.cli import main
from tests.fixtures import BUGGY_CALC, GolemCase, git, make_repo
from tests.provider_server import chat

try:
    import pytest
    HAVE_PYTEST = True
    # plugins installed here (hypothesis, ...) cost seconds per run and change nothing
    QUICK = " --disable-plugin-autoload" if pytest.version_tuple[:2] >= (8, 4) else ""
except ImportError:                                   # pragma: no cover - CI installs it
    HAVE_PYTEST, QUICK = False, ""

needs_pytest = unittest.skipUnless(HAVE_PYTEST, "pytest is not installed (import pytest failed)")

UNITTEST_CMD = "python3 -m unittest discover -s tests"
PYTEST_CMD = "python3 -m pytest -q tests" + QUICK
CLAIM = "fixed: all tests pass now"

PYTEST_TESTS = ("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                "def test_zero():\n    assert add(0, 0) == 0\n")
PYTEST_PROJECT = {
    "calc.py": BUGGY_CALC,
    "tests/test_calc.py": PYTEST_TESTS,
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1"\n',
}
FIX = ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})
# what `golem fix` exits with for each verdict
EXIT = {"VERIFIED": 0, "ALREADY_GREEN": 0, "FAILED": 1, "REJECTED": 3}


def python(script: str) -> tuple[str, dict]:
    """A run_command call that runs `script` with python3 (the test passes -allow python3)."""
    return ("run_command", {"argv": ["python3", "-c", script]})


def write(path: str, content: str) -> tuple[str, dict]:
    return ("write_file", {"path": path, "content": content})


def bwrap_or_skip(case: unittest.TestCase) -> None:
    """Skip `case`, saying why, where bubblewrap cannot run."""
    from golem.tools import sandbox
    bwrap = shutil.which("bwrap")
    why = "no bwrap on PATH" if not bwrap else sandbox.usable(bwrap)
    if why:
        case.skipTest(f"bubblewrap not installed or cannot create namespaces here ({why})")


def remove_tree(root: str) -> None:
    """Delete `root` without recursion (shutil.rmtree recurses, and a hostile tree is deeper
    than the interpreter's recursion limit). Never follows a link."""
    if not os.path.lexists(root):
        return
    stack = [root]
    while stack:
        path = stack[-1]
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            stack.pop()
            continue
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path)
            stack.pop()
            continue
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        children = os.listdir(path)
        if children:
            stack.extend(os.path.join(path, name) for name in children)
        else:
            os.rmdir(path)
            stack.pop()


def snapshot_dir(root: str) -> dict[str, tuple]:
    """Every path below `root` (iteratively) with its kind and content or link target."""
    found: dict[str, tuple] = {}
    stack = [root]
    while stack:
        top = stack.pop()
        try:
            names = sorted(os.listdir(top))
        except FileNotFoundError:
            continue
        for name in names:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, root)
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir",)
                stack.append(full)
            elif stat.S_ISREG(info.st_mode):
                with open(full, "rb") as handle:
                    found[rel] = ("file", handle.read(1 << 16), info.st_size)
            else:
                found[rel] = ("other", stat.S_IFMT(info.st_mode))
    return found


@dataclass
class Outcome:
    """What one golem command did: exit code, output, the `-json` object, or a crash."""

    code: int | None
    out: str
    err: str
    report: dict | None
    crash: str | None = None            # the traceback, when an exception escaped main()
    requests: list = field(default_factory=list)

    def describe(self) -> str:
        if self.crash:
            return "golem crashed: " + self.crash.strip().splitlines()[-1]
        if self.report is not None:
            return f"exit {self.code}: {self.report.get('summary')}"
        return f"exit {self.code}, no JSON result; stderr: {self.err.strip()[-400:]}"

    @property
    def verdict(self) -> str | None:
        return (self.report or {}).get("verdict")


def named(ids: list[str], name: str) -> list[str]:
    """The test ids among `ids` whose last part is the test `name` (any id format)."""
    return [t for t in ids if re.split(r"[.:/\[ ]+", t.rstrip("]"))[-1:] == [name]
            or t.endswith(("." + name, ":" + name, "/" + name))]


def invoke(args: list[str], env: dict[str, str | None] | None = None) -> Outcome:
    """golem.cli.main(args) in-process, with `env` applied and output captured."""
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    code, crash = None, None
    try:
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except Exception:           # a crash: what a user would see as a traceback
                crash = traceback.format_exc()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    report = None
    lines = out.getvalue().rstrip("\n").splitlines()
    if "-json" in args and lines:
        try:
            report = json.loads(lines[-1])
        except ValueError:
            report = None
    return Outcome(code, out.getvalue(), err.getvalue(), report, crash)


class AdversarialCase(GolemCase):
    """A private temporary directory and state directory, and attack helpers."""

    def setUp(self):
        super().setUp()
        self.count = 0
        # runs before GolemCase's own cleanup: hostile trees defeat shutil.rmtree
        self.addCleanup(remove_tree, self.tmp)

    # -- projects ----------------------------------------------------------------------

    def project(self, files: dict[str, str], git_repo: bool = False) -> str:
        self.count += 1
        return make_repo(self.tmp, files, git_repo=git_repo, name=f"repo{self.count}")

    def canary(self, name: str = "canary", files: dict[str, str] | None = None) -> str:
        """A directory outside every workspace that nothing may write into."""
        path = os.path.join(self.tmp, f"{name}-{self.count}-{os.urandom(3).hex()}")
        os.makedirs(path)
        for rel, text in (files or {}).items():
            full = os.path.join(path, *rel.split("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as handle:
                handle.write(text)
        return path

    # -- running golem -----------------------------------------------------------------

    def attack(self, repo: str, calls: list | None = None, *extra: str,
               command: str | None = UNITTEST_CMD, sandbox: str = "none",
               replies: list | None = None, env: dict | None = None,
               allow: bool = True) -> Outcome:
        """`golem fix -json` where the scripted model makes `calls` in one turn, then claims
        success. `command` None leaves the test command to detection."""
        if replies is None:
            replies = ([chat(tool_calls=calls)] if calls else []) + [chat(CLAIM)]
        server = self.serve(replies)
        args = ["fix", "-dir", repo, "-provider", "openai", "-base-url", server.url,
                "-sandbox", sandbox, "-trace", self.trace, "-json"]
        if command is not None:
            args += ["-test", command]
        if allow:
            args += ["-allow", "python3"]
        outcome = invoke([*args, *extra], env)
        outcome.requests = server.requests
        return outcome

    def verify(self, repo: str, *extra: str, command: str | None = UNITTEST_CMD,
               base: str = "HEAD~1", sandbox: str = "none", env: dict | None = None) -> Outcome:
        args = ["verify", "-dir", repo, "-base", base, "-sandbox", sandbox, "-trace",
                self.trace, "-json"]
        if command is not None:
            args += ["-test", command]
        return invoke([*args, *extra], env)

    def commit_change(self, repo: str, files: dict[str, str | None],
                      message: str = "change") -> None:
        """Write `files` in the git repository `repo` and commit them (None: commit the path as
        it is on disk, e.g. a symlink made beforehand, or delete it)."""
        for rel, text in files.items():
            full = os.path.join(repo, *rel.split("/"))
            if text is None:        # None: delete it, unless it is there to be committed
                if not os.path.islink(full):
                    os.unlink(full)
                continue
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as handle:
                handle.write(text)
        git(repo, "add", "-A", "--", *files)
        git(repo, "commit", "-q", "-m", message)

    def tool_results(self, outcome: Outcome) -> list[str]:
        """The text of every tool result the model was sent."""
        return [m["content"] for request in outcome.requests
                for m in request["body"]["messages"] if m.get("role") == "tool"]

    def trace_text(self) -> str:
        if not os.path.exists(self.trace):
            return ""
        with open(self.trace, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    # -- assertions --------------------------------------------------------------------

    def assertRan(self, outcome: Outcome) -> dict:
        """golem ended normally with a `-json` result; returns it."""
        if outcome.crash:
            self.fail(outcome.describe() + "\n" + outcome.crash)
        self.assertIsNotNone(outcome.report, outcome.describe())
        return outcome.report

    def assertVerdict(self, outcome: Outcome, *verdicts: str) -> dict:
        """The verdict is one of `verdicts`, and the exit code is the verdict's."""
        report = self.assertRan(outcome)
        self.assertIn(report["verdict"], verdicts, outcome.describe())
        self.assertEqual(outcome.code, EXIT[report["verdict"]], outcome.describe())
        return report

    def assertNotVerified(self, outcome: Outcome) -> dict:
        """FAILED (exit 1) or REJECTED (exit 3): the secure outcome of a cheat."""
        return self.assertVerdict(outcome, "FAILED", "REJECTED")

    def assertCheatCaught(self, outcome: Outcome, failing: str = "test_add") -> dict:
        """Not VERIFIED; and when FAILED, the test that failed before is not counted fixed.
        Tests are matched by name, not by id format, which a new evidence writer may change."""
        report = self.assertNotVerified(outcome)
        if report["verdict"] == "FAILED":
            self.assertEqual(named(report["fixed"], failing), [], outcome.describe())
        return report

    def assertFixedOnly(self, outcome: Outcome, failing: str = "test_add") -> dict:
        """VERIFIED, with exactly the test that failed before fixed."""
        report = self.assertVerdict(outcome, "VERIFIED")
        self.assertEqual(len(report["fixed"]), 1, report["fixed"])
        self.assertEqual(len(named(report["fixed"], failing)), 1, report["fixed"])
        return report

    def assertCleanStop(self, outcome: Outcome) -> None:
        """No crash: a verdict, or exit 2 with one `golem:` line and no traceback."""
        if outcome.crash:
            self.fail(outcome.describe() + "\n" + outcome.crash)
        self.assertNotIn("Traceback (most recent call last)", outcome.err)
        if outcome.code == 2:
            lines = [line for line in outcome.err.splitlines() if line.startswith("golem:")]
            self.assertEqual(len(lines), 1, outcome.err[-2000:])
        else:
            self.assertIn(outcome.code, (0, 1, 3), outcome.describe())
            self.assertIsNotNone(outcome.report, outcome.describe())

    def assertAbsent(self, needle: str, outcome: Outcome, what: str) -> None:
        """`needle` is nowhere in golem's stdout, stderr, trace or `-json` result."""
        for where, text in (("stdout", outcome.out), ("stderr", outcome.err),
                            ("the trace", self.trace_text()),
                            ("the result", json.dumps(outcome.report))):
            at = text.find(needle)
            if at >= 0:
                self.fail(f"{what} reached {where}: ...{text[max(0, at - 200):at + 100]!r}... "
                          f"({outcome.describe()})")

    def assertToolsRan(self, outcome: Outcome, count: int | None = None) -> None:
        """The scripted tool calls themselves worked (a harness check, not the attack's)."""
        results = self.tool_results(outcome)
        if count is not None:
            self.assertGreaterEqual(len(results), count, results)
        for text in results:
            self.assertFalse(text.startswith("Error:"), text[:2000])
            if text.startswith("exit code"):
                self.assertTrue(text.startswith("exit code 0"), text[:2000])


def temporary_tempdir(case: unittest.TestCase, where: str) -> None:
    """Make golem's scratch directories (tempfile.mkdtemp) go under `where` for this test,
    so whatever it leaves behind is cleaned up with the test's own directory."""
    os.makedirs(where, exist_ok=True)
    saved = tempfile.tempdir
    tempfile.tempdir = where
    case.addCleanup(setattr, tempfile, "tempdir", saved)


# A library installed in a virtual environment, with modules named like standard ones (as
# real packages have: pip's own `logging` and `typing` modules, ...); tests import it.
VENV_LIBRARY = {"mylib/__init__.py": "from mylib.types import double\n",
                "mylib/types.py": "def double(x):\n    return 2 * x\n",
                "mylib/logging.py": "LEVEL = 1\n"}
VENV_TEST = ("import unittest\n\nfrom mylib import double\n\n\n"
             "class LibTest(unittest.TestCase):\n    def test_double(self):\n"
             "        self.assertEqual(double(2), 4)\n")
VENV_CMD = ".venv/bin/python -m unittest discover -s tests"


def make_venv(repo: str, name: str = ".venv") -> str:
    """A real virtual environment in the workspace (no pip, so it is quick to make), with
    VENV_LIBRARY installed in it; returns its site-packages directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", os.path.join(repo, name)],
                   check=True, capture_output=True)
    lib = subprocess.run([os.path.join(repo, name, "bin", "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True).stdout.strip()
    for rel, text in VENV_LIBRARY.items():
        full = os.path.join(lib, *rel.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)
    return lib
