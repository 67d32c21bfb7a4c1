"""SIGTERM and SIGHUP end a run the way Ctrl-C does, wherever golem is when they come.

golem runs as a real process; the signal comes during a model call, a command, a retry wait
or the baseline, under bubblewrap and with -sandbox none. Each must give: exit 128 + signal,
one `golem: interrupted by SIG...` line, the -json object with stop `interrupted`, a trace
that ends with `run_end`, the command's processes gone and the scratch directory removed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import unittest

from tests.fixtures import REPO_ROOT, TEST_CMD, GolemCase, make_repo, read_trace
from tests.provider_server import Reply, chat
from tests.test_security import bwrap_or_skip

SLEEP = "import time; time.sleep(313.25)"     # a command that would outlive the test
BOUND = 15.0        # seconds to reach the point of the signal, on a loaded machine


def processes(marker: bytes, besides: int = 0) -> list[int]:
    """Pids but `besides` whose command line holds `marker` (sandboxed ones included)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != besides:
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:
                    if marker in handle.read().replace(b"\0", b" "):
                        found.append(int(name))
            except OSError:
                continue
    return found


class SignalCase(GolemCase):
    def start(self, repo: str, server, sandbox: str, *extra: str, test: str = TEST_CMD):
        self.scratch = os.path.join(self.tmp, "tmpdir")
        os.makedirs(self.scratch, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": self.scratch,
               "GOLEM_STATE_DIR": os.environ["GOLEM_STATE_DIR"], "HOME": self.tmp}
        args = [sys.executable, "-m", "golem", "fix", "-dir", repo, "-test", test,
                "-provider", "openai", "-base-url", server.url, "-sandbox", sandbox,
                "-trace", self.trace, "-json", *extra]
        proc = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.addCleanup(self._reap, proc)
        return proc

    def _reap(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()

    def wait_for(self, proc, ready) -> None:
        end = time.monotonic() + BOUND
        while time.monotonic() < end:
            if ready():
                time.sleep(0.2)     # let golem settle into the wait itself
                return
            if proc.poll() is not None:
                self.fail(f"golem ended early: {proc.communicate()}")
            time.sleep(0.02)
        self.fail("golem never got there")

    def traced(self, kind: str, text: str = "") -> bool:
        """An event of `kind` (whose message holds `text`) is in the trace by now."""
        try:
            return any(e["event"] == kind and text in e.get("message", "")
                       for e in read_trace(self.trace))
        except (OSError, ValueError):
            return False

    def stop(self, proc, signum=signal.SIGTERM, name="SIGTERM") -> dict:
        started = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
        self.assertLess(time.monotonic() - started, 10.0)
        self.assertEqual(proc.returncode, 128 + signum, err)
        self.assertEqual(err.splitlines()[-1], f"golem: interrupted by {name}")
        report = json.loads(out.splitlines()[-1])
        self.assertEqual(report["stop"], "interrupted")
        self.assertIsNone(report["verdict"])
        events = read_trace(self.trace)
        self.assertEqual(events[-1]["event"], "run_end")
        self.assertEqual(events[-1]["stop"], "interrupted")
        self.assertEqual(os.listdir(self.scratch), [])     # the scratch directory went
        return report


class DuringTheRun(SignalCase):
    def model_call(self, sandbox: str):
        repo = make_repo(self.tmp, name=f"model-{sandbox}")
        server = self.serve([Reply(chat("too late"), delay=60)])
        proc = self.start(repo, server, sandbox)
        self.wait_for(proc, lambda: server.requests)
        report = self.stop(proc)
        self.assertEqual(report["steps"], 1)

    def command(self, sandbox: str, signum=signal.SIGTERM, name="SIGTERM"):
        repo = make_repo(self.tmp, name=f"command-{sandbox}-{name}")
        server = self.serve([chat(tool_calls=[("run_command",
                                               {"argv": ["python3", "-c", SLEEP]})])])
        proc = self.start(repo, server, sandbox, "-allow", "python3")
        self.wait_for(proc, lambda: processes(SLEEP.encode()))
        report = self.stop(proc, signum, name)
        self.assertEqual(report["tool_calls"], 1)
        end = time.monotonic() + 5
        while processes(SLEEP.encode()) and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(processes(SLEEP.encode()), [])    # the whole group was killed

    def retry_wait(self, sandbox: str):
        repo = make_repo(self.tmp, name=f"retry-{sandbox}")
        server = self.serve([Reply({"error": {"message": "busy"}}, 429,
                                   headers={"Retry-After": "50"})])
        proc = self.start(repo, server, sandbox)
        self.wait_for(proc, lambda: self.traced("retry"))
        self.stop(proc)
        self.assertEqual(len(server.requests), 1)

    def test_model_call_none(self):
        self.model_call("none")

    def test_model_call_bwrap(self):
        bwrap_or_skip(self)
        self.model_call("bwrap")

    def test_command_none(self):
        self.command("none")

    def test_command_bwrap(self):
        bwrap_or_skip(self)
        self.command("bwrap")

    def test_retry_wait_none(self):
        self.retry_wait("none")

    def test_retry_wait_bwrap(self):
        bwrap_or_skip(self)
        self.retry_wait("bwrap")

    def test_sighup_is_129(self):
        self.command("none", signal.SIGHUP, "SIGHUP")


def working_in(folder: str) -> list[int]:
    """Pids whose working directory is inside `folder`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cwd = os.readlink(f"/proc/{name}/cwd")
            except OSError:
                continue
            if cwd == folder or cwd.startswith(folder + "/"):
                found.append(int(name))
    return found


class AfterTheRun(SignalCase):
    def test_sigterm_during_the_verification_keeps_the_result_so_far(self):
        repo = make_repo(self.tmp)
        slow = "import time\ntime.sleep(313.25)\ndef add(a, b):\n    return a + b\n"
        server = self.serve([chat(tool_calls=[("write_file", {"path": "calc.py",
                                                              "content": slow})]),
                             chat("fixed, honestly")])
        proc = self.start(repo, server, "none")
        self.wait_for(proc, lambda: self.traced("note", "verification copy"))
        report = self.stop_after_the_loop(proc)
        self.assertEqual((report["steps"], report["tool_calls"]), (2, 1))
        self.assertEqual(report["claimed"], "fixed, honestly")
        self.assertEqual(report["tokens"]["total"], 240)
        self.assertEqual(working_in(self.scratch), [])

    def stop_after_the_loop(self, proc) -> dict:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 143, err)
        self.assertEqual(err.splitlines()[-1], "golem: interrupted by SIGTERM")
        report = json.loads(out.splitlines()[-1])
        self.assertEqual((report["stop"], report["verdict"]), ("interrupted", None))
        ends = [e for e in read_trace(self.trace) if e["event"] == "run_end"]
        self.assertEqual([e["stop"] for e in ends], ["answered"])   # the run itself ended
        self.assertEqual(os.listdir(self.scratch), [])
        return report


class BeforeTheRun(SignalCase):
    def test_sigterm_during_the_baseline(self):
        repo = make_repo(self.tmp)
        server = self.serve([chat("never")])
        proc = self.start(repo, server, "none", test=f"python3 -c '{SLEEP}'")
        self.wait_for(proc, lambda: processes(SLEEP.encode(), besides=proc.pid))
        report = self.stop(proc)
        self.assertEqual(report["steps"], 0)
        self.assertEqual(server.requests, [])
        self.assertEqual(processes(SLEEP.encode()), [])


if __name__ == "__main__":
    unittest.main()
