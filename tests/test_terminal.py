"""golem on a real terminal: a pseudo-terminal (the `pty` module) 60 columns wide (40 for
the narrow one), with `golem fix` as a child process against a loopback model server. What a
person sees there: the model's words dimmed, a status line through every phase whose clock
counts from golem's start against -wall as given, no line wider than the terminal and none
cut (long lines wrap), the diff stat and a coloured diff at the end, and the verdict once;
-quiet (the status line alone), -color never, NO_COLOR and FORCE_COLOR (on a pipe) change
that, and a pipe gets the model's words whole."""

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


def final_screen(output: str) -> list[str]:
    """The lines left on the terminal at the end: `\r` and erase-line (`ESC [K`) applied."""
    rows, row = [], ""
    for piece in re.split(r"(\r\n|\n|\r\x1b\[K|\r)", SGR.sub("", output)):
        if piece in ("\n", "\r\n"):
            rows.append(row)
            row = ""
        elif piece in ("\r\x1b[K", "\r"):
            row = ""
        else:
            row += piece.replace("\x1b[K", "")
    return rows + ([row] if row else [])


def joined(lines: list[str]) -> str:
    """The rows as one text, each wrapped line's rows run together (blanks collapsed)."""
    return " ".join(" ".join(lines).split())


class Terminal(GolemCase):
    def replies(self):
        # the first model call takes 2.5 s, so the status line ticks while it runs
        return [Reply(chat("Looking at calc.py: add subtracts, which is the bug here and "
                           "the whole of it, as the failing test says.",
                           tool_calls=[FIX_EDIT]), delay=2.5),
                chat("Fixed add: it returned a - b.")]

    def golem(self, *extra: str, env: dict | None = None, tty: bool = True,
              files=None, server=None, columns: int = COLUMNS) -> str:
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
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
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
        # the model's words between tool calls, dimmed and wrapped, never cut
        self.assertIn("\x1b[2m1 : Looking at calc.py", output)
        self.assertNotIn("…", output)
        self.assertIn("the whole of it, as the failing test says.", joined(lines))
        # the status line ticked during the baseline and during the slow model call
        self.assertTrue(any(re.search(r"\[baseline [1-9]s \| [1-9]s/30m\]", line)
                            for line in lines), lines)
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

    def test_quiet_shows_the_status_line_alone_then_the_verdict(self):
        output = self.golem("-quiet")
        # nothing stays on the screen but the verdict
        self.assertEqual([line for line in final_screen(output) if line.strip()],
                         [line for line in final_screen(output) if line.startswith("VERIFIED:")])
        self.assertIn("VERIFIED:", output)
        # and the screen was never blank while golem worked: the status line, alone
        lines = [line for line in screen_lines(output) if line.strip()]
        self.assertTrue(any(re.search(r"^\[baseline [1-9]s \|", line) for line in lines), lines)
        self.assertTrue(any(line.startswith("[model ") for line in lines), lines)
        self.assertEqual([line for line in lines if not line.startswith(("[", "VERIFIED:"))], [])

    def test_forty_columns_wrap_and_never_cut(self):
        long_words = ("Looking at calc.py: add subtracts, which is the bug here and the whole "
                      "of it, as the failing test says; nothing else in the module needs to "
                      "change for the suite to pass again.")
        long_line = "    return a + b  # " + "addition, " * 8 + "end-of-the-line"
        files = {**BUGGY, "tests/test_calc.py": SLOW_TESTS}
        edit = ("edit_file", {"path": "calc.py", "old_string": "    return a - b",
                              "new_string": long_line})
        server = self.serve([Reply(chat(long_words, tool_calls=[edit])),
                             chat("Fixed add: " + "it returned a - b, " * 10 + "the end.")])
        output = self.golem("-wall", "30m", server=server, files=files, columns=40)
        lines = screen_lines(output)
        self.assertNotIn("…", output)
        self.assertEqual([line for line in lines if len(line) >= 40
                          and not line.startswith("VERIFIED:")], [])
        text = joined(final_screen(output))
        self.assertIn("1 : " + long_words, text)
        self.assertIn(" ".join(("+" + long_line).split()), text)     # the diff line, whole
        self.assertRegex(text, r"`golem undo [0-9a-f-]+` puts them back")
        # a wrapped line's next rows are indented past its lead, so none reads as a new line
        model_rows = [line for line in final_screen(output) if "Looking at" in line]
        start = final_screen(output).index(model_rows[0])
        self.assertTrue(final_screen(output)[start + 1].startswith("    "))

    def test_the_status_clock_counts_from_the_start_through_every_phase(self):
        output = self.golem("-wall", "30m")
        lines = screen_lines(output)
        for phase in ("baseline", "preflight", "snapshot", "model", "verification"):
            self.assertTrue(any(line.startswith(f"[{phase} ") for line in lines),
                            (phase, lines))
        # the wall as given, never what is left of it
        walls = {m.group(1) for line in lines for m in [re.search(r"/(\w+)\]$", line)] if m}
        self.assertEqual(walls, {"30m"}, lines)
        # the baseline slept 2.5 s, so the first model call's clock, counted from the
        # start as elapsed_s is, shows at least 2 s
        first = next(line for line in lines if line.startswith("[model "))
        self.assertGreaterEqual(int(re.search(r"\| (\d+)s/30m\]$", first).group(1)), 2, first)

    def test_a_pipe_gets_the_model_text_whole(self):
        final = "Fixed add: " + "it returned a - b instead of a + b; " * 12 + "done."
        server = self.serve([Reply(chat("Fixing.", tool_calls=[FIX_EDIT])), chat(final)])
        plain = self.golem(tty=False, files=BUGGY, server=server)
        self.assertIn(f"2 : {final}\n", plain)
        # the start notes name what -wall keeps back for the verification
        self.assertRegex(plain, r"(?m)^\. -wall 30m: \d+\.\ds of it kept for the verification")

    def test_a_provider_retry_reads_as_a_retry_not_an_attempt(self):
        server = self.serve([Reply({"error": {"message": "slow down"}}, 429,
                                   headers={"Retry-After": "0"}),
                             Reply(chat("Fixing.", tool_calls=[FIX_EDIT])), chat("Fixed.")])
        plain = self.golem(tty=False, files=BUGGY, server=server)
        retry = [line for line in plain.splitlines() if "retry" in line]
        self.assertEqual(len(retry), 1, plain)
        self.assertRegex(retry[0], r"^~ model call failed, retrying in [\d.]+s \(try 1 of 6\)")
        self.assertFalse(any(line.startswith("[1]") for line in plain.splitlines()), plain)

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
