import os
import threading
import signal
import re
import stat
import sys
import tempfile
import time
import unittest
from unittest import mock

from golem.core.errors import ToolError
from golem.tools import process
from golem.tools.process import Completed, command_env, resolve_program, run
from tests.fixtures import use_handler, wait_gone

PY = sys.executable


class ProcessCase(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.env = command_env(self.dir, self.dir)

    def run_py(self, code, *args, timeout=10.0, **kw):
        return run([PY, "-c", code, *args], cwd=self.dir, env=self.env, timeout=timeout, **kw)


class RunTest(ProcessCase):
    def test_output_and_exit_codes(self):
        done = self.run_py("import sys; print('hello'); print('oops', file=sys.stderr); "
                           "sys.exit(3)")
        self.assertIsInstance(done, Completed)
        self.assertEqual(done.exit_code, 3)
        self.assertEqual(sorted(done.output.splitlines()), ["hello", "oops"])
        self.assertFalse(done.timed_out)
        self.assertFalse(done.truncated)
        self.assertEqual(done.argv[:2], [PY, "-c"])
        self.assertEqual(self.run_py("pass").exit_code, 0)

    def test_records_are_handed_over_while_the_command_runs(self):
        # the child writes a record, then waits for golem's side to have read it: it can
        # only see the flag file if `records` was called before it exited
        flag = os.path.join(self.dir, "read")
        got = []

        def records(chunk):
            got.append(chunk)
            if b"\n" in b"".join(got):
                open(flag, "w").close()
        code = ("import os, sys, time\n"
                "os.write(int(os.environ['GOLEM_EVIDENCE_FD']), b'one\\ntw')\n"
                "end = time.monotonic() + 30\n"
                "while not os.path.exists(sys.argv[1]) and time.monotonic() < end:\n"
                "    time.sleep(0.01)\n"
                "os.write(int(os.environ['GOLEM_EVIDENCE_FD']), b'o\\n')\n"
                "sys.exit(0 if os.path.exists(sys.argv[1]) else 7)\n")
        done = self.run_py(code, flag, timeout=60, evidence=1000, records=records)
        self.assertEqual(done.exit_code, 0, done.output)
        self.assertEqual(b"".join(got), b"one\ntwo\n")
        self.assertEqual(done.evidence, b"one\ntwo\n")

    def test_no_shell(self):
        done = run(["echo", "a;", "echo", "$HOME", "`id`", "|", "cat"], cwd=self.dir,
                   env=self.env, timeout=10)
        self.assertEqual(done.output, "a; echo $HOME `id` | cat\n")

    def test_stdin_is_empty_and_cwd_env_apply(self):
        done = self.run_py("import os, sys; print(repr(sys.stdin.read()), os.getcwd(), "
                           "os.environ['HOME'])")
        self.assertEqual(done.output.split(), ["''", os.path.realpath(self.dir), self.dir])

    def test_timeout_kills_child_and_grandchild(self):
        code = ("import subprocess, sys, time\n"
                "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                "print('grandchild', g.pid, flush=True)\n"
                "print('partial output', flush=True)\n"
                "time.sleep(60)\n")
        # 2 s: time enough for the child to start and print, even on a loaded machine
        done = self.run_py(code, timeout=2.0)
        self.assertTrue(done.timed_out)
        # ended at the timeout, not after the child's 60 s sleep
        self.assertGreaterEqual(done.elapsed, 2.0)
        self.assertLess(done.elapsed, 30.0)
        self.assertIn("partial output", done.output)
        self.assertNotEqual(done.exit_code, 0)
        pid = int(re.search(r"grandchild (\d+)", done.output).group(1))
        self.assertTrue(wait_gone(pid), "the grandchild survived the timeout")

    def test_ctrl_c_kills_the_whole_group(self):
        # Python's own Ctrl-C handler, whatever this process inherited: as a background job
        # of a non-interactive shell it starts with SIGINT ignored.
        use_handler(self, signal.SIGINT, signal.default_int_handler)
        pidfile = os.path.join(self.dir, "grandchild.pid")
        # written under another name and renamed, so the file is whole once it exists
        code = ("import os, subprocess, sys, time\n"
                "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                f"open({pidfile!r} + '.tmp', 'w').write(str(g.pid))\n"
                f"os.rename({pidfile!r} + '.tmp', {pidfile!r})\n"
                "time.sleep(60)\n")
        returned = threading.Event()

        def interrupt_once_started():
            deadline = time.monotonic() + 30
            while not os.path.exists(pidfile) and time.monotonic() < deadline:
                if returned.wait(0.02):
                    return          # run() is over: a Ctrl-C now would hit the test runner
            os.kill(os.getpid(), signal.SIGINT)

        timer = threading.Thread(target=interrupt_once_started)
        timer.start()
        self.addCleanup(timer.join)
        try:
            with self.assertRaises(KeyboardInterrupt):
                self.run_py(code, timeout=60.0)
        finally:
            returned.set()
        with open(pidfile) as handle:
            self.assertTrue(wait_gone(int(handle.read())), "the grandchild survived Ctrl-C")

    def test_ctrl_c_while_the_command_starts_kills_it_too(self):
        # Popen waits for the exec after forking; a Ctrl-C then escapes it with the child
        # running and no Popen object to reach it by. Here it comes at that moment, once the
        # child has started a grandchild.
        pidfile = os.path.join(self.dir, "pids")
        code = ("import os, subprocess, sys, time\n"
                "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                f"open({pidfile!r} + '.tmp', 'w').write(f'{{os.getpid()}} {{g.pid}}')\n"
                f"os.rename({pidfile!r} + '.tmp', {pidfile!r})\n"
                "time.sleep(60)\n")
        start_child = process._Popen._execute_child

        def started_then_interrupted(popen, *args, **kwargs):
            start_child(popen, *args, **kwargs)
            deadline = time.monotonic() + 30
            while not os.path.exists(pidfile) and time.monotonic() < deadline:
                time.sleep(0.02)
            raise KeyboardInterrupt

        with mock.patch.object(process._Popen, "_execute_child", started_then_interrupted):
            with self.assertRaises(KeyboardInterrupt):
                self.run_py(code, timeout=60.0)
        with open(pidfile) as handle:
            child, grandchild = map(int, handle.read().split())
        self.assertTrue(wait_gone(child), "the child survived Ctrl-C")
        self.assertTrue(wait_gone(grandchild), "the grandchild survived Ctrl-C")

    def test_term_ignored_still_killed(self):
        code = ("import signal, time\n"
                "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('stubborn', flush=True)\n"
                "time.sleep(60)\n")
        # 2 s: time enough for the child to ignore SIGTERM and print, even on a loaded machine
        done = self.run_py(code, timeout=2.0)
        self.assertTrue(done.timed_out)
        self.assertEqual(done.exit_code, -9)
        self.assertLess(done.elapsed, 30.0)         # not after the child's 60 s sleep
        self.assertIn("stubborn", done.output)

    def test_grandchild_holding_the_pipe_does_not_hang(self):
        code = ("import subprocess, sys\n"
                "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
                "print('grandchild', g.pid, flush=True)\n"
                "print('done', flush=True)\n")
        done = self.run_py(code, timeout=20.0)
        # back soon after the child's exit: not at the timeout, nor after the grandchild's 30 s
        self.assertFalse(done.timed_out)
        self.assertLess(done.elapsed, 10.0)
        self.assertEqual(done.exit_code, 0)
        self.assertIn("done", done.output)
        pid = int(re.search(r"grandchild (\d+)", done.output).group(1))
        self.assertTrue(wait_gone(pid), "a leftover grandchild was not killed")

    def test_closed_stdout_still_waits_for_exit(self):
        done = self.run_py("import os, time; os.close(1); os.close(2); time.sleep(0.3); "
                           "raise SystemExit(4)")
        self.assertEqual(done.exit_code, 4)
        self.assertFalse(done.timed_out)

    def test_huge_output_keeps_head_and_tail(self):
        code = ("import sys\n"
                "w = sys.stdout.buffer.write\n"
                "w(b'HEAD')\n"
                "block = b'x' * (1 << 20)\n"
                "for _ in range(50):\n"
                "    w(block)\n"
                "w(b'TAIL')\n")
        # Keeping head and tail costs little work per byte. Measured in this process's CPU
        # time, which a busy machine does not stretch as it stretches the wall clock (the
        # benchmark measures memory; this catches a capture that copies its buffer per read).
        cpu = time.process_time()
        done = self.run_py(code, cap=1000, timeout=120.0)
        self.assertLess(time.process_time() - cpu, 5.0)
        self.assertFalse(done.timed_out)
        self.assertEqual(done.exit_code, 0)
        self.assertTrue(done.truncated)
        total = 8 + 50 * (1 << 20)
        self.assertTrue(done.output.startswith("HEAD" + "x" * 496))
        self.assertTrue(done.output.endswith("x" * 496 + "TAIL"))
        self.assertIn(f"\n[... {total - 1000} bytes omitted ...]\n", done.output)
        self.assertLess(len(done.output), 1100)

    def test_small_output_is_whole(self):
        done = self.run_py("print('a' * 99, end='')", cap=100)
        self.assertEqual(done.output, "a" * 99)
        self.assertFalse(done.truncated)

    def test_utf8_is_not_split(self):
        # 2001 bytes; a 50-byte head and a 51-byte tail both end inside a character.
        done = self.run_py("import sys; sys.stdout.buffer.write(('a' + '\u00e9' * 1000)"
                           ".encode())", cap=101)
        self.assertTrue(done.truncated)
        self.assertNotIn("\ufffd", done.output)
        head, tail = done.output.split("\n[... ")
        self.assertEqual(head, "a" + "\u00e9" * 24)
        omitted, tail = tail.split(" bytes omitted ...]\n")
        self.assertEqual(tail, "\u00e9" * 25)
        self.assertEqual(int(omitted), 2001 - 49 - 50)

    def test_invalid_utf8_is_replaced(self):
        done = self.run_py("import sys; sys.stdout.buffer.write(b'ok\\xff')")
        self.assertEqual(done.output, "ok\ufffd")

    def test_wrap_rewrites_argv(self):
        def wrap(argv):
            return [PY, "-c", "import sys; print(sys.argv[1:])", "--wrapped", *argv]

        done = run(["true", "x"], cwd=self.dir, env=self.env, timeout=10, wrap=wrap)
        self.assertEqual(done.output.strip(), "['--wrapped', 'true', 'x']")
        self.assertEqual(done.argv, ["true", "x"])

    def test_program_that_cannot_start(self):
        done = run([os.path.join(self.dir, "missing")], cwd=self.dir, env=self.env, timeout=5)
        self.assertIsNone(done.exit_code)
        self.assertIn("No such file", done.output)
        script = os.path.join(self.dir, "noexec")
        with open(script, "w") as fh:
            fh.write("#!/bin/sh\n")
        done = run([script], cwd=self.dir, env=self.env, timeout=5)
        self.assertIsNone(done.exit_code)
        self.assertIn("Permission denied", done.output)
        done = run(["golem-no-such-program-xyz"], cwd=self.dir, env=self.env, timeout=5)
        self.assertIsNone(done.exit_code)
        self.assertFalse(done.timed_out)


class EnvTest(unittest.TestCase):
    def set_environ(self, **values):
        for name, value in values.items():
            old = os.environ.get(name)
            self.addCleanup(self._restore, name, old)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    @staticmethod
    def _restore(name, old):
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old

    def test_allowlist_and_secrets(self):
        self.set_environ(OPENROUTER_API_KEY="sk-or-1", GOLEM_OTHER="x", TZ="UTC",
                         GITHUB_TOKEN="t", VIRTUAL_ENV="/venv")
        env = command_env("/h", "/t", {"OPENROUTER_API_KEY": "sk", "GH_TOKEN": "t",
                                       "my_password": "p", "SSL_CERT_FILE": "c",
                                       "AWS_SECRET_ACCESS_KEY": "s", "NPM_AUTH": "a",
                                       "GIT_CREDENTIAL": "c", "PRIVATE_X": "p",
                                       "DB_PASSWD": "p", "CI": "1"})
        self.assertEqual(env["HOME"], "/h")
        self.assertEqual(env["TMPDIR"], "/t")
        self.assertEqual(env["PYTHONDONTWRITEBYTECODE"], "1")
        self.assertEqual(env["TZ"], "UTC")
        self.assertEqual(env["VIRTUAL_ENV"], "/venv")
        self.assertEqual(env["CI"], "1")
        self.assertIn("PATH", env)
        self.assertNotIn("GOLEM_OTHER", env)
        for name in env:
            self.assertNotRegex(name.upper(), "KEY|TOKEN|SECRET|PASSW|AUTH|CREDENTIAL|PRIVATE|CERT")

    def test_default_path(self):
        self.set_environ(PATH=None)
        self.assertEqual(command_env("/h", "/t")["PATH"], "/usr/local/bin:/usr/bin:/bin")


class ResolveProgramTest(unittest.TestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.bin = tmp.name
        self.tool = os.path.join(self.bin, "mytool")
        with open(self.tool, "w") as fh:
            fh.write("#!/bin/sh\n")
        os.chmod(self.tool, stat.S_IRWXU)

    def test_allowed_and_found(self):
        self.assertEqual(resolve_program("mytool", ["mytool", "pytest"], self.bin), self.tool)

    def test_not_allowed(self):
        with self.assertRaises(ToolError) as cm:
            resolve_program("rm", {"pytest", "mytool"}, self.bin)
        self.assertEqual(str(cm.exception), "'rm' is not an allowed program; allowed: mytool, pytest")

    def test_allowed_but_missing(self):
        with self.assertRaisesRegex(ToolError, "'ghost' is allowed but not installed on PATH"):
            resolve_program("ghost", ["ghost"], self.bin)

    def test_paths_are_refused(self):
        for name in (self.tool, "./mytool", "bin/mytool", ""):
            with self.assertRaisesRegex(ToolError, "bare program name", msg=name):
                resolve_program(name, ["mytool", self.tool, "./mytool"], self.bin)


if __name__ == "__main__":
    unittest.main()
