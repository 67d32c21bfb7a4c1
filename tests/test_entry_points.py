"""Asynchronous entry points set during a graded run (signal handlers, timers, wake-up
descriptors, threads, exit hooks, finalizers, collector callbacks): Python raises no audit
event for them, so golem wraps what sets them before any code under test is imported. One
that the change newly gives the code under test is REJECTED, named; one the tests set, or
code that set it before the change (a failing baseline never got to it), is not.
"""

from __future__ import annotations

from tests.adversarial import UNITTEST_CMD, AdversarialCase

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = ("import unittest\n\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n"
         "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
         "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n")

# each sets its entry point and does nothing else with it: the fix itself is honest
SETS = {
    "signal": "import signal\nsignal.signal(signal.SIGUSR2, lambda *a: None)\n",
    "signal (_signal)": "import _signal\n_signal.signal(12, lambda *a: None)\n",
    "signal (wake-up)": "import os, signal\nr, w = os.pipe()\nos.set_blocking(w, False)\n"
                        "signal.set_wakeup_fd(w)\n",
    "timer": "import signal\nsignal.setitimer(signal.ITIMER_REAL, 3600)\n",
    "thread": "import threading\nthreading.Thread(target=lambda: None).start()\n",
    "exit-hook": "import atexit\natexit.register(print)\n",
    "finalizer": "import weakref\n\n\nclass _Box:\n    pass\n\n\n_kept = _Box()\n"
                 "weakref.finalize(_kept, print)\n",
    "gc-callback": "import gc\ngc.callbacks.append(lambda phase, info: None)\n",
}
KINDS = {"signal": "signal", "signal (_signal)": "signal", "signal (wake-up)": "signal",
         "timer": "timer", "thread": "thread", "exit-hook": "exit-hook",
         "finalizer": "finalizer", "gc-callback": "gc-callback"}


class EntryPointTest(AdversarialCase):
    def test_each_new_entry_point_is_named(self):
        for label, code in SETS.items():
            with self.subTest(label):
                repo = self.project({"calc.py": CALC, "tests/test_calc.py": TESTS},
                                    git_repo=True)
                self.commit_change(repo, {"calc.py": code + "\n\n" + FIXED}, "sets")
                outcome = self.verify(repo, command=UNITTEST_CMD)
                report = self.assertVerdict(outcome, "REJECTED")
                self.assertIn(f"entry point set: {KINDS[label]} by calc.py:",
                              report["summary"])

    def test_code_that_set_it_before_the_change(self):
        # the baseline fails to import calc (a syntax error) and never reaches the helper
        # that starts a thread; the fix makes it importable
        helper = "import threading\n\n\ndef start():\n    threading.Thread(target=print).start()\n"
        broken = "import worker\nworker.start()\n\n\ndef add(a, b)\n    return a + b\n"
        repo = self.project({"worker.py": helper, "calc.py": broken,
                             "tests/test_calc.py": TESTS}, git_repo=True)
        self.commit_change(repo, {"calc.py": broken.replace("(a, b)\n", "(a, b):\n")}, "fix")
        self.assertVerdict(self.verify(repo, command=UNITTEST_CMD), "VERIFIED")

    def test_a_changed_file_that_used_the_power_before(self):
        base = ("import threading\n\n\ndef background():\n"
                "    threading.Thread(target=print).start()\n\n\n" + CALC)
        fixed = ("import threading\n\n\ndef background():\n"
                 "    threading.Thread(target=print).start()\n\n\nbackground()\n\n\n" + FIXED)
        repo = self.project({"calc.py": base, "tests/test_calc.py": TESTS}, git_repo=True)
        self.commit_change(repo, {"calc.py": fixed}, "fix")
        self.assertVerdict(self.verify(repo, command=UNITTEST_CMD), "VERIFIED")

    def test_the_tests_own(self):
        tests = TESTS.replace("import unittest\n", "import atexit\nimport signal\nimport "
                              "threading\nimport unittest\n\nsignal.signal(signal.SIGUSR2, "
                              "signal.SIG_IGN)\natexit.register(print)\n"
                              "threading.Thread(target=print).start()\n")
        repo = self.project({"calc.py": CALC, "tests/test_calc.py": tests}, git_repo=True)
        self.commit_change(repo, {"calc.py": FIXED}, "fix")
        self.assertVerdict(self.verify(repo, command=UNITTEST_CMD), "VERIFIED")
