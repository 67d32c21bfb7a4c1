"""`make test`'s runner (tests/parallel.py): modules in parallel processes, a failing module's
output whole, one closing summary in unittest's own form, the exit code, and Ctrl-C."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

from tests.fixtures import REPO_ROOT, GolemCase, gone, use_handler, wait_gone, write_files

PASSES = """import unittest

class A(unittest.TestCase):
    def test_one(self):
        pass

    @unittest.skip("not here")
    def test_two(self):
        pass
"""
FAILS = """import unittest

class B(unittest.TestCase):
    def test_three(self):
        print("the whole story of test_three")
        self.assertEqual(1, 2, "MARK-OF-B")
"""
DIES = """import os, signal, unittest

class C(unittest.TestCase):
    def test_four(self):
        print("C was here", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
"""
# the pid is written under another name and renamed, so the file is whole once it exists
SLEEPS = """import os, time, unittest

class D(unittest.TestCase):
    def test_five(self):
        with open(os.environ["PIDFILE"] + ".part", "w") as handle:
            handle.write(str(os.getpid()))
        os.rename(os.environ["PIDFILE"] + ".part", os.environ["PIDFILE"])
        time.sleep(120)
"""


class ParallelRunner(GolemCase):
    def runner(self, *modules: str, root: str = "", **kw) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tests.parallel", "-j", "3", "--root",
                                 root or self.tmp, *modules], cwd=REPO_ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)

    def test_all_pass_one_summary(self):
        write_files(self.tmp, {"mod_a.py": PASSES, "mod_a2.py": PASSES})
        with self.runner("mod_a", "mod_a2") as proc:
            out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, out)
        lines = out.rstrip("\n").splitlines()
        self.assertRegex(lines[-3], r"^Ran 4 tests in [\d.]+s$")
        self.assertEqual(lines[-1], "OK (skipped=2)")
        self.assertEqual(sum(line.startswith("Ran ") for line in lines), 1)

    def test_a_failure_is_shown_whole_and_fails_the_run(self):
        write_files(self.tmp, {"mod_a.py": PASSES, "mod_b.py": FAILS, "mod_c.py": DIES})
        with self.runner("mod_a", "mod_b", "mod_c") as proc:
            out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 1, out)
        self.assertIn("MARK-OF-B", out)
        self.assertIn("FAIL: test_three", out)
        self.assertIn("the whole story of test_three", out)     # its captured output too
        self.assertIn("C was here", out)                         # a module that died
        self.assertRegex(out, r"FAIL  mod_c \(.*exit -9\)")
        lines = out.rstrip("\n").splitlines()
        self.assertRegex(lines[-3], r"^Ran 4 tests in [\d.]+s$")
        # mod_c never closed: it counts as one error
        self.assertEqual(lines[-1], "FAILED (failures=1, errors=1, skipped=1)")

    def test_a_module_that_cannot_start_fails_the_run(self):
        # fail closed: a module whose process cannot even start is a failure, not a gap
        with self.runner("mod_a", root=os.path.join(self.tmp, "missing")) as proc:
            out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 1, out)
        self.assertRegex(out, r"FAIL  mod_a .*\n.*\nthe runner could not run it: FileNotFoundError")
        self.assertEqual(out.rstrip("\n").splitlines()[-1], "FAILED (errors=1)")

    def stopped(self, signum: int, thread: bool = False) -> tuple[int, str, int]:
        """Start the runner on a module that sleeps, send `signum` once the module runs (to the
        runner's process group, or with `thread` to one of its worker threads), and return
        (exit code, output, the module's pid)."""
        # the runner starts with Python's own handlers, as from a terminal, whatever this
        # process inherited: as a background job of a non-interactive shell it starts with
        # SIGINT ignored, and the runner, like make, leaves an ignored SIGINT ignored
        use_handler(self, signal.SIGINT, signal.default_int_handler)
        pidfile = os.path.join(self.tmp, "pid")
        write_files(self.tmp, {"mod_d.py": SLEEPS})
        env = {**os.environ, "PIDFILE": pidfile}
        proc = self.runner("mod_d", env=env, start_new_session=True)
        self.addCleanup(reap, proc)
        end = time.monotonic() + 120
        while not os.path.exists(pidfile) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        if not os.path.exists(pidfile):
            self.fail(f"the module never started: {proc.communicate(timeout=60)[0]}")
        with open(pidfile) as handle:
            worker = int(handle.read())
        self.addCleanup(kill_group, worker)
        if thread:
            tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
            libc = ctypes.CDLL(None, use_errno=True)
            if not hasattr(libc, "tgkill"):
                self.skipTest("no tgkill in this C library")
            self.assertEqual(libc.tgkill(proc.pid, tids[0], signum), 0, ctypes.get_errno())
        else:
            os.killpg(proc.pid, signum)     # Ctrl-C: the terminal signals the whole group
        out, _ = proc.communicate(timeout=60)
        return proc.returncode, out, worker

    def test_ctrl_c_ends_every_worker(self):
        code, out, worker = self.stopped(signal.SIGINT)
        self.assertEqual(code, 130, out)
        self.assertTrue(wait_gone(worker, 30), out)
        self.assertIn("interrupted (SIGINT): every test process was ended", out)
        self.assertNotIn("Ran ", out)

    def test_sigterm_ends_every_worker(self):
        # a CI job cancelled, `timeout make test`: the workers lead their own groups, so
        # nothing else would end them
        code, out, worker = self.stopped(signal.SIGTERM)
        self.assertEqual(code, 128 + signal.SIGTERM, out)
        self.assertTrue(wait_gone(worker, 30), out)
        self.assertNotIn("Ran ", out)

    def test_a_signal_handed_to_a_worker_thread_stops_the_run(self):
        # the kernel may deliver a process's signal to any of its threads; Python runs the
        # handler in the main thread only, which must wake up for it all the same
        code, out, worker = self.stopped(signal.SIGINT, thread=True)
        self.assertEqual(code, 130, out)
        self.assertTrue(wait_gone(worker, 30), out)


def kill_group(pid: int) -> None:
    if gone(pid):
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap(proc: subprocess.Popen) -> None:
    """The runner and its group ended and waited for, whatever the test saw."""
    kill_group(proc.pid)
    proc.communicate()
