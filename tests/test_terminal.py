"""golem on a real terminal: a pseudo-terminal (the `pty` module) 60 columns wide, with
`golem fix` as a child process against a loopback model server. What a person sees there:
the model's words dimmed, a status line that ticks during the baseline and during a model
call, no line wider than the terminal, the diff stat and a coloured diff at the end, and the
verdict once; -quiet, -color never, NO_COLOR and FORCE_COLOR (on a pipe) change that."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import subprocess
import sys
import termios

from tests.fixtures import AMBIENT, BUGGY, FIX_EDIT, REPO_ROOT, GolemCase, make_repo
from tests.provider_server import Reply, chat

COLUMNS = 60
SGR = re.compile(r"\x1b\[[0-9;]*m")
# the suite sleeps long enough for the status line to tick at least once during it
SLOW_TESTS = BUGGY["tests/test_calc.py"].replace(
    "class AddTest", "import time\n\n\nclass AddTest").replace(
    "    def test_zero(self):\n", "    def test_zero(self):\n        time.sleep(2.5)\n")


def screen_lines(output: str) -> list[str]:
    """Every line a terminal would show at some moment (colour removed)."""
    plain = SGR.sub("", output).replace("\x1b[K", "")
    return [piece for line in plain.split("\n") for piece in line.split("\r")]


class Terminal(GolemCase):
    def replies(self):
        # the first model call takes 2.5 s, so the status line ticks while it runs
        return [Reply(chat("Looking at calc.py: add subtracts, which is the bug here and "
                           "the whole of it, as the failing test says.",
                           tool_calls=[FIX_EDIT]), delay=2.5),
                chat("Fixed add: it returned a - b.")]

    def golem(self, *extra: str, env: dict | None = None, tty: bool = True,
              files=None, server=None) -> str:
        self.runs = getattr(self, "runs", 0) + 1
        repo = make_repo(self.tmp, files or {**BUGGY, "tests/test_calc.py": SLOW_TESTS},
                         name=f"repo{self.runs}")
        server = server or self.serve(self.replies())
        environ = {k: v for k, v in os.environ.items() if k not in AMBIENT
                   and k not in ("NO_COLOR", "FORCE_COLOR")}
        environ.update(TERM="xterm-256color", PYTHONPATH=REPO_ROOT, **(env or {}))
        argv = [sys.executable, "-m", "golem", "fix", "-dir", repo, "-test",
                "python3 -m unittest discover -s tests", "-provider", "openai",
                "-base-url", server.url, "-sandbox", "none", *extra]
        if not tty:
            done = subprocess.run(argv, env=environ, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=120, cwd=self.tmp)
            return done.stdout + done.stderr
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
        child = subprocess.Popen(argv, env=environ, stdin=slave, stdout=slave, stderr=slave,
                                 cwd=self.tmp, start_new_session=True)
        os.close(slave)
        chunks = []
        try:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError as exc:      # EIO: the child closed the terminal
                    if exc.errno != errno.EIO:
                        raise
                    break
                if not data:
                    break
                chunks.append(data)
        finally:
            os.close(master)
            child.wait(timeout=120)
        self.assertEqual(child.returncode, 0, b"".join(chunks).decode(errors="replace"))
        return b"".join(chunks).decode("utf-8", errors="replace")

    def test_what_a_person_sees(self):
        output = self.golem()
        lines = screen_lines(output)
        # the verdict once
        self.assertEqual(SGR.sub("", output).count("VERIFIED:"), 1, output)
        # no progress line wider than the terminal (one that fills it wraps); the verdict
        # line on stdout is the result, whole
        self.assertEqual([line for line in lines if len(line) >= COLUMNS
                          and not line.startswith("VERIFIED:")], [])
        # the model's words between tool calls, dimmed and cut with an ellipsis
        self.assertIn("\x1b[2m1 : Looking at calc.py", output)
        self.assertTrue(any(line.startswith("1 : Looking") and line.endswith("…")
                            for line in lines))
        # the status line ticked during the baseline and during the slow model call
        self.assertTrue(any(re.search(r"\[baseline [1-9]s\]", line) for line in lines), lines)
        self.assertTrue(any(re.search(r"^\[model [1-9]s \| step 1/50 \|", line)
                            for line in lines), lines)
        # and never stays: the last thing on the screen is the verdict
        self.assertTrue(SGR.sub("", output).rstrip().endswith("no test file was modified"))
        # the diff stat and a coloured diff of the change at the end
        self.assertIn(" calc.py | ", SGR.sub("", output))
        self.assertIn("\x1b[31m-    return a - b\x1b[0m", output)
        self.assertIn("\x1b[32m+    return a + b\x1b[0m", output)
        self.assertIn("\x1b[32mVERIFIED:", output)

    def test_attempts_each_have_their_part_of_the_status_line_and_their_prefix(self):
        from tests.provider_server import ProviderServer
        server = self.enterContext(ProviderServer(by_model={
            "a": self.replies(), "b": [Reply(chat("Reading first.", tool_calls=[
                ("read_file", {"path": "calc.py"})]), delay=2.5)] + self.replies()}))
        from tests.adversarial import bwrap_or_skip
        bwrap_or_skip(self)     # side by side only under bubblewrap (one at a time under none)
        output = self.golem("-attempts", "2", "-jobs", "2", "-models", "a,b", "-sandbox", "bwrap",
                            server=server)
        lines = screen_lines(output)
        self.assertTrue(any(re.search(r"^\[1 model [1-9]s \| 2 model [1-9]s", line)
                            for line in lines), lines)
        self.assertTrue(any(line.startswith("[1] 1 : Looking") for line in lines), lines)
        self.assertTrue(any(line.startswith("[2] 1 : Reading first.") for line in lines))
        self.assertEqual([line for line in lines if len(line) >= COLUMNS
                          and not line.startswith("VERIFIED:")], [])
        # the verdict once (each attempt's own line names it after its number)
        self.assertEqual(len([line for line in lines if line.startswith("VERIFIED:")]), 1)

    def test_quiet_shows_the_verdict_alone(self):
        output = self.golem("-quiet")
        self.assertEqual(SGR.sub("", output).strip().splitlines(),
                         [line for line in SGR.sub("", output).strip().splitlines()
                          if line.startswith("VERIFIED:")])
        self.assertIn("VERIFIED:", output)

    def test_color_never_and_no_color(self):
        for extra, env in ((("-color", "never"), {}), ((), {"NO_COLOR": "1"})):
            with self.subTest(extra=extra, env=env):
                output = self.golem(*extra, env=env, files=BUGGY)
                self.assertIsNone(SGR.search(output), output)
                self.assertIn("VERIFIED:", output)
                self.assertIn("+    return a + b", output)

    def test_force_color_colours_a_pipe_and_pipes_are_plain_otherwise(self):
        plain = self.golem(tty=False, files=BUGGY)
        self.assertNotIn("\x1b", plain)
        self.assertNotIn("\r", plain)
        self.assertIn("1 : Looking at calc.py", plain)
        forced = self.golem(tty=False, files=BUGGY, env={"FORCE_COLOR": "1"})
        self.assertIn("\x1b[32m+    return a + b", forced)
        self.assertNotIn("\r", forced)      # colour, but no status line: not a terminal
        always = self.golem("-color", "always", tty=False, files=BUGGY)
        self.assertIn("\x1b[32mVERIFIED:", always)

    def test_verbose_adds_tool_results(self):
        plain = self.golem(tty=False, files=BUGGY)
        verbose = self.golem("-verbose", tty=False, files=BUGGY)
        self.assertNotIn("1 = edited calc.py", plain)
        self.assertIn("1 = edited calc.py", verbose)
