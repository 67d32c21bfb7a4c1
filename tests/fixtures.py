"""Shared pieces for tests that run golem end to end: tiny projects on disk, and the CLI
called in-process with its output captured."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from golem.cli import main

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the example `golem demo` fixes, shipped inside the package
CALCULATOR = os.path.join(REPO_ROOT, "golem", "examples", "broken-calculator")
TEST_CMD = "python3 -m unittest discover -s tests"

BUGGY_CALC = "def add(a, b):\n    return a - b\n"
FIXED_CALC = "def add(a, b):\n    return a + b\n"
CALC_TESTS = """\
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
# One test fails (test_add), one passes (test_zero).
BUGGY = {"calc.py": BUGGY_CALC, "tests/test_calc.py": CALC_TESTS}
GREEN = {"calc.py": FIXED_CALC, "tests/test_calc.py": CALC_TESTS}
FIX_EDIT = ("edit_file", {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"})

# Variables that would change what golem does if the developer's shell happens to set them.
AMBIENT = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
           "GOLEM_PROVIDER", "GOLEM_MODEL", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")

GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def git(repo: str, *args: str) -> str:
    """Run git in `repo` and return its stdout; raise on failure."""
    done = subprocess.run(["git", *GIT_ID, *args], cwd=repo, capture_output=True, text=True,
                          check=True)
    return done.stdout


def write_files(root: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        full = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)


def read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def make_repo(tmp: str, files: dict[str, str] | None = None, git_repo: bool = False,
              name: str = "repo") -> str:
    """A small project in `tmp/name` (default: the buggy calculator); optionally committed."""
    root = os.path.join(tmp, name)
    os.makedirs(root)
    write_files(root, BUGGY if files is None else files)
    if git_repo:
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "initial")
    return root


def run_cli(args: list[str], env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    """golem.cli.main(args) with `env` applied (None deletes a variable) and output captured."""
    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue()


def last_json(stdout: str) -> dict:
    """The `-json` object: the last line of stdout."""
    return json.loads(stdout.rstrip("\n").splitlines()[-1])


def read_trace(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def tool_messages(request: dict) -> list[dict]:
    """The `tool` messages in one request the provider server received."""
    return [m for m in request["body"]["messages"] if m.get("role") == "tool"]


class GolemCase(unittest.TestCase):
    """A temporary directory, a private golem state directory, and no ambient keys."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="golem-test-")
        self.addCleanup(tmp.cleanup)
        self.tmp = os.path.realpath(tmp.name)
        saved = dict(os.environ)

        def restore():
            os.environ.clear()
            os.environ.update(saved)
        self.addCleanup(restore)
        for name in AMBIENT:
            os.environ.pop(name, None)
        os.environ["GOLEM_STATE_DIR"] = os.path.join(self.tmp, "state")
        self.trace = os.path.join(self.tmp, "trace.jsonl")

    def serve(self, replies):
        """A ProviderServer with `replies`, stopped when the test ends."""
        from tests.provider_server import ProviderServer
        return self.enterContext(ProviderServer(replies))

    def fix(self, repo: str, server, *extra: str, env=None, sandbox: str = "none"):
        """`golem fix -json` against `server`; returns (code, stdout, stderr, report)."""
        args = ["fix", "-dir", repo, "-test", TEST_CMD, "-provider", "openai",
                "-base-url", server.url, "-sandbox", sandbox, "-trace", self.trace,
                "-json", *extra]
        code, out, err = run_cli(args, env)
        return code, out, err, last_json(out)


def gone(pid: int) -> bool:
    """True once `pid` no longer runs (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def wait_gone(pid: int, within: float = 10.0) -> bool:
    """True as soon as `pid` is gone; False if it still runs after `within` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if gone(pid):
            return True
        time.sleep(0.02)
    return gone(pid)


def use_handler(case: unittest.TestCase, signum: int, handler) -> None:
    """Install `handler` for `signum` until `case` ends, then put the previous one back.

    A test must not rely on the handler it inherits: started from `nohup`, or as a background
    job of a non-interactive shell, Python begins with SIGHUP or SIGINT ignored.
    """
    previous = signal.signal(signum, handler)
    # None: the previous handler was not installed from Python; the default is the best guess
    case.addCleanup(signal.signal, signum, signal.SIG_DFL if previous is None else previous)
