"""`make test`'s runner (tests/parallel.py): modules in parallel processes, a failing module's
output whole, one closing summary in unittest's own form, the exit code, and Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.fixtures import REPO_ROOT, GolemCase, wait_gone, write_files

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
SLEEPS = """import os, time, unittest

class D(unittest.TestCase):
    def test_five(self):
        with open(os.environ["PIDFILE"], "w") as handle:
            handle.write(str(os.getpid()))
        time.sleep(120)
"""


class ParallelRunner(GolemCase):
    def runner(self, *modules: str, **kw) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "tests.parallel", "-j", "3", "--root",
                                 self.tmp, *modules], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, **kw)

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

    def test_ctrl_c_ends_every_worker(self):
        pidfile = os.path.join(self.tmp, "pid")
        write_files(self.tmp, {"mod_d.py": SLEEPS})
        env = {**os.environ, "PIDFILE": pidfile}
        with self.runner("mod_d", env=env, start_new_session=True) as proc:
            end = time.monotonic() + 120
            while not os.path.exists(pidfile) and time.monotonic() < end:
                time.sleep(0.05)
            time.sleep(0.2)
            with open(pidfile) as handle:
                worker = int(handle.read())
            os.killpg(proc.pid, signal.SIGINT)      # what a terminal's Ctrl-C sends
            out, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, out)
        self.assertTrue(wait_gone(worker, 30), out)
        self.assertNotIn("Ran ", out)
